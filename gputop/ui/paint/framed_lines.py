"""Paint a line-API widget's content rows inside a frame cut once from Textual's own render.

Textual sends every refreshed line through its full styles pipeline (border, padding, tint,
opacity, hatch, line filters), about 50 µs a line with several new objects each. At 1 Hz the
dashboard refreshes ~80 lines (eight panels and the process table), and that pipeline was most of
its CPU time. A bordered, padded widget has the same left and right edges on every content row,
so :class:`FramedLines` takes the top and bottom rows and those edges from Textual's render (CSS,
themes and focus styles stay exact, whatever the border) and joins each content row into them.
Content rows are rejoined only when the widget's ``render_line`` returns a different strip.
Widgets with effects this does not replicate (tint, opacity, text opacity, hatch) fall back to
Textual's path, and so does every widget when ``GPUTOP_PLAIN_TEXTUAL=1``
(``gputop.ui.paint.PLAIN_TEXTUAL``): then rows are painted by Textual's ``render_lines``. Rows
are repainted through ``refresh()`` either way.

"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.filter import ANSIToTruecolor, LineFilter
from textual.geometry import Region, Spacing
from textual.strip import Strip
from textual.widget import Widget

from gputop.ui import paint
from gputop.ui.paint.bare_strip import bare_strip

# A plain mixin at run time: Textual follows only the first DOMNode base of a class for default
# CSS, type selectors and bindings, so a Widget subclass here would hide ScrollView's.
if TYPE_CHECKING:
    _Base = Widget
else:
    _Base = object


@dataclass(frozen=True, slots=True)
class _Frame:
    key: tuple[object, ...]
    plain: bool  # no effect we don't replicate: the fast path may be used
    rows: dict[int, Strip]  # the border and padding rows, by widget y
    left: Strip
    right: Strip
    gutter: Spacing
    width: int
    height: int
    content_width: int
    pad: Style  # for content rows narrower than the content area
    background: Color  # what line filters blend against


# Style -> whether Textual's ANSIToTruecolor filter leaves it as it is. Themes are truecolor, so
# for nearly every row it does, and skipping it saves rebuilding each segment of a changed row.
_TRUECOLOR: dict[Style, bool] = {}


def _all_truecolor(segments: Sequence[Segment]) -> bool:
    known = _TRUECOLOR.get
    for _, style, _ in segments:
        if style is None:
            continue
        plain = known(style)
        if plain is None:
            if len(_TRUECOLOR) >= 1024:  # new themes make new styles: stay bounded
                _TRUECOLOR.clear()
            color, bgcolor = style.color, style.bgcolor
            plain = _TRUECOLOR[style] = (
                (color is None or color.triplet is not None)
                and (bgcolor is None or bgcolor.triplet is not None)
                and not style.dim
            )
        if not plain:
            return False
    return True


class FramedLines(_Base):
    """Mixin for line-API widgets, listed before the Textual base: fast ``render_lines``.

    A subclass's ``render_line(y)`` should return the same Strip object while a content row is
    unchanged, so the joined row is reused.
    """

    _frame: _Frame | None = None
    _frame_version = 0
    _joined: dict[int, tuple[Strip, Strip]]

    def refresh_rows(self, rows: Iterable[int]) -> None:
        """Repaint these content rows (viewport y), each as a whole widget row, edges included.

        Textual writes a refreshed row from the widget's left edge; when the dirty region starts
        inside the border it first cuts a new strip (~20 µs a row). Dirtying the whole row lets
        it write the joined row as it is.
        """
        left = self.styles.gutter.left
        width = self.outer_size.width
        regions = [Region(-left, y, width, 1) for y in rows]
        if regions:
            self.refresh(*regions)  # refresh() with no region would repaint the whole widget

    def notify_style_update(self) -> None:
        self._frame_version += 1
        super().notify_style_update()

    def render_lines(self, crop: Region) -> list[Strip]:
        if paint.PLAIN_TEXTUAL:
            return super().render_lines(crop)
        width, height = self.region.size
        filters = self.get_line_filters()
        frame = self._frame_for(width, height, filters)
        if not frame.plain:
            return super().render_lines(crop)
        strips: list[Strip] = []
        self._begin_paint()
        try:
            self._paint_rows(crop, frame, filters, strips)
        finally:
            self._end_paint()
        if crop.column_span != (0, width):
            x1, x2 = crop.column_span
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def _begin_paint(self) -> None:
        """Called before a paint asks for content rows (a hook to cache per-paint values)."""

    def _end_paint(self) -> None:
        """Called after a paint."""

    def _paint_rows(
        self, crop: Region, frame: _Frame, filters: Sequence[LineFilter], strips: list[Strip]
    ) -> None:
        joined = self._joined
        width = frame.width
        top, bottom = frame.gutter.top, frame.height - frame.gutter.bottom
        for y in crop.line_range:
            if y < top or y >= bottom:
                strips.append(frame.rows[y])
                continue
            content = self.render_line(y - top)
            cached = joined.get(y)
            if cached is not None and cached[0] is content:
                strips.append(cached[1])
                continue
            fitted = content
            if content.cell_length != frame.content_width:
                fitted = content.adjust_cell_length(frame.content_width, frame.pad)
            segments = list(fitted)
            for line_filter in filters:
                if type(line_filter) is ANSIToTruecolor and _all_truecolor(segments):
                    continue  # it would hand back the same styles
                segments = line_filter.apply(segments, frame.background)
            row = bare_strip([*frame.left, *segments, *frame.right], width)  # one Strip, not three
            joined[y] = (content, row)
            strips.append(row)

    def _frame_for(self, width: int, height: int, filters: Sequence[LineFilter]) -> _Frame:
        gutter = self.styles.gutter
        key = (
            width,
            height,
            gutter,
            self._frame_version,
            self.has_focus,
            self.border_title,
            self.border_subtitle,
            self.app.theme,
            tuple(filters),
        )
        frame = self._frame
        if frame is not None and frame.key == key:
            return frame
        styles = self.styles
        hatched = styles.has_rule("hatch") and styles.hatch != "none"
        plain = not (styles.tint.a or styles.text_opacity != 1.0 or hatched or self.opacity != 1.0)

        def textual_row(y: int) -> Strip:
            return super(FramedLines, self).render_lines(Region(0, y, width, 1))[0]

        top, bottom = gutter.top, height - gutter.bottom
        rows = {y: textual_row(y) for y in range(height) if y < top or y >= bottom} if plain else {}
        if plain and top < bottom:
            sample = textual_row(top)
            left, right = sample.crop(0, gutter.left), sample.crop(width - gutter.right, width)
        else:
            left = right = Strip([], 0)
        frame = _Frame(
            key=key,
            plain=plain,
            rows=rows,
            left=left,
            right=right,
            gutter=gutter,
            width=width,
            height=height,
            content_width=max(0, width - gutter.left - gutter.right),
            pad=Style(bgcolor=self.rich_style.bgcolor),
            background=self.background_colors[1],
        )
        self._frame, self._joined = frame, {}
        return frame
