"""The GPU health verdict on the dashboard: a panel's title says what the driver asks for
(RESET NEEDED, REBOOT NEEDED, REPLACE, DEGRADED) and its evidence; ok and unknown add nothing."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from gputop.ui.app import GputopApp, make_app
from tests.ui.data import run
from tests.ui.scenes import demo_frames, feed, frozen_clock


def test_each_panel_title_carries_its_gpus_verdict() -> None:
    frames = demo_frames("sick", ticks=3)
    app = make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))
    titles: dict[int, str] = {}

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await feed(app, pilot, frames[1:])
        titles.update({p.index: str(p.border_title) for p in app.main_screen.grid.panels})

    run(body, app=app, size=(200, 60), first=frames[0])
    assert "DEGRADED: 2 uncorrected ECC" in titles[1]
    assert "RESET NEEDED: recovery: GPU reset" in titles[2]
    assert "REBOOT NEEDED: recovery: node reboot" in titles[3]
    assert "REPLACE: unrepairable memory" in titles[4]
    for ok in (0, 5, 6):  # ok, unknown, ok
        assert "NEEDED" not in titles[ok] and "DEGRADED" not in titles[ok], titles[ok]


def test_the_gpu_detail_leads_with_the_verdict_and_its_evidence() -> None:
    from gputop.ui.screens.gpu_detail import field_lines

    gpus = demo_frames("sick", ticks=2)[-1].gpus
    reset = field_lines(gpus[2]).plain.splitlines()
    assert reset[0].split() == ["health", "reset", "needed"]
    assert any(line.startswith("  recovery: GPU reset: ") for line in reset[1:4])
    assert field_lines(gpus[0]).plain.splitlines()[0].split() == ["health", "ok"]
