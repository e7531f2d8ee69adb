"""Space and edges of the dashboard (issue 18) at 80x24, 120x40 and 200x60.

The command gets the room the less useful columns leave, sparklines grow with the width and the
spare lines, stuck processes lead, and the edges say what they are: no GPU, GPUs out of view,
focus after 'too small', the header while paused and right after a resume.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets._toast import Toast

from gputop.engine.model import ProcState, Snapshot, SystemInfo
from gputop.ui import rows as R
from gputop.ui import text
from gputop.ui.app import GputopApp, make_app
from gputop.ui.messages import SnapshotReady
from gputop.ui.widgets.gpu_grid import GpuGrid
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.header import HeaderBar
from gputop.ui.widgets.process_table import ProcessTable
from tests.fakes import make_gpu
from tests.ui.data import SAMPLE_ROWS, run, snapshot, visible_pids
from tests.ui.scenes import demo_frames, feed, frozen_clock

HOLDER_NOTE = (
    "1 process could not be inspected even as root (kernel or container security policy); "
    "a holder among them would be missing"
)


def demo_run(
    body: Any, size: tuple[int, int], scenario: str = "demo", ticks: int = 12, **changes: Any
) -> GputopApp:
    """Run ``body(app, pilot, frames)`` on a shipped scenario's frames, as the pictures are
    (with ``changes`` made to each)."""
    frames = [replace(f, **changes) for f in demo_frames(scenario, ticks=ticks)]
    app = make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))

    async def fed(app: GputopApp, pilot: Pilot[Any]) -> None:
        await feed(app, pilot, frames[1:])
        await body(app, pilot, frames)

    return run(fed, app=app, size=size, first=frames[0])


def table_lines(table: ProcessTable) -> list[str]:
    """The table's header and row lines as painted (scrolled to the top)."""
    return [table.render_line(y).text for y in range(len(table.visible_keys()) + 1)]


def painted(widget: Widget) -> list[str]:
    """A widget's lines as painted, inside its border."""
    return [s.text for s in widget.render_lines(Region(0, 0, *widget.region.size))]


# -- 1. the command gets the room --------------------------------------------------------------


def test_at_80x24_the_command_shows_the_arguments_that_tell_jobs_apart() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any], frames: list[Snapshot]) -> None:
        table = app.main_screen.table
        header, *rows = table_lines(table)
        for label in ("GPU", "PID", "USER", "GPU-MEM", "STATE", "COMMAND"):
            assert label in header  # what must stay
        assert "PEAK" not in header and "CPU%" not in header  # what gave way first
        assert len(header) - header.index("COMMAND") >= R.COMMAND_MIN  # the rest of the line
        assert any("train.py --model llama-7b" in line for line in rows)
        assert any("train.py --model resnet50" in line for line in rows)
        assert any("serve.py --model mistral" in line for line in rows)
        await pilot.resize_terminal(200, 60)
        await pilot.pause()
        wide = table_lines(table)[0]
        for label in ("TYPE", "PEAK", "CPU%", "HOST-MEM", "SM%", "TIME"):
            assert label in wide  # with room, every column comes back

    demo_run(body, (80, 24))


# -- 2. sparklines grow with the width and the spare lines --------------------------------------


def spark_widths(size: tuple[int, int]) -> tuple[int, int, int]:
    """(sparkline cells, bar cells, chart lines) of GPU 0's panel on the demo at ``size``."""
    found: list[tuple[int, int, int]] = []

    async def body(app: GputopApp, pilot: Pilot[Any], frames: list[Snapshot]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        assert panel.has_class("-full")
        util = panel.content_lines()[0].plain
        bar = len(util[5:].split(" ")[0])  # "UTIL ████▍      83% ▅▆..."
        found.append((panel.sparks.util.width, bar, panel.chart_rows))
        table = app.main_screen.table
        bottom = table.scrollable_content_region.bottom
        assert table.region.bottom <= app.main_screen.unattributed.region.y  # nothing hidden
        keys = table.visible_keys()
        assert len(keys) == len(frames[-1].processes)
        assert table.scrollable_content_region.y + len(keys) + 1 <= bottom  # every row shown

    demo_run(body, size, holder_scan_note=HOLDER_NOTE)  # the note takes two lines at 120
    return found[0]


def test_sparklines_grow_from_120_to_200_columns_and_take_the_spare_lines() -> None:
    spark_120, _, chart_120 = spark_widths((120, 40))
    spark_200, bar_200, chart_200 = spark_widths((200, 60))
    assert spark_200 > spark_120 >= 20
    assert spark_200 > 2 * bar_200  # the sparkline, not the bar, gets the width
    assert chart_120 > 1 and chart_200 > 1  # lines the 6 processes do not need


def test_the_table_keeps_a_line_for_each_of_40_processes_at_200x60() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any], frames: list[Snapshot]) -> None:
        table = app.main_screen.table
        assert len(table.visible_keys()) == 40
        assert table.scrollable_content_region.height - 1 >= 40

    demo_run(body, (200, 60), scenario="dgx", ticks=3)


# -- 3. the holder-scan note and the notifications ----------------------------------------------


def test_the_holder_scan_note_wraps_whole_at_80_columns() -> None:
    first = replace(
        snapshot(SAMPLE_ROWS),
        holder_scan_note=HOLDER_NOTE,
        unattributed_memory_bytes=((1, 5 * 1024**3),),
    )

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        lines = painted(app.main_screen.unattributed)
        shown = " ".join(line.strip() for line in lines)
        assert "…" not in shown
        assert "unattributed GPU memory" in lines[0]
        assert f"holder scan: {HOLDER_NOTE}" in shown  # every word, over two lines
        assert len(lines) == 3

    run(body, first=first)


def test_notifications_show_top_right_above_the_process_rows() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        app.notify("sampling every 2 s", timeout=30)
        await pilot.pause()
        await pilot.pause()
        (toast,) = app.screen.query(Toast)
        table = app.main_screen.table
        assert toast.region.y == 1  # right under the header
        assert toast.region.right >= 76 and toast.region.bottom <= table.region.y

    run(body)


# -- 4. stuck processes first --------------------------------------------------------------------


def test_stuck_processes_are_counted_in_the_title_and_listed_first() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any], frames: list[Snapshot]) -> None:
        table = app.main_screen.table
        assert str(table.border_title) == "Processes (6) · 3 stuck"
        rows = [table.row(k) for k in table.visible_keys()]
        assert [r is not None and r.stuck for r in rows] == [True] * 3 + [False] * 3
        active = [r.used_memory_bytes or 0 for r in rows[3:] if r is not None]
        assert active == sorted(active, reverse=True)  # then by GPU memory, as before
        await pilot.press("r", "r")  # a sort the user picks is theirs: GPU memory only
        memory = [r.used_memory_bytes for k in table.visible_keys() if (r := table.row(k))]
        assert memory[-1] is None  # the holder, with no memory reported, is last again
        known = [m for m in memory if m is not None]
        assert known == sorted(known, reverse=True)
        assert "3 stuck" in str(table.border_title)

    demo_run(body, (80, 24))


def test_the_fast_stuck_test_agrees_with_the_model() -> None:
    for state in ProcState:
        row = replace(SAMPLE_ROWS[0], states=(state, ProcState.ACTIVE))
        assert R.is_stuck(row) == row.stuck, state
    assert not R.is_stuck(replace(SAMPLE_ROWS[0], states=()))


def test_a_filter_counts_only_the_stuck_processes_it_shows() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert visible_pids(app)[0] == 103  # the holder leads
        await pilot.press("slash", *"serve", "enter")
        assert "stuck" not in str(app.main_screen.table.border_title)

    run(body)


# -- 5. edges ------------------------------------------------------------------------------------


def test_no_gpus_says_so_where_the_panels_would_be() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        grid = app.query_one(GpuGrid)
        assert not grid.panels
        assert grid.note.display and grid.note.region.height == 1
        assert str(grid.note.render()) == "no GPUs: the driver lists none"
        assert grid.note.region.y == 1  # right under the header, on screen
        assert app.main_screen.table.region.y == 2

    run(body, first=replace(snapshot(SAMPLE_ROWS), gpus=()))


def test_64_gpus_at_80x24_say_how_many_are_out_of_view_and_stay_aligned() -> None:
    gpus = tuple(make_gpu(i, cuda_index=63 - i) for i in range(64))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        grid = app.query_one(GpuGrid)
        view, note = grid.scrollable_content_region, grid.note.region
        shown = [
            p for p in grid.panels if view.contains_region(p.region) and not note.overlaps(p.region)
        ]
        assert 10 <= len(shown) < 64
        hidden = 64 - len(shown)
        assert str(grid.note.render()) == (
            f"+{hidden} more GPUs: enlarge the window / press d for a GPU's detail"
        )
        assert grid.note.region.y >= max(p.region.bottom for p in shown)  # below, not over
        assert grid.note.region.bottom <= app.main_screen.table.region.y
        lines = [p.render().plain for p in grid.panels]
        assert lines[9].startswith(" 9:c54 ") and lines[10].startswith("10:c53 ")
        assert len({line.index("A100") for line in lines}) == 1  # one column for every index
        assert len({line.index("UTIL") for line in lines}) == 1
        under = grid.panels[len(shown)]  # the first one out of view: under the note's line
        under.focus()
        await pilot.pause()
        assert app.focused is under and under.region.bottom <= grid.note.region.y

    run(body, first=replace(snapshot(SAMPLE_ROWS), gpus=gpus))


def test_focus_comes_back_after_the_too_small_message() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        assert app.focused is table
        await pilot.resize_terminal(50, 12)
        await pilot.pause()
        assert app.screen.has_class("-tiny")
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.focused is table
        panel = app.query_one("#gpu-1", GpuPanel)
        panel.focus()
        await pilot.pause()
        await pilot.resize_terminal(55, 12)
        await pilot.pause()
        await pilot.resize_terminal(58, 14)  # still too small
        await pilot.pause()
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert app.focused is panel  # what had it

    run(body)


def test_the_clock_stays_whole_in_the_paused_header_at_80_columns() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any], frames: list[Snapshot]) -> None:
        header = app.query_one(HeaderBar)
        await pilot.press("p")
        clock = text.clock_time(frames[-1].taken_at_wall)
        line = header.render_line(0).text
        assert len(line) == 80
        assert " DEMO " in line and " PAUSED " in line and clock in line
        assert "…" not in line
        host = "a-very-long-hostname.cluster.example.org"
        header.snapshot = replace(frames[-1], system=SystemInfo(hostname=host, simulated=True))
        await pilot.pause()
        line = header.render_line(0).text
        assert " PAUSED " in line and clock in line
        assert "a-very-long" in line and host not in line  # the host name cut to fit

    demo_run(body, (80, 24))


def test_no_stale_marker_right_after_a_resume() -> None:
    now = [1001.5]  # the snapshot was taken at 1001.0
    app = make_app(None, start_sampler=False, clock=lambda: now[0])

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        header = app.query_one(HeaderBar)
        await pilot.press("p")
        now[0] += 30.0  # half a minute paused
        app.check_stale()
        await pilot.press("p")
        await pilot.pause()
        assert "STALE" not in header.render_line(0).text
        assert not header.has_class("-stale")
        now[0] += 2.0  # still no sample, but within the threshold since the resume
        app.check_stale()
        await pilot.pause()
        assert "STALE" not in header.render_line(0).text
        now[0] += 2.0  # 4.5 s of waiting not paused: stale, counted without the pause
        app.check_stale()
        await pilot.pause()
        assert "STALE 4 s" in header.render_line(0).text
        assert header.has_class("-stale")
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS, seq=2, taken_at_mono=now[0])))
        await pilot.pause()
        assert "STALE" not in header.render_line(0).text

    run(body, app=app)
