"""A styled line of text pieces: cheap to build, to compare with the last tick, and to paint.

Rich's Text does much more (wrapping, markup, spans over ranges), and building, truncating and
rendering one per panel line each tick cost more CPU than everything else the panels did.
Its strips are bare strips (see ``bare_strip``): ordinary Strips when ``GPUTOP_PLAIN_TEXTUAL=1``.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from gputop.cells import cell_len
from gputop.ui.paint.bare_strip import bare_strip

ELLIPSIS = "…"

# base + style, which rich works out through a Python method and an lru_cache per piece.
_COMBINED: dict[tuple[Style, Style], Style] = {}


def _combine(base: Style, style: Style) -> Style:
    if len(_COMBINED) >= 1024:  # themes and CSS changes make new styles; keep this bounded
        _COMBINED.clear()
    combined = _COMBINED[base, style] = base + style
    return combined


class Line:
    """Text pieces with optional rich styles, appended left to right."""

    __slots__ = ("parts",)

    def __init__(self, text: str = "", style: Style | None = None) -> None:
        self.parts: list[tuple[str, Style | None]] = [(text, style)] if text else []

    def append(self, text: str, style: Style | None = None) -> Line:
        """Add a piece (empty text adds nothing); returns the line for chaining."""
        if text:
            self.parts.append((text, style))
        return self

    @property
    def plain(self) -> str:
        """The text without styles."""
        return "".join(text for text, _ in self.parts)

    def key(self) -> tuple[tuple[str, Style | None], ...]:
        """A value equal for two lines that would paint the same."""
        return tuple(self.parts)

    def to_strip(self, width: int, base: Style) -> Strip:
        """Exactly ``width`` cells: padded with blanks, or cut with an ellipsis when too long."""
        parts = self.parts
        get = _COMBINED.get
        segments = []
        for text, style in parts:
            if style is None:
                segments.append(Segment(text, base))
            else:
                segments.append(Segment(text, get((base, style)) or _combine(base, style)))
        length = cell_len("".join([text for text, _ in parts]))
        if length > width:
            if not width:
                return Strip([], 0)
            cut = list(Strip(segments, length).crop(0, width - 1))
            mark = cut[-1].style if cut else base  # the ellipsis keeps the cut text's style
            return bare_strip([*cut, Segment(ELLIPSIS, mark)], width)
        if length < width:
            segments.append(Segment(" " * (width - length), base))
        return bare_strip(segments, width)

    def to_text(self) -> Text:
        """The same line as rich Text (for tests and anything that wants markup-free text)."""
        out = Text(no_wrap=True, overflow="ellipsis")
        for text, style in self.parts:
            out.append(text, style)
        return out
