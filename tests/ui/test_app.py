"""Pilot tests of the dashboard's key paths on hand-fed snapshots (no sampler thread, no sleeps)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from textual import events
from textual.pilot import Pilot

from gputop.engine.changes import RowTracker
from gputop.engine.history import History
from gputop.engine.model import ProcState, Snapshot, SystemInfo
from gputop.engine.source import Source
from gputop.ui import rows as R
from gputop.ui.app import GputopApp, make_app
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.gpu_detail import GpuDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.process_detail import ProcessDetailScreen
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.header import HeaderBar
from gputop.ui.widgets.process_table import ProcessTable
from tests.fakes import FakeSource, lost_gpu, make_gpu
from tests.ui.data import SAMPLE_ROWS, proc_reads_shown, proc_row, run, snapshot, visible_pids


def header_text(app: GputopApp) -> str:
    return app.query_one(HeaderBar).render().plain


def test_first_frame_shows_header_gpus_and_processes() -> None:
    first = snapshot(
        SAMPLE_ROWS,
        system=SystemInfo(
            hostname="box7", driver_version="550.1", cuda_driver_version="12.4", simulated=True
        ),
    )

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        head = header_text(app)
        for part in ("box7", "driver 550.1", "CUDA 12.4", "2 GPUs", "every 1s", "DEMO", "22:13:21"):
            assert part in head
        assert [p.index for p in app.query(GpuPanel)] == [0, 1]
        # Stuck first (the holder 103), then by GPU memory.
        assert visible_pids(app) == [103, 100, 101, 102]
        assert app.main_screen.table.border_title == "Processes (4) · 1 stuck"

    run(body, first=first)


def test_sort_keys_cycle_columns_and_reverse() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("s")  # GPU-MEM -> PEAK
        assert app.main_screen.table.view.sort is R.Column.PEAK
        await pilot.press("less_than_sign", "less_than_sign")  # back past GPU-MEM to TYPE
        assert app.main_screen.table.view.sort is R.Column.TYPE
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        assert app.main_screen.table.view.sort is R.Column.SM
        await pilot.press("s", "s")  # SM -> CPU -> HOST
        assert app.main_screen.table.view.sort is R.Column.HOST
        await pilot.press("less_than_sign")
        assert visible_pids(app)[0] == 101  # highest CPU first
        await pilot.press("r")
        assert visible_pids(app)[-1] == 101
        assert app.main_screen.table.header_label(R.Column.CPU) == "CPU%▲"
        assert "CPU%▲" in app.main_screen.table.render_line(0).text

    run(body, size=(160, 30))  # wide: every column is shown


def test_sort_keys_skip_columns_a_narrow_terminal_hides() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert not app.main_screen.table.wide
        await pilot.press("s")  # GPU-MEM -> SM%: PEAK (and TYPE, HOST) are not on screen
        assert app.main_screen.table.view.sort is R.Column.SM
        assert "SM%▼" in app.main_screen.table.render_line(0).text
        await pilot.press("less_than_sign", "less_than_sign")  # SM% -> GPU-MEM -> USER
        assert app.main_screen.table.view.sort is R.Column.USER
        assert app.main_screen.table.border_title == "Processes (4) · 1 stuck"

    run(body, size=(80, 24))


def test_a_sort_column_hidden_by_a_resize_is_named_in_the_title() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("s")  # GPU-MEM -> PEAK, shown at this width
        assert app.main_screen.table.view.sort is R.Column.PEAK
        assert app.main_screen.table.border_title == "Processes (4) · 1 stuck"
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert (
            str(app.main_screen.table.border_title) == "Processes (4) · 1 stuck · sorted by PEAK▼"
        )
        await pilot.press("s")  # on to the next column that is on screen
        assert app.main_screen.table.view.sort is R.Column.SM
        assert app.main_screen.table.border_title == "Processes (4) · 1 stuck"

    run(body, size=(160, 30))


def test_mouse_clicks_sort_select_and_open() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        header = app.main_screen.table.render_line(0).text
        x = 1 + header.index("USER")  # +1: the table's border
        await pilot.click(ProcessTable, offset=(x, 1))
        assert app.main_screen.table.view.sort is R.Column.USER
        assert visible_pids(app) == [100, 102, 101, 103]
        await pilot.click(ProcessTable, offset=(x, 1))
        assert visible_pids(app) == [103, 101, 100, 102]  # same column again: reversed
        await pilot.click(ProcessTable, offset=(5, 3))  # second row (border, header, row 0)
        assert (
            app.main_screen.table.current is not None and app.main_screen.table.current.pid == 101
        )
        await pilot.click(ProcessTable, offset=(5, 3))
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen.row.pid == 101

    run(body)


def test_filter_by_text_then_escape_clears_it() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("slash")
        await pilot.press(*"serve")
        assert visible_pids(app) == [101]
        await pilot.press("enter")
        assert "filter 'serve'" in str(app.main_screen.table.border_title)
        assert app.focused is app.main_screen.table
        await pilot.press("escape")
        assert visible_pids(app) == [103, 100, 101, 102]

    run(body)


def test_keys_typed_right_after_slash_go_to_the_filter() -> None:
    # Typed fast (or pasted): every key is queued before "/" is handled.
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        for key, char in [("slash", "/"), ("1", "1"), ("0", "0"), ("1", "1"), ("enter", None)]:
            app.post_message(events.Key(key, char))
        await pilot.pause()
        await pilot.pause()
        assert app.main_screen.filter_box.value == "101"
        assert visible_pids(app) == [101]
        assert not isinstance(app.screen, ProcessDetailScreen)  # Enter ended the filter
        # "/" again selects the old filter; in the box "/" is a character, typed over it.
        await pilot.press("slash", "slash")
        assert app.main_screen.filter_box.value == "/"

    run(body)


def test_only_mine_tree_and_gpu_focus() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        app.main_screen.user = "alice"
        await pilot.press("u")
        assert visible_pids(app) == [100, 102]
        await pilot.press("u", "t")
        assert visible_pids(app) == [103, 100, 102, 101]  # the stuck holder's tree first
        command = app.main_screen.table.cell_text(
            app.main_screen.table.visible_keys()[2], R.Column.COMMAND
        )
        assert command.startswith("└ python eval.py")
        await pilot.press("t", "g")
        assert visible_pids(app) == [103, 100]
        await pilot.press("g")
        assert visible_pids(app) == [101, 102]
        assert "GPU 1 only" in str(app.main_screen.table.border_title)
        await pilot.press("g")
        assert app.main_screen.table.view.gpu is None

    run(body)


def test_space_tags_rows_and_moves_down() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "space", "space")  # the first row is the stuck holder 103
        assert [r.pid for r in app.main_screen.table.tagged_rows()] == [100, 101]
        assert "2 tagged" in str(app.main_screen.table.border_title)
        assert (
            app.main_screen.table.cell_text(app.main_screen.table.visible_keys()[1], R.Column.GPU)
            == "●0"
        )
        await pilot.press("up", "space")
        assert [r.pid for r in app.main_screen.table.tagged_rows()] == [100]
        # a tagged process that goes away is untagged
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS[1:], seq=2)))
        await pilot.pause()
        assert app.main_screen.table.tagged_rows() == []

    run(body)


def test_rows_update_in_place_repainting_only_changed_lines() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        await pilot.press("down", "down")  # cursor on 101 (the stuck holder 103 is first)
        repainted: list[int] = []
        original = table.refresh_rows
        table.refresh_rows = lambda ys: repainted.extend(ys) or original(ys)  # type: ignore[method-assign]
        changed = replace(SAMPLE_ROWS[2], info=replace(SAMPLE_ROWS[2].info, cpu_percent=55.0))
        app.post_message(
            SnapshotReady(snapshot((*SAMPLE_ROWS[:2], changed, SAMPLE_ROWS[3]), seq=2))
        )
        await pilot.pause()
        assert repainted == [4]  # header is line 0: only the fourth row's line (102)
        assert table.cell_text(table.visible_keys()[3], R.Column.CPU) == "55"
        bigger = replace(SAMPLE_ROWS[1], used_memory_bytes=40 * 1024**3)
        newcomer = proc_row(200, mem_gib=5)
        app.post_message(SnapshotReady(snapshot((SAMPLE_ROWS[0], bigger, newcomer), seq=3)))
        await pilot.pause()
        assert visible_pids(app) == [101, 100, 200]
        assert table.cell_text(table.visible_keys()[0], R.Column.MEM) == "40.0G"
        assert table.current is not None and table.current.pid == 101  # the cursor follows its row

    run(body)


def test_a_tick_whose_rows_keep_their_places_is_not_sorted_again() -> None:
    # At thousands of processes most ticks only change numbers that do not move a row (SM %,
    # CPU %): the order stands without a sort; anything that moves one sorts. The engine says
    # which rows changed (Snapshot.changes, gputop.engine.changes), as the sampler does.
    sorts: list[int] = []
    tracker = RowTracker()
    real = R.ordered

    def counting(*args: Any, **kwargs: Any) -> Any:
        sorts.append(1)
        return real(*args, **kwargs)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        seq = 1

        async def tick(*rows: Any) -> None:
            nonlocal seq
            seq += 1
            sorts.clear()
            changes = tracker.track(tuple(rows))
            app.post_message(SnapshotReady(snapshot(tuple(rows), seq=seq, changes=changes)))
            await pilot.pause()

        a, b, c, d = SAMPLE_ROWS
        busier = replace(c, info=replace(c.info, cpu_percent=77.0), sm_util_percent=99)
        await tick(a, b, busier, d)
        assert not sorts and visible_pids(app) == [103, 100, 101, 102]
        assert table.cell_text(table.visible_keys()[3], R.Column.CPU) == "77"
        bigger = replace(busier, used_memory_bytes=50 * 1024**3)
        await tick(a, b, bigger, d)  # the sort value moved
        assert sorts and visible_pids(app) == [103, 102, 100, 101]
        stuck = replace(b, states=(ProcState.HOLDER,))
        await tick(a, stuck, bigger, d)  # into the stuck group
        assert sorts and visible_pids(app) == [101, 103, 102, 100]
        assert table.stuck_count == 2
        await tick(a, b, bigger, d)  # and out of it
        assert sorts and visible_pids(app) == [103, 102, 100, 101] and table.stuck_count == 1
        table.set_view(replace(table.view, filter_text="serve"))
        assert visible_pids(app) == [101]
        renamed = replace(bigger, info=replace(bigger.info, cmdline=("python", "serve2.py")))
        await tick(a, b, renamed, d)  # into the filter
        assert sorts and visible_pids(app) == [102, 101]
        table.set_view(replace(table.view, filter_text="", sort=R.Column.TIME))
        await tick(a, b, replace(renamed, sm_util_percent=1), d)  # runtimes move by themselves
        assert sorts

    import gputop.ui.rows

    original = gputop.ui.rows.ordered
    gputop.ui.rows.ordered = counting  # type: ignore[assignment]
    try:
        run(body, first=snapshot(SAMPLE_ROWS, changes=tracker.track(SAMPLE_ROWS)))
    finally:
        gputop.ui.rows.ordered = original  # type: ignore[assignment]


def test_help_screen_lists_the_keys() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        sections = dict(app.screen.sections)
        keys = {**dict(sections["Everywhere"]), **dict(sections["Processes"])}
        assert keys["k F9"].startswith("signal the tagged processes")
        assert keys["s >"] == "sort by the next column"
        assert keys["? h"] == "this help"
        assert keys["+ ="] == "sample less often"
        assert keys["space"].startswith("tag / untag")
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("h")
        assert isinstance(app.screen, HelpScreen)

    run(body)


def test_gpu_detail_from_d_enter_on_a_panel_and_steps() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "down", "d")  # row 101 is on GPU 1
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen) and screen.gpu_index == 1
        await pilot.press("s")  # main-view keys are off here
        assert app.main_screen.table.view.sort is R.Column.MEM
        await pilot.press("right_square_bracket")
        assert screen.gpu_index == 0
        hot = make_gpu(0, temperature_c=77)
        app.post_message(
            SnapshotReady(replace(snapshot(SAMPLE_ROWS, seq=2), gpus=(hot, make_gpu(1))))
        )
        await pilot.pause()
        assert re.search(r"temperature_c +77\n", str(screen.query_one("#fields").render()))
        await pilot.press("escape")
        app.query_one("#gpu-1", GpuPanel).focus()
        await pilot.pause()
        await pilot.press("enter")
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.gpu_index == 1

    run(body, size=(200, 60))


def test_process_detail_on_enter_with_environment_toggle() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "enter")  # past the stuck holder 103, first
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen)
        assert screen.row.pid == 100
        await proc_reads_shown(app, pilot)
        info = str(screen.query_one("#proc-info").render())
        assert "alice" in info and "30.0G" in info
        assert "python train.py --rank 0" in str(screen.query_one("#proc-cmdline").render())
        await pilot.press("e")
        await proc_reads_shown(app, pilot)
        # PID 100 is not this test's process: the reason is shown instead of a crash
        assert "Environment of PID 100" in str(screen.query_one("#proc-info").render())
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS[1:], seq=2)))
        await pilot.pause()
        assert "no longer listed" in str(screen.query_one("#proc-title").render())
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]

    run(body)


def test_process_detail_shows_a_long_command_wrapped_on_screen() -> None:
    """At 80x24 the whole command is on screen; a huge one scrolls in its box, not the page."""
    args = tuple(f"--option-{i}=value-{i}" for i in range(8))
    huge = tuple(f"--flag-{i}" for i in range(400))

    def command_on_screen(app: GputopApp) -> tuple[str, int]:
        box = app.screen.query_one("#proc-command")
        line = app.screen.query_one("#proc-cmdline")
        inside = box.scrollable_content_region.intersection(line.region)
        crop = inside.translate(-line.region.offset)
        return " ".join(strip.text for strip in line.render_lines(crop)), inside.height

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("enter")
        shown, rows = command_on_screen(app)
        assert rows == 3  # wrapped at 80 columns, neither cut nor hidden under a scrollbar
        assert "python train.py" in shown and "--option-7=value-7" in shown
        await pilot.press("escape", "down", "enter")
        shown, rows = command_on_screen(app)
        assert rows == 6  # 8 rows at most, border included: the facts below stay in view
        assert "--flag-0 " in shown and "--flag-399" not in shown
        assert app.screen.query_one("#proc-body").region.height >= 10

    first = snapshot(
        (
            proc_row(100, mem_gib=30, cmd=("python", "train.py", *args)),
            proc_row(101, mem_gib=20, cmd=("python", "serve.py", *huge)),
        )
    )
    run(body, first=first)


def test_pause_freezes_the_display_and_resumes() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("p")
        assert "PAUSED" in header_text(app)
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS[:1], seq=2)))
        await pilot.pause()
        assert len(visible_pids(app)) == 4
        await pilot.press("p")
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS[:1], seq=3)))
        await pilot.pause()
        assert visible_pids(app) == [100]
        assert "PAUSED" not in header_text(app)

    run(body)


class RecordingSampler:
    """Stands in for gputop.engine.sampler.Sampler: emits one snapshot from its own thread."""

    def __init__(
        self, source: Source, on_snapshot: Callable[[Snapshot], None], interval_s: float
    ) -> None:
        self.source, self.on_snapshot, self.interval_s = source, on_snapshot, interval_s
        self.paused = False
        self.history = History()
        self.started = threading.Event()
        self.stopped = False

    def start(self) -> None:
        self.started.set()
        threading.Thread(
            target=lambda: self.on_snapshot(snapshot(SAMPLE_ROWS[:2], seq=9)), daemon=True
        ).start()

    def stop(self, timeout: float = 1.0) -> None:
        self.stopped = True


def app_with_recording_sampler(**options: Any) -> tuple[GputopApp, list[RecordingSampler]]:
    """An app on a FakeSource whose sampler factory records the samplers it builds."""
    samplers: list[RecordingSampler] = []

    def factory(
        source: Source, cb: Callable[[Snapshot], None], interval_s: float
    ) -> RecordingSampler:
        samplers.append(RecordingSampler(source, cb, interval_s))
        return samplers[-1]

    return make_app(
        FakeSource(), sampler_factory=factory, clock=lambda: 1009.5, **options
    ), samplers


def test_sampler_bridge_interval_pause_and_stop_on_exit() -> None:
    app, samplers = app_with_recording_sampler(interval_s=1.0)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        sampler = samplers[0]
        for _ in range(50):  # the thread's message arrives within a few loop turns
            if app.snapshot is not None and app.snapshot.seq == 9:
                break
            await pilot.pause(0.01)
        assert app.snapshot is not None and app.snapshot.seq == 9
        await pilot.press("plus")
        assert sampler.interval_s == 2.0
        await pilot.press("minus", "minus")
        assert sampler.interval_s == 0.5 and "every 0.5s" in header_text(app)
        await pilot.press("p")
        assert sampler.paused
        await pilot.press("q")
        await pilot.pause()

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            await body(app, pilot)

    import asyncio

    asyncio.run(main())
    assert samplers[0].stopped
    assert app.return_code == 0


def test_the_one_history_is_the_samplers() -> None:
    app, samplers = app_with_recording_sampler()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("d")
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen)
        history = samplers[0].history
        assert app.history is history
        assert app.main_screen.history is history and screen.history is history
        assert len(history) == 0  # the sampler records; the app never does when it has one

    run(body, app=app)


def test_without_a_sampler_the_app_records_each_fresh_snapshot_once() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert len(app.history) == 1  # the first frame
        for snap in (
            replace(snapshot(SAMPLE_ROWS), stale_s=5.0),  # a stale re-send
            snapshot(SAMPLE_ROWS, seq=1),  # the same reading again
            snapshot(SAMPLE_ROWS, seq=2),
        ):
            app.post_message(SnapshotReady(snap))
            await pilot.pause()
        assert len(app.history) == 2 and app.history.count == 2

    run(body)


def test_snapshot_ready_replaces_a_queued_one() -> None:
    old, new = SnapshotReady(snapshot(seq=1)), SnapshotReady(snapshot(seq=2))
    assert new.can_replace(old)


def test_stale_marker_after_samples_stop_and_for_resent_snapshots() -> None:
    now = [1001.5]
    app = make_app(None, start_sampler=False, clock=lambda: now[0])

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        app.check_stale()
        assert "STALE" not in header_text(app)
        now[0] = 1013.0
        app.check_stale()
        assert "STALE 12 s" in header_text(app)
        assert app.query_one(HeaderBar).has_class("-stale")
        # the sampler re-sends the last reading with stale_s when the driver hangs
        now[0] = 1002.0
        app.post_message(SnapshotReady(replace(snapshot(SAMPLE_ROWS), stale_s=30.0)))
        await pilot.pause()
        assert "STALE 30 s" in header_text(app)
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS, seq=1)))
        await pilot.pause()
        assert "STALE" not in header_text(app)

    run(body, app=app)


def test_lost_gpu_panel_says_so() -> None:
    first = replace(snapshot(SAMPLE_ROWS), gpus=(make_gpu(0), lost_gpu(1)))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-1", GpuPanel)
        assert panel.has_class("-lost")
        assert "GPU 1 LOST: GPU is lost" in panel.render().plain

    run(body, first=first)


def test_eight_gpus_fit_80x24_one_line_each() -> None:
    first = replace(snapshot(SAMPLE_ROWS), gpus=tuple(make_gpu(i) for i in range(8)))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panels = list(app.query(GpuPanel))
        assert len(panels) == 8
        assert all(p.has_class("-mini") for p in panels)
        assert all(p.region.height == 1 and p.region.width == 80 for p in panels)
        assert app.main_screen.table.region.height >= 8

    run(body, first=first)


def test_tiny_terminal_shows_a_message_instead_of_a_mess() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert app.screen.has_class("-tiny")
        assert "terminal too small: 50x12" in str(app.query_one("#too-small").render())
        assert not app.main_screen.table.display or app.main_screen.table.region.height == 0

    run(body, size=(50, 12))


def test_quit_key_exits() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("q")

    app = run(body)
    assert app.return_code == 0


def test_resizing_the_terminal_refits_panels_columns_and_the_too_small_message() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-0", GpuPanel)
        assert panel.has_class("-full") and app.main_screen.table.wide
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert panel.has_class("-compact")  # 2 bordered panels (14 lines) leave too few rows
        assert (
            not app.main_screen.table.wide
            and "PEAK" not in app.main_screen.table.render_line(0).text
        )
        await pilot.resize_terminal(50, 12)
        await pilot.pause()
        assert app.screen.has_class("-tiny")
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert not app.screen.has_class("-tiny")

    run(body, size=(200, 60))
