"""SVG snapshots of the dashboard on the demo scenario with a hand-moved clock.

Re-record with `make snapshot-update` (pytest tests/ui --snapshot-update) and look at the SVGs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.engine.model import ProcState, Snapshot
from gputop.ui.app import GputopApp, make_app
from gputop.ui.widgets.process_table import ProcessTable
from tests.ui.scenes import demo_frames, feed, frozen_clock

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((200, 60), id="200x60")]


@pytest.fixture(scope="module")
def frames() -> list[Snapshot]:
    return demo_frames("demo", ticks=12)


def app_for(frames: list[Snapshot]) -> GputopApp:
    return make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))


def fed_then(frames: list[Snapshot], *keys: str) -> Callable[[Pilot[Any]], Any]:
    async def run_before(pilot: Pilot[Any]) -> None:
        await feed(pilot.app, pilot, frames)
        await pilot.press(*keys)
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES)
def test_main_screen(snap_compare: Any, frames: list[Snapshot], size: tuple[int, int]) -> None:
    assert snap_compare(app_for(frames), terminal_size=size, run_before=fed_then(frames))


@pytest.mark.parametrize("size", SIZES)
def test_help_screen(snap_compare: Any, frames: list[Snapshot], size: tuple[int, int]) -> None:
    assert snap_compare(
        app_for(frames), terminal_size=size, run_before=fed_then(frames, "question_mark")
    )


@pytest.mark.parametrize("size", SIZES)
def test_gpu_detail_screen(
    snap_compare: Any, frames: list[Snapshot], size: tuple[int, int]
) -> None:
    assert snap_compare(app_for(frames), terminal_size=size, run_before=fed_then(frames, "d"))


def test_kill_dialog_on_a_stuck_process(snap_compare: Any, frames: list[Snapshot]) -> None:
    async def run_before(pilot: Pilot[Any]) -> None:
        await feed(pilot.app, pilot, frames)
        table = pilot.app.query_one(ProcessTable)
        keys = table.visible_keys()
        # One the dialog would signal: a zombie is refused (the dialog offers its parent).
        table.move_cursor(
            row=next(
                i
                for i, k in enumerate(keys)
                if (r := table.row(k)) and r.stuck and r.state is not ProcState.DEFUNCT
            )
        )
        await pilot.press("k")
        await pilot.pause()

    assert snap_compare(app_for(frames), terminal_size=(80, 24), run_before=run_before)


def test_mig_main_screen(snap_compare: Any) -> None:
    """The mig scenario: GPU 0's MIG devices under its panel, 0/1 in the GPU column."""
    mig = demo_frames("mig", ticks=12)
    assert snap_compare(app_for(mig), terminal_size=(120, 40), run_before=fed_then(mig))
