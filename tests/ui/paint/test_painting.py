"""The dashboard's cheap painting path: Line strips, FramedLines rows and per-line repaints.

FramedLines must paint exactly what Textual's own styles pipeline paints (same characters, same
styles), in every state the widgets are shown in; GpuPanel must repaint only lines that changed.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip
from textual.widget import Widget

from gputop.ui.app import GputopApp
from gputop.ui.messages import SnapshotReady
from gputop.ui.paint.framed_lines import FramedLines, _all_truecolor
from gputop.ui.paint.line import Line
from gputop.ui.widgets.gpu_panel import GpuPanel
from tests.fakes import make_gpu
from tests.ui.data import SAMPLE_ROWS, proc_row, run, snapshot, visible_pids

RED = Style(color="red")


def cells(strip: Strip) -> list[tuple[str, Style | None]]:
    return [(ch, seg.style) for seg in strip for ch in seg.text]


# -- Line -------------------------------------------------------------------------------------
def test_line_pads_to_the_width_with_the_base_style() -> None:
    base = Style(color="white", bgcolor="black")
    strip = Line("ab").append("cd", RED).to_strip(6, base)
    assert strip.cell_length == 6 and strip.text == "abcd  "
    assert cells(strip)[2] == ("c", base + RED)
    assert cells(strip)[5] == (" ", base)


def test_a_long_line_is_cut_with_an_ellipsis_in_the_cut_texts_style() -> None:
    strip = Line("abc").append("defgh", RED).to_strip(5, Style())
    assert strip.text == "abcd…" and strip.cell_length == 5
    assert cells(strip)[-1] == ("…", RED)


def test_a_line_of_exactly_the_width_is_not_cut() -> None:
    assert Line("abcde").to_strip(5, Style()).text == "abcde"
    assert Line("abcdef").to_strip(0, Style()).cell_length == 0


def test_equal_lines_have_equal_keys_and_a_style_change_makes_them_differ() -> None:
    assert Line("a").append("b", RED).key() == Line("a").append("b", RED).key()
    assert Line("a").append("b", RED).key() != Line("a").append("b", Style(color="blue")).key()
    assert Line("a").append("").key() == Line("a").key()


# -- FramedLines paints what Textual paints ---------------------------------------------------
def textual_rows(widget: Widget) -> list[Strip]:
    """The widget painted by Textual's own pipeline (the path FramedLines replaces)."""
    assert isinstance(widget, FramedLines)
    base = next(
        c for c in type(widget).__mro__[1:] if c is not FramedLines and "render_lines" in c.__dict__
    )
    width, height = widget.region.size
    return list(base.render_lines(widget, Region(0, 0, width, height)))


def assert_same_paint(widget: Widget) -> None:
    width, height = widget.region.size
    ours = widget.render_lines(Region(0, 0, width, height))
    theirs = textual_rows(widget)
    assert [s.text for s in ours] == [s.text for s in theirs]
    for mine, textual in zip(ours, theirs, strict=True):
        # Blanks may differ in foreground colour, which nobody can see; everything else may not.
        visible = [(c, s) for c, s in cells(mine) if c != " "]
        expected = [(c, s) for c, s in cells(textual) if c != " "]
        assert visible == expected
        blanks = [s.bgcolor if s else None for c, s in cells(mine) if c == " "]
        assert blanks == [s.bgcolor if s else None for c, s in cells(textual) if c == " "]


def test_panels_table_and_header_paint_like_textual_at_every_density_and_when_focused() -> None:
    first = snapshot(SAMPLE_ROWS, gpus=(make_gpu(0), make_gpu(1, temperature_c=95)))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        for size in ((200, 60), (100, 30), (80, 24)):
            await pilot.resize_terminal(*size)
            await pilot.pause()
            for panel in app.query(GpuPanel):
                assert_same_paint(panel)
            assert_same_paint(app.main_screen.table)
            assert_same_paint(app.main_screen.header)
        app.main_screen.header.stale_s = 12.0  # the STALE marker has a style of its own
        await pilot.pause()
        assert "STALE 12 s" in app.main_screen.header.render().plain
        assert_same_paint(app.main_screen.header)
        app.query_one("#gpu-1", GpuPanel).focus()
        await pilot.pause()
        assert_same_paint(app.query_one("#gpu-1", GpuPanel))
        assert_same_paint(app.main_screen.table)  # blurred now: its cursor row looks different
        app.theme = "nord"
        await pilot.pause()
        for panel in app.query(GpuPanel):
            assert_same_paint(panel)
        assert_same_paint(app.main_screen.table)

    run(body, size=(200, 60), first=first)


def test_a_changed_panel_title_is_painted() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        top = panel.render_lines(Region(0, 0, *panel.region.size))[0].text
        assert "A100" in top
        app.main_screen.grid.update_snapshot(
            snapshot(SAMPLE_ROWS, gpus=(make_gpu(0, name="NVIDIA H100 80GB HBM3"), make_gpu(1))),
            app.history,
        )
        await pilot.pause()
        top = panel.render_lines(Region(0, 0, *panel.region.size))[0].text
        assert "H100" in top and "A100" not in top
        assert_same_paint(panel)

    run(body, size=(200, 60))


# -- only changed lines are repainted ---------------------------------------------------------
def spy_refresh(widget: Widget) -> list[tuple[Region, ...]]:
    """Records the regions of each repaint ``widget`` asks for (() for a whole-widget refresh)."""
    refreshed: list[tuple[Region, ...]] = []
    original = widget.refresh

    def spy(*regions: Region, **kwargs: Any) -> Widget:
        refreshed.append(regions)
        return original(*regions, **kwargs)

    widget.refresh = spy  # type: ignore[method-assign]
    return refreshed


def _line_of(panel: GpuPanel, text: str) -> int:
    """The first content line of ``panel`` that shows ``text``."""
    return next(i for i, line in enumerate(panel.content_lines()) if text in line.plain)


def test_a_panel_repaints_only_the_lines_whose_text_changed() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        assert panel.has_class("-full")
        refreshed = spy_refresh(panel)
        sample = panel.sample
        assert sample is not None
        panel.show(sample, app.history)
        assert refreshed == []  # nothing changed: nothing repainted
        temp = _line_of(panel, "TEMP")  # under the charts, as tall as the space allows
        panel.show(replace(sample, temperature_c=(sample.temperature_c or 0) + 7), app.history)
        assert len(refreshed) == 1 and [r.y for r in refreshed[0]] == [temp]  # the TEMP line

    run(body, size=(200, 60))


def test_the_table_repaints_nothing_when_no_row_changed() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        refreshed = spy_refresh(table)
        table.update_snapshot(snapshot(SAMPLE_ROWS, seq=2))  # the rows on screen, again
        assert refreshed == []  # (a refresh with no region would repaint the whole table)
        busier = replace(SAMPLE_ROWS[1], sm_util_percent=77)
        table.update_snapshot(snapshot((SAMPLE_ROWS[0], busier, *SAMPLE_ROWS[2:]), seq=3))
        assert len(refreshed) == 1 and len(refreshed[0]) == 1  # that one row, edges included
        assert refreshed[0][0].width == table.outer_size.width

    run(body, size=(200, 60))


def test_a_re_sort_repaints_the_rows_that_moved_not_the_table() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        # Stuck first (the holder 103), then GPU memory, largest first.
        assert visible_pids(app) == [103, 100, 101, 102]
        await pilot.press("down")  # the cursor on 100
        refreshed = spy_refresh(table)
        bigger = replace(SAMPLE_ROWS[1], used_memory_bytes=200 * 1024**3)
        table.update_snapshot(snapshot((SAMPLE_ROWS[0], bigger, *SAMPLE_ROWS[2:]), seq=2))
        assert visible_pids(app) == [103, 101, 100, 102]
        assert () not in refreshed  # no whole-table repaint for a re-sort
        # the two rows that swapped (line 0 is the header)
        assert [r.y for regions in refreshed for r in regions] == [2, 3]
        assert table.cursor == 2 and table.current is not None and table.current.pid == 100
        assert " 101 " in table.render_line(2).text and " 100 " in table.render_line(3).text

    run(body, size=(200, 60))


def test_sparklines_span_minutes_and_the_memory_line_rests_while_memory_is_flat() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        first = panel.sample
        assert first is not None
        busy = [replace(first, utilization_gpu_percent=u) for u in (90, 10, 10, 10)]
        for i in range(299):  # five minutes of samples, one spike at the start
            snap = snapshot(SAMPLE_ROWS, seq=i + 2, gpus=(busy[min(i, 3)], make_gpu(1)))
            app.history.append(snap)
            app.main_screen.grid.update_snapshot(snap, app.history)
        util_line = panel.content_lines()[0].plain
        assert "█" in util_line  # the spike 299 samples ago is still drawn

        mem = _line_of(panel, "MEM")
        steps = []
        # A new sample either lands in the newest character (UTIL's chart changes, MEM's rests)
        # or starts a new one (both charts grow by a character): within a few, the former.
        for i in range(8):
            refreshed = spy_refresh(panel)
            gpu = replace(first, utilization_gpu_percent=40 + 5 * i)
            snap = snapshot(SAMPLE_ROWS, seq=400 + i, gpus=(gpu, make_gpu(1)))
            app.history.append(snap)
            app.main_screen.grid.update_snapshot(snap, app.history)
            steps.append([r.y for regions in refreshed for r in regions])
        assert all(steps), steps  # UTIL changed every time
        assert any(max(ys) < mem for ys in steps), steps  # and MEM rested

    run(body, size=(200, 60))


def test_rows_with_ansi_colours_still_go_through_textuals_truecolor_filter() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        # An ANSI colour from CSS: Textual's filter turns it into truecolor, and so must we.
        app.stylesheet.add_source("HeaderBar, ProcessTable { color: ansi_red; }")
        app.refresh_css()
        await pilot.pause()
        for widget in (app.main_screen.header, app.main_screen.table):
            assert_same_paint(widget)
            rows = widget.render_lines(Region(0, 0, *widget.region.size))
            colors = [
                seg.style.color for row in rows for seg in row if seg.style and seg.text.strip()
            ]
            assert colors and all(color is None or color.triplet for color in colors)
            assert Color.parse("ansi_red").rich_color.triplet is None  # it was ANSI in the CSS

    run(body, size=(120, 30), first=snapshot(SAMPLE_ROWS))


def test_truecolor_check_lets_only_plain_truecolor_styles_skip_the_filter() -> None:
    truecolor = Style(color="#ff0000", bgcolor="#000000")
    assert _all_truecolor([Segment("a", truecolor), Segment("b", None)])
    assert not _all_truecolor([Segment("a", truecolor), Segment("b", RED)])  # ANSI red
    assert not _all_truecolor([Segment("a", Style(color="#ff0000", dim=True))])
    assert not _all_truecolor([Segment("a", Style(bgcolor="default"))])


def test_table_rows_show_braces_and_wide_values_as_they_are() -> None:
    braces = proc_row(104, user="dave", gpu=0, mem_gib=1, cmd=("python", "-c", "print('{0} {}')"))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        def lines() -> dict[int, str]:
            order = visible_pids(app)
            return {
                pid: app.main_screen.table.render_line(i + 1).text for i, pid in enumerate(order)
            }

        assert "python -c print('{0} {}')" in lines()[104]
        # A value wider than its column widens the column for every row, header included.
        wide = replace(braces, pid=1234567)
        app.post_message(SnapshotReady(snapshot((*SAMPLE_ROWS, wide), seq=2)))
        await pilot.pause()
        user_at = app.main_screen.table.render_line(0).text.index("USER")
        users = {100: "alice", 101: "bob", 102: "alice", 103: "carol", 1234567: "dave"}
        for pid, line in lines().items():
            assert line[user_at:].startswith(users[pid]), (pid, line)
            assert "1234567" in line if pid == 1234567 else str(pid) in line

    run(body, size=(160, 30), first=snapshot((*SAMPLE_ROWS, braces)))


def spy_partial_updates(app: GputopApp) -> list[list[tuple[int, int, int]]]:
    """The (y, x1, x2) spans of each partial screen update the app writes to the terminal."""
    compositor = app.screen._compositor
    original = compositor.render_partial_update
    spans: list[list[tuple[int, int, int]]] = []

    def spy() -> Any:
        update = original()
        if update is not None:
            spans.append(list(update.spans))
        return update

    compositor.render_partial_update = spy  # type: ignore[method-assign]
    return spans


def test_a_changed_row_reaches_the_terminal_as_a_whole_widget_row() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        sample = panel.sample
        assert sample is not None
        temp = _line_of(panel, "TEMP")
        temp_y = panel.region.y + panel.styles.gutter.top + temp  # the TEMP line on screen
        x1, x2 = panel.region.x, panel.region.right
        refreshed = spy_refresh(panel)
        spans = spy_partial_updates(app)
        hotter = (sample.temperature_c or 0) + 9
        panel.show(replace(sample, temperature_c=hotter), app.history)
        await pilot.pause()
        assert refreshed and refreshed[-1][0].y == temp
        written = [s for update in spans for s in update if s[0] == temp_y]
        assert any(a <= x1 and b >= x2 for _, a, b in written), spans
        assert f"TEMP {hotter}°C" in panel.render_line(temp).text

    run(body, size=(200, 60))
