"""Text widths in terminal cells: padding, cutting and scrolling that count cells, not characters.

``ljust`` counts characters, but a terminal draws ``用`` in two cells and a combining accent in
none: a CJK user name pushes the rest of its row right, and a command of combining marks leaves
cells undrawn (and another row's text showing there). So every view that pads, cuts or scrolls
text from outside measures it here, by Rich's rules (wcwidth's: two cells for East Asian wide
and fullwidth characters, none for combining marks and controls), the rules Textual paints the
dashboard by. Text measured here is clean (:mod:`gputop.engine.sanitize`): the zero-width joiner
and variation selectors, which terminals and Rich count differently, are escapes by then.

Only ``rich.cells`` is loaded (about 3 ms for a one-shot command), never Textual.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len as _rich_cell_len
from rich.cells import get_character_cell_size as _char_cells

ELLIPSIS = "…"


def _plain(text: str) -> bool:
    """Printable ASCII: one cell per character (nearly every name and command)."""
    return text.isascii() and text.isprintable()


def cell_len(text: str) -> int:
    """``text``'s width in terminal cells."""
    if _plain(text):
        return len(text)
    if "\u200d" in text or "\ufe0f" in text:  # a joiner or VS16: Rich's rules for sequences
        return _rich_cell_len(text)
    # Character by character, not Rich's cell_len: that keeps each distinct string it measured
    # (4,096 of them), and a dashboard's lines are new every second: ~1.5 MiB kept for nothing
    # (issue 42). Its per-character sizes are cached too, bounded by the characters there are.
    return sum(map(_char_cells, text))


def cut(text: str, width: int) -> str:
    """The longest start of ``text`` at most ``width`` cells wide (with the zero-width marks
    that follow its last character)."""
    if _plain(text):
        return text[: max(width, 0)]
    used = 0
    for index, char in enumerate(text):
        used += _char_cells(char)
        if used > width:
            return text[:index]
    return text


def truncate(text: str, width: int, ellipsis: str = ELLIPSIS) -> str:
    """``text`` when it fits in ``width`` cells, else its start ending in ``ellipsis``."""
    if cell_len(text) <= width:
        return text
    room = width - cell_len(ellipsis)
    if room < 0:
        return cut(ellipsis, width)
    return cut(text, room) + ellipsis


def ljust(text: str, width: int) -> str:
    """``text`` with blanks after it to ``width`` cells (never cut)."""
    return text + " " * (width - cell_len(text))


def rjust(text: str, width: int) -> str:
    """``text`` with blanks before it to ``width`` cells (never cut)."""
    return " " * (width - cell_len(text)) + text


def fit(text: str, width: int, ellipsis: str = ELLIPSIS) -> str:
    """``text`` made exactly ``width`` cells: padded, or cut ending in ``ellipsis``."""
    return ljust(truncate(text, width, ellipsis), width)


def window(text: str, start: int, width: int) -> str:
    """Exactly ``width`` cells of ``text`` from cell ``start`` on (a row scrolled sideways).

    A wide character cut by either edge shows as a blank in the cell that is inside; zero-width
    marks go with the character before them.
    """
    if _plain(text):
        return text[start : start + width].ljust(width)
    out: list[str] = []
    end = start + width
    at = 0  # the cell the next character starts in
    kept = start == 0  # whether the last character with cells was kept whole (marks that
    # lead the text go with the first cell, as Rich keeps them)
    for char in text:
        cells = _char_cells(char)
        if cells == 0:
            if kept:
                out.append(char)
            continue
        if at >= end:
            break
        kept = at >= start and at + cells <= end
        if kept:
            out.append(char)
        elif at + cells > start:  # a wide character across an edge: its inside half
            out.append(" " * (min(at + cells, end) - max(at, start)))
        at += cells
    body = "".join(out)
    return body + " " * (width - cell_len(body))


class RowLayout:
    """A table's columns laid out in one line: each cell padded to its width in cells, ``gap``
    blanks between, one blank before the first (a table's rows and its header alike).

    ``columns``: (index into the row's cells, width in cells, right-aligned), in screen order; a
    width of 0 pads nothing. An ASCII row (nearly every one) is one format call in C; a row with
    a wide or combining character is padded cell by cell. Cells are the format's arguments,
    never its template, so braces in them are safe.
    """

    def __init__(self, columns: Sequence[tuple[int, int, bool]], gap: int) -> None:
        self._columns = tuple(columns)
        self._gap = " " * gap
        fields = [
            f"{{{at}:{'>' if right else '<'}{width}}}" if width else f"{{{at}}}"
            for at, width, right in self._columns
        ]
        self._format = " " + self._gap.join(fields)

    def line(self, cells: Sequence[str]) -> str:
        """The row's text."""
        line = self._format.format(*cells)
        if line.isascii():  # a cell a character: the format's padding is right
            return line
        return " " + self._gap.join(
            rjust(cells[at], width) if right else ljust(cells[at], width)
            for at, width, right in self._columns
        )
