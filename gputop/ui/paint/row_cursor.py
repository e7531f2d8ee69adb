"""A row cursor for line-API tables whose line 0 is a header that stays put (the process table,
the fleet's host table): moving it, paging, keeping it in view, and the rows' styles resolved
once per CSS, theme or focus change instead of once per painted line."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.strip import Strip

if TYPE_CHECKING:
    from textual.scroll_view import ScrollView

    _Base = ScrollView
else:
    _Base = object  # a plain mixin at run time, as FramedLines (Textual follows one DOM base)

CURSOR_BINDINGS = [
    Binding("pagedown", "page(1)", "Page down", show=False),
    Binding("pageup", "page(-1)", "Page up", show=False),
    Binding("home", "cursor(-1000000)", "First", show=False),
    Binding("end", "cursor(1000000)", "Last", show=False),
]


class RowCursor(_Base):
    """``cursor`` indexes the rows (line ``cursor + 1``); ``row_count`` says how many there are;
    a click on the header calls ``header_clicked``, on the cursor's row ``action_choose``."""

    cursor: int
    _styles: dict[str, Style]
    _painted: dict[int, tuple[str, Style, Strip]]  # each painted line's text, style and strip

    @property
    def row_count(self) -> int:
        raise NotImplementedError

    def header_clicked(self, x: int) -> None:
        """A click on the header at content column ``x`` (scrolling included)."""

    def action_choose(self) -> None:
        """Enter, or a click on the row under the cursor."""

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            self.header_clicked(offset.x + int(self.scroll_x))
            return
        index = int(self.scroll_y) + offset.y - 1
        if index >= self.row_count:
            return
        if index == self.cursor:
            self.action_choose()  # a click on the selected row opens it
        self.move_cursor(index)

    def _paint(
        self,
        y: int,
        line: str,
        style: Style,
        width: int,
        make: Callable[[list[Segment], int], Strip],
    ) -> Strip:
        """Line ``y``'s strip: the same object while its text and style are (FramedLines
        reuses a joined row then)."""
        cached = self._painted.get(y)
        if cached is not None and cached[0] == line and cached[1] == style:
            return cached[2]
        strip = make([Segment(line, style)], width)
        self._painted[y] = (line, style, strip)
        return strip

    def move_cursor(self, row: int) -> None:
        """Put the cursor on a row (clamped) and scroll it into view."""
        old = self.cursor
        count = self.row_count
        self.cursor = max(0, min(count - 1, row)) if count else 0
        if old != self.cursor:
            self.refresh_line(old + 1)
            self.refresh_line(self.cursor + 1)
        body = max(1, self.scrollable_content_region.height - 1)
        if self.cursor < self.scroll_y:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= self.scroll_y + body:
            self.scroll_to(y=self.cursor - body + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor + step)

    def action_page(self, pages: int) -> None:
        self.move_cursor(self.cursor + pages * max(1, self.scrollable_content_region.height - 1))

    def _style(self, name: str) -> Style:
        """The widget's style ("base") or it plus a component class's, cached."""
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = base if name == "base" else base + self.get_component_rich_style(name)
            self._styles[name] = style
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        super().notify_style_update()

    def on_focus(self) -> None:
        self._styles.clear()  # the cursor's style follows focus
        self.refresh_line(self.cursor + 1)

    def on_blur(self) -> None:
        self._styles.clear()
        self.refresh_line(self.cursor + 1)
