"""The README's screenshots: drawn the same on every run and machine, and screenshots/ holds what
the code draws now (after a change to the dashboard, `make screenshots` and look at them)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import pytest

from gputop.engine.model import Snapshot
from gputop.ui.app import make_app
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.process_table import ProcessTable
from tests.ui.scenes import HERO, PICTURES, SIZES, fixed_terminal, frozen_clock, pictures, show
from tests.ui.showcase import PROCS, showcase_frames

SCREENSHOTS = Path(__file__).resolve().parents[2] / "screenshots"
OUT_OF_DATE = "screenshots/ is not what the code draws now: run `make screenshots` and look"


@pytest.fixture(scope="module")
def frames() -> list[Snapshot]:
    return showcase_frames()


def test_the_hero_is_drawn_the_same_twice_and_is_checked_in(frames: list[Snapshot]) -> None:
    first = pictures(("main",), ((200, 60),), frames)
    assert list(first) == [HERO]
    assert pictures(("main",), ((200, 60),), showcase_frames()) == first
    assert first[HERO] == (SCREENSHOTS / HERO).read_text(encoding="utf-8"), OUT_OF_DATE


def test_every_picture_is_checked_in_and_names_nothing_of_this_machine(
    frames: list[Snapshot],
) -> None:
    drawn = pictures(frames=frames)
    names = {f"{p}-{w}x{h}.svg" for p in PICTURES for w, h in SIZES}
    assert set(drawn) == names == {p.name for p in SCREENSHOTS.glob("*.svg")}
    stale = sorted(n for n, svg in drawn.items() if (SCREENSHOTS / n).read_text("utf-8") != svg)
    assert not stale, f"{OUT_OF_DATE} ({', '.join(stale)})"
    here = {sys.prefix, sys.executable, os.getcwd(), str(Path.home()), socket.gethostname()}
    for name, svg in drawn.items():
        assert "holder scan" not in svg, name  # the drawing machine's caveat
        assert not [h for h in here if len(h) > 3 and h in svg], name


def test_the_hero_has_a_full_history_and_every_process_on_screen(frames: list[Snapshot]) -> None:
    app = make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))
    seen: dict[str, object] = {}

    async def run() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            await show(app, pilot, frames)
            seen["peaks"] = {
                (p.index, name): getattr(p.sparks, name).peaks()
                for p in app.query(GpuPanel)
                for name in ("util", "memory")
            }
            table = app.query_one(ProcessTable)
            seen["rows"], seen["scroll"] = table.row_count, table.max_scroll_y

    with fixed_terminal():
        asyncio.run(run())
    peaks = seen["peaks"]
    assert isinstance(peaks, dict) and len(peaks) == 8  # 4 GPUs, two sparklines each
    for (gpu, name), values in peaks.items():
        assert len(values) > 40, f"GPU {gpu} {name}: a bordered panel's wide chart"
        assert None not in values, f"GPU {gpu} {name}: the history does not fill the chart"
    assert seen["rows"] == len(PROCS)
    assert seen["scroll"] == 0  # every process on screen, none scrolled out
