"""The driver's trouble on the dashboard (issue 16): the header's note and NOT RESPONDING panels.

Hand-fed snapshots, as the sampler sends them: ``driver_note`` on every snapshot while it lasts
(fresh readings and stale re-sends alike), GPUs in state NOT_RESPONDING with their ``stale_s``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from rich.cells import cell_len
from textual.pilot import Pilot

from gputop.engine.model import GpuSample, GpuState, Snapshot, SystemInfo
from gputop.ui.app import GputopApp, make_app
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.gpu_detail import GpuDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.widgets.gpu_grid import NO_GPUS, NO_READING_YET
from gputop.ui.widgets.gpu_panel import GpuPanel, state_text
from gputop.ui.widgets.header import NOTE_MIN_CELLS, HeaderBar, fit
from tests.fakes import lost_gpu, make_gpu
from tests.ui.data import SAMPLE_ROWS, run, snapshot

CRASHED = "DRIVER CRASHED (SIGSEGV in libnvidia-ml) — restarting"
CRASHED_LONG = "DRIVER CRASHED (SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage) — restarting"
HUNG = "nvmlDeviceGetPowerUsage (GPU 1) not answering for 4 s"
WIDTHS = [pytest.param(80, id="80"), pytest.param(120, id="120")]


def on_screen(app: GputopApp) -> str:
    """The header's row exactly as painted (cut to the terminal's width)."""
    return app.query_one(HeaderBar).render_line(0).text


def top(app: GputopApp) -> object:
    """The screen on top (typed loosely: it changes under the test's feet)."""
    return app.screen


async def show(app: GputopApp, pilot: Pilot[Any], snap: Snapshot) -> None:
    app.post_message(SnapshotReady(snap))
    await pilot.pause()


def not_responding(index: int, stale_s: float | None = 4.0, error: str | None = None) -> GpuSample:
    """A GPU whose driver call hung: identity only, every reading None."""
    return GpuSample(
        index=index,
        state=GpuState.NOT_RESPONDING,
        error=error,
        stale_s=stale_s,
        cuda_index=index,
        name="NVIDIA A100-SXM4-80GB",
    )


# -- the header's note ---------------------------------------------------------------------------


@pytest.mark.parametrize("width", WIDTHS)
def test_a_note_shows_in_the_header_and_the_next_snapshot_without_one_clears_it(
    width: int,
) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        header = app.query_one(HeaderBar)
        assert not header.has_class("-driver-note")
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=2, driver_note=CRASHED))
        line = on_screen(app)
        assert f" {CRASHED} " in line  # whole at 80 columns too
        assert len(line) == width and header.region.height == 1
        assert header.has_class("-driver-note")
        assert " gputop " in line  # room for the title as well
        # in the STALE marker's alarm style
        alarm = header.get_component_rich_style("header-bar--stale")
        (segment,) = [s for s in header.render_line(0) if "DRIVER CRASHED" in s.text]
        assert segment.style is not None
        assert segment.style.bgcolor == alarm.bgcolor and segment.style.bold
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=3))
        assert "DRIVER" not in on_screen(app) and "restarting" not in on_screen(app)
        assert not header.has_class("-driver-note")
        assert "2 GPUs" in on_screen(app)

    run(body, size=(width, 24))


def test_a_stale_resend_carrying_the_note_shows_it_beside_the_stale_marker() -> None:
    # A re-send equals the reading it re-sends (driver_note and stale_s are not compared):
    # the note must show all the same.
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await show(app, pilot, replace(snapshot(SAMPLE_ROWS), stale_s=12.0, driver_note=HUNG))
        line = on_screen(app)
        assert line.index("STALE 12 s") < line.index(HUNG)
        assert app.query_one(HeaderBar).has_class("-stale")
        await show(app, pilot, replace(snapshot(SAMPLE_ROWS), stale_s=13.0, driver_note=CRASHED))
        assert "STALE 13 s" in on_screen(app) and CRASHED in on_screen(app)
        assert HUNG not in on_screen(app)
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=2))  # the driver is back
        assert "STALE" not in on_screen(app) and "DRIVER" not in on_screen(app)

    run(body)


def test_a_long_note_at_80_columns_keeps_the_markers_and_its_first_words() -> None:
    app = make_app(None, start_sampler=False, readonly=True, clock=lambda: 1001.5)
    demo = SystemInfo(hostname="a-very-long-hostname.example.org", simulated=True)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        snap = replace(snapshot(SAMPLE_ROWS), system=demo, stale_s=30.0, driver_note=CRASHED_LONG)
        await show(app, pilot, snap)
        line = on_screen(app)
        assert len(line) == 80 and app.query_one(HeaderBar).region.height == 1
        assert line.startswith(" STALE 30 s ")  # the title gave way first
        assert " DRIVER CRASHED (SIGSEGV in" in line
        assert "…" in line and "restarting" not in line  # cut after a word, marked
        assert " DEMO " in line and " READONLY " in line
        assert "a-very-long-hostname" not in line  # the host facts gave way
        # at 120 columns the whole note fits, with the title
        await pilot.resize_terminal(120, 24)
        await pilot.pause()
        wide = on_screen(app)
        assert len(wide) == 120
        assert wide.startswith(" gputop ") and f" {CRASHED_LONG} " in wide

    run(body, app=app, size=(80, 24))


@pytest.mark.parametrize("width", [60, 80, 120])
def test_the_header_never_wraps_whatever_the_note_holds(width: int) -> None:
    odd = "驱动程序崩溃\n(SIGSEGV)\tin  libnvidia-ml " + "x" * 200

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        header = app.query_one(HeaderBar)
        await show(app, pilot, replace(snapshot(SAMPLE_ROWS), stale_s=5.0, driver_note=odd))
        strip = header.render_line(0)
        assert strip.cell_length == width and header.region.height == 1
        assert "\n" not in strip.text and "\t" not in strip.text
        assert "STALE 5 s" in strip.text and "驱动程序崩溃 (SIGSEGV) in libnvidia-ml" in strip.text

    run(body, size=(width, 24))


def test_keys_still_work_while_the_note_is_shown() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=2, driver_note=CRASHED))
        table = app.main_screen.table
        before = table.view
        await pilot.press("s")
        assert table.view.sort != before.sort
        await pilot.press("question_mark")
        assert isinstance(top(app), HelpScreen)
        await pilot.press("escape")
        assert top(app) is app.main_screen
        await pilot.press("p")  # paused: the display, note included, stays as it is
        assert "PAUSED" in on_screen(app) and CRASHED in on_screen(app)
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=3))
        assert CRASHED in on_screen(app)
        await pilot.press("p")
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=4))
        assert "PAUSED" not in on_screen(app) and "DRIVER" not in on_screen(app)
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0

    run(body)


def test_a_note_before_the_first_reading_shows_on_an_empty_box() -> None:
    # The sampler's stand-in while the driver process has not read anything yet: no GPUs.
    waiting = "waiting for the driver: nvmlInit_v2 not answering for 3 s"

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await show(
            app, pilot, replace(snapshot(), gpus=(), seq=0, stale_s=3.0, driver_note=waiting)
        )
        assert waiting in on_screen(app)
        header = app.query_one(HeaderBar).render().plain
        assert "? GPUs" in header and "0 GPUs" not in header  # not read yet: not none (past 80)
        note = str(app.screen.query_one("#gpu-note").render())
        assert NO_READING_YET in note and NO_GPUS not in note
        assert not list(app.query(GpuPanel))
        await show(app, pilot, snapshot(SAMPLE_ROWS, seq=1))
        assert waiting not in on_screen(app)
        assert [p.index for p in app.query(GpuPanel)] == [0, 1]

    run(body, first=replace(snapshot(), gpus=(), seq=0))


def test_fit_cuts_after_a_word_and_counts_cells() -> None:
    assert fit(CRASHED, 200) == CRASHED
    assert fit(CRASHED_LONG, 40) == "DRIVER CRASHED (SIGSEGV in libnvidia-ml…"
    assert fit(CRASHED_LONG, 36) == "DRIVER CRASHED (SIGSEGV in…"
    assert fit("nvmlDeviceGetPowerUsageWithAVeryLongName", 12) == "nvmlDeviceG…"  # mid-word
    assert cell_len(fit("驱动程序崩溃驱动程序崩溃", 9)) <= 9
    assert fit("abc", 1) == "…" and fit("abc", 0) == ""
    for cells in range(NOTE_MIN_CELLS, len(CRASHED_LONG) + 2):
        assert cell_len(fit(CRASHED_LONG, cells)) <= cells


# -- NOT RESPONDING GPU panels -------------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_a_not_responding_gpu_panel_says_so_and_for_how_long(size: tuple[int, int]) -> None:
    hung = not_responding(1, stale_s=4.2, error="nvmlDeviceGetPowerUsage hung")
    first = replace(snapshot(SAMPLE_ROWS), gpus=(make_gpu(0), hung))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-1", GpuPanel)
        assert panel.has_class("-lost")  # drawn as a lost GPU is
        text = "GPU 1 NOT RESPONDING for 4 s: nvmlDeviceGetPowerUsage hung"
        assert panel.render().plain == text
        # on screen too, where a narrow panel may cut the end of the reason
        rows = [panel.render_line(y).text for y in range(panel.content_size.height)]
        assert any(row.startswith("GPU 1 NOT RESPONDING for 4 s: nvml") for row in rows), rows
        healthy = app.query_one("#gpu-0", GpuPanel)
        assert not healthy.has_class("-lost") and "UTIL" in healthy.render().plain
        # the next reading says it has waited longer; then it answers again
        later = replace(hung, stale_s=9.0)
        await show(app, pilot, replace(snapshot(SAMPLE_ROWS, seq=2), gpus=(make_gpu(0), later)))
        assert "NOT RESPONDING for 9 s" in panel.render().plain
        await show(
            app, pilot, replace(snapshot(SAMPLE_ROWS, seq=3), gpus=(make_gpu(0), make_gpu(1)))
        )
        assert not panel.has_class("-lost") and "UTIL" in panel.render().plain

    run(body, size=size, first=first)


def test_not_responding_gpus_in_one_line_panels_and_their_detail_screen() -> None:
    gpus = tuple(make_gpu(i) if i != 3 else not_responding(3, stale_s=None) for i in range(8))
    first = replace(snapshot(SAMPLE_ROWS), gpus=gpus)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        panel = app.query_one("#gpu-3", GpuPanel)
        assert panel.has_class("-mini") and panel.region.height == 1
        assert panel.render_line(0).text.rstrip() == "GPU 3 NOT RESPONDING"
        panel.focus()
        await pilot.press("enter")  # its detail screen: every reading None, no traceback
        await pilot.pause()
        assert isinstance(top(app), GpuDetailScreen)
        await pilot.press("escape")
        assert top(app) is app.main_screen

    run(body, first=first)


def test_state_text_of_every_state_that_is_not_ok() -> None:
    assert state_text(lost_gpu(1)) == "GPU 1 LOST: GPU is lost"  # as before
    assert state_text(not_responding(2, stale_s=None)) == "GPU 2 NOT RESPONDING"
    assert state_text(not_responding(2, stale_s=61.4, error="hung")) == (
        "GPU 2 NOT RESPONDING for 61 s: hung"
    )
    assert state_text(GpuSample(index=5, state=GpuState.ERROR)) == "GPU 5 ERROR: unreadable"


# -- the picture ---------------------------------------------------------------------------------


def test_driver_trouble_picture(snap_compare: Any) -> None:
    box = SystemInfo(hostname="box7", driver_version="550.54.15", cuda_driver_version="12.4")
    gpus = (make_gpu(0), not_responding(1, stale_s=12.0, error="nvmlDeviceGetPowerUsage hung"))
    frame = replace(
        snapshot(SAMPLE_ROWS), system=box, gpus=gpus, stale_s=12.0, driver_note=CRASHED_LONG
    )

    async def run_before(pilot: Pilot[Any]) -> None:
        await show(pilot.app, pilot, frame)  # type: ignore[arg-type]

    app = make_app(None, start_sampler=False, clock=lambda: 1001.5)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
