"""The fleet's host table: a line-API widget that paints only the rows on screen.

At 500 hosts a DataTable re-rendered every cell of the visible rows on any change (each refresh
changes most of them: the data's age, utilisation) and re-laid out for each of the ~1,000 cells
updated: four-fifths of the overview's own CPU (issue 20: under 5 % of a core at 500 hosts). Here a
refresh is one list of rows: their text is formatted with one format string, and a line is
painted only when it is on screen. One style a row (down, stuck, cursor), the header's
component class for the header. The first column (the host) stays put when the others scroll
sideways: on an 80-column terminal the sparklines are off screen, and a row without its host's
name says nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop import cells as C
from gputop.ui.paint.row_cursor import CURSOR_BINDINGS, RowCursor

GAP = 2  # spaces between columns


@dataclass(frozen=True, slots=True)
class HostRow:
    """One row: its key (the host's name), its cells in column order, and how it looks."""

    name: str
    cells: tuple[str, ...]
    state: str = ""  # "", "down" or "stuck": the row's style


class HostTable(RowCursor, ScrollView, can_focus=True):
    """Rows of cells under a header; a row cursor; Enter chooses a row, a header click a column."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "host-table--header",
        "host-table--cursor",
        "host-table--down",
        "host-table--stuck",
    }
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "choose", "Details", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("up,k", "cursor(-1)", "Up", show=False),
        *CURSOR_BINDINGS,
    ]

    @dataclass
    class RowChosen(Message):
        """Enter (or a click on the row under the cursor) on a host."""

        name: str

    @dataclass
    class HeaderClicked(Message):
        """A click on a column's header."""

        column: str

    def __init__(
        self, columns: Sequence[str], *, right: frozenset[str], id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.columns = tuple(columns)
        self.labels = self.columns  # the header's text of each column (a sort marker added)
        self.right = right  # right-aligned columns
        self.rows: tuple[HostRow, ...] = ()
        self.cursor = 0
        self._widths: tuple[int, ...] = tuple(len(c) for c in self.columns)
        self._layout = C.RowLayout((), GAP)
        self._lines: list[str] = []  # each row's text, formatted on demand
        self._header = ""
        self._styles: dict[str, Style] = {}
        self._painted: dict[int, tuple[str, Style, Strip]] = {}
        self._set_format()

    # -- data ---------------------------------------------------------------------------
    def show(self, rows: Sequence[HostRow], labels: Sequence[str] | None = None) -> None:
        """These rows, in this order; the cursor stays on its host while it is listed."""
        current = self.cursor_name
        self.rows = tuple(rows)
        if labels is not None:
            self.labels = tuple(labels)
        # In terminal cells (gputop.cells): a CJK character takes two.
        widths = [C.cell_len(label) for label in self.labels]
        for row in self.rows:
            for i, cell in enumerate(row.cells):
                widths[i] = max(widths[i], C.cell_len(cell))
        if tuple(widths) != self._widths:
            self._widths = tuple(widths)
            self._set_format()
        self._header = self._layout.line(self.labels)
        self._lines = [""] * len(self.rows)
        names = [r.name for r in self.rows]
        if current is not None and current in names:
            self.cursor = names.index(current)
        else:
            self.cursor = max(0, min(self.cursor, len(self.rows) - 1))
        self.virtual_size = Size(C.cell_len(self._header), len(self.rows) + 1)
        self.refresh()

    @property
    def row_names(self) -> list[str]:
        """The hosts in table order."""
        return [r.name for r in self.rows]

    @property
    def cursor_name(self) -> str | None:
        """The host under the cursor."""
        return self.rows[self.cursor].name if 0 <= self.cursor < len(self.rows) else None

    def cell(self, name: str, column: str) -> str:
        """What a cell shows (for tests and screen readers)."""
        index = self.columns.index(column)
        for row in self.rows:
            if row.name == name:
                return row.cells[index]
        raise KeyError(name)

    # -- keys and mouse -----------------------------------------------------------------
    @property
    def row_count(self) -> int:
        """Rows shown."""
        return len(self.rows)

    def action_choose(self) -> None:
        name = self.cursor_name
        if name is not None:
            self.post_message(self.RowChosen(name))

    @property
    def fixed_width(self) -> int:
        """Cells the first column keeps on screen (its lead blank, width and gap)."""
        return 1 + self._widths[0] + GAP if self._widths else 0

    def header_clicked(self, x: int) -> None:
        # x counts the scrolled cells; the first column's are never scrolled
        on_screen = x - int(self.scroll_x)
        column = self._column_at(on_screen if on_screen < self.fixed_width else x)
        if column is not None:
            self.post_message(self.HeaderClicked(column))

    def _column_at(self, x: int) -> str | None:
        start = 1
        for column, width in zip(self.columns, self._widths, strict=True):
            if start <= x < start + width + GAP:
                return column
            start += width + GAP
        return None

    # -- paint --------------------------------------------------------------------------
    def _set_format(self) -> None:
        self._layout = C.RowLayout(
            [
                (i, width, column in self.right)
                for i, (column, width) in enumerate(zip(self.columns, self._widths, strict=True))
            ],
            GAP,
        )

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        scroll_x, scroll_y = int(self.scroll_x), int(self.scroll_y)
        base = self._style("base")
        if y == 0:
            text, style = self._header, self._style("host-table--header")
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                return Strip.blank(width, base)
            row = self.rows[index]
            text = self._lines[index]
            if not text:
                text = self._lines[index] = self._layout.line(row.cells)
            style = base
            if row.state:
                style = self._style(f"host-table--{row.state}")
            if index == self.cursor:
                style += self._style("host-table--cursor")
        # Exactly ``width`` cells, or the terminal keeps another row's text past a short one.
        fixed = min(self.fixed_width, width)
        if scroll_x and fixed:  # the host's column, then the others from where they scrolled
            line = C.window(text, 0, fixed) + C.window(text, fixed + scroll_x, width - fixed)
        else:
            line = C.window(text, scroll_x, width)
        return self._paint(y, line, style, width, Strip)
