"""The dashboard on a real driver process that crashes and hangs (the simulated driver's faults).

The real sampler, the real IsolatedSource and a real child process: the screen must say what
happened, keep answering keys, and recover when the driver does.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputop.engine.isolated import IsolatedSource
from gputop.ui.app import GputopApp
from gputop.ui.screens.help import HelpScreen
from tests.processes import gone_within
from tests.ui.driver_box import Body, header, run_on_box, until

SCENARIO = """
name = "flaky"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 2
[[fault]]
call = "nvmlDeviceGetPowerUsage"
kind = "crash"
gpu = 1
after_s = {crash_from}
until_s = {crash_until}
[[fault]]
call = "nvmlDeviceGetTemperature"
kind = "hang"
gpu = 0
after_s = {hang_from}
until_s = {hang_until}
"""


def _run(tmp_path: Path, faults: dict[str, float], body: Body) -> IsolatedSource:
    return run_on_box(tmp_path, SCENARIO.format(**faults), body)


def test_a_driver_crash_mid_session_is_shown_keys_work_and_it_recovers(tmp_path: Path) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: app.snapshot is not None and app.snapshot.gpus, 5)
        assert await until(pilot, lambda: "DRIVER CRASHED" in header(app), 5)
        head = header(app)
        assert "SIGSEGV in libnvidia-ml" in head and "restarting" in head
        # Keys still work while the driver is down: the interval changes at once.
        await pilot.press("plus")
        assert app.sampler is not None and app.sampler.interval_s == 0.5
        await pilot.press("minus")
        assert await until(pilot, lambda: "DRIVER CRASHED" not in header(app), 10)
        assert app.snapshot is not None and app.snapshot.sampler_restarts >= 1
        assert app.snapshot.stale_s is None and len(app.snapshot.gpus) == 2

    source = _run(
        tmp_path,
        {"crash_from": 2.0, "crash_until": 3.0, "hang_from": 1e6, "hang_until": 1e6 + 1},
        body,
    )
    assert source.restarts >= 1


def test_a_hung_call_is_named_and_the_screen_goes_on(tmp_path: Path) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: app.snapshot is not None and app.snapshot.gpus, 5)
        named = "nvmlDeviceGetTemperature (GPU 0) not answering"
        assert await until(pilot, lambda: named in header(app), 5)
        await pilot.press("question_mark")  # help opens while the driver hangs
        assert isinstance(app.screen, HelpScreen)
        assert app.sampler is not None
        assert "not answering" in (app.sampler._source.driver_note or "")  # type: ignore[attr-defined]
        await pilot.press("escape")
        assert await until(pilot, lambda: named not in header(app), 10)
        assert app.snapshot is not None and app.snapshot.stale_s is None

    source = _run(
        tmp_path,
        {"crash_from": 1e6, "crash_until": 1e6 + 1, "hang_from": 2.0, "hang_until": 4.0},
        body,
    )
    assert source.restarts == 0


def test_quitting_while_the_driver_hangs_is_immediate(tmp_path: Path) -> None:
    pids: list[int] = []

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: app.snapshot is not None and app.snapshot.gpus, 5)
        assert await until(pilot, lambda: "not answering" in header(app), 5)
        assert app.sampler is not None
        pids.append(app.sampler._source.pid)  # type: ignore[attr-defined]
        await pilot.press("q")  # the driver hangs for ever: returning at all is the point

    began = time.monotonic()
    _run(
        tmp_path,
        {"crash_from": 1e6, "crash_until": 1e6 + 1, "hang_from": 2.0, "hang_until": 1e6},
        body,
    )
    assert time.monotonic() - began < 8
    assert gone_within(pids[0], 3), "the hung driver process outlived the dashboard"
