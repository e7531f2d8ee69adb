"""Per-GPU liveness on the dashboard: a GPU whose call hangs is NOT RESPONDING in its own panel
while the others keep updating, and a driver that crashes on its first reading is shown and
restarted, never the end of gputop.

Real driver processes on simulated boxes whose [[fault]] tables hang or crash a call; the real
sampler and IsolatedSource; Pilot for the screen, a pty for the whole command.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputop.engine.isolated import IsolatedSource
from gputop.engine.model import GpuState
from gputop.ui.app import GputopApp
from gputop.ui.widgets.gpu_grid import NO_GPUS, NO_READING_YET
from gputop.ui.widgets.gpu_panel import GpuPanel
from tests.pty_terminal import on_terminal
from tests.ui.driver_box import Body, header, run_on_box, until

BOX = """
name = "liveness"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 2
"""

HANG_GPU1 = """
[[fault]]
call = "nvmlDeviceGetTemperature"
kind = "hang"
gpu = 1
after_s = {after}
"""


def _panel(app: GputopApp, index: int) -> str:
    return app.query_one(f"#gpu-{index}", GpuPanel).render().plain


def _run(tmp_path: Path, faults: str, body: Body) -> IsolatedSource:
    return run_on_box(tmp_path, BOX + faults, body, size=(120, 34))


def _states(app: GputopApp) -> list[GpuState]:
    snap = app.snapshot
    return [] if snap is None else [g.state for g in snap.gpus]


async def _gpu0_keeps_updating(app: GputopApp, pilot: Pilot[Any]) -> None:
    """GPU 0 gets new readings (new snapshots, GPU 0 OK in each) while GPU 1 stays silent."""
    assert app.snapshot is not None
    first = app.snapshot.seq
    assert await until(pilot, lambda: app.snapshot is not None and app.snapshot.seq > first, 5)
    assert await until(
        pilot, lambda: app.snapshot is not None and app.snapshot.seq >= first + 3, 10
    )
    snap = app.snapshot
    assert snap is not None
    assert [g.state for g in snap.gpus] == [GpuState.OK, GpuState.NOT_RESPONDING]
    assert snap.gpus[0].temperature_c is not None
    assert "NOT RESPONDING" not in _panel(app, 0)
    assert "NOT RESPONDING" in _panel(app, 1)


def test_a_gpu_that_hangs_from_the_start_is_not_responding_from_the_first_frame(
    tmp_path: Path,
) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: len(_states(app)) == 2, 10), _states(app)
        assert _states(app)[1] is GpuState.NOT_RESPONDING
        assert "0 GPUs" not in header(app)
        assert NO_GPUS not in str(app.screen.query_one("#gpu-note").render())
        assert "NOT RESPONDING" in _panel(app, 1)
        # The call is named as soon as the driver process says where it is stuck (at the very
        # first tick of a busy box it may not have said yet: "no answer").
        assert await until(pilot, lambda: "nvmlDeviceGetTemperature" in _panel(app, 1), 5)
        await _gpu0_keeps_updating(app, pilot)

    _run(tmp_path, HANG_GPU1.format(after=0.0), body)


def test_a_gpu_that_hangs_mid_session_goes_not_responding_and_the_other_updates(
    tmp_path: Path,
) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert await until(pilot, lambda: _states(app) == [GpuState.OK] * 2, 10), _states(app)
        # The hang begins at 2 s; within a few ticks (0.25 s each) GPU 1's own panel says so.
        assert await until(pilot, lambda: "NOT RESPONDING" in _panel(app, 1), 8)
        assert app.snapshot is not None
        hung_at = app.snapshot.seq
        await _gpu0_keeps_updating(app, pilot)
        assert app.snapshot is not None and app.snapshot.seq >= hung_at + 3

    _run(tmp_path, HANG_GPU1.format(after=2.0), body)


CRASH_FIRST = """
[[fault]]
call = "nvmlDeviceGetPowerUsage"
kind = "crash"
gpu = 1
until_s = 1.5
"""


def test_a_crash_on_the_first_reading_is_shown_and_the_driver_restarted(tmp_path: Path) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        # The GPUs the driver named are kept, not dropped: GPU 0, read before the crash, with
        # that reading marked STALE; GPU 1, whose call crashed it, NOT RESPONDING.
        meanwhile = [GpuState.OK, GpuState.NOT_RESPONDING]
        assert await until(
            pilot, lambda: "DRIVER CRASHED" in header(app) and _states(app) == meanwhile, 10
        ), (header(app), _states(app))
        gpu0 = app.query_one("#gpu-0", GpuPanel)
        assert await until(pilot, lambda: "STALE" in str(gpu0.border_title), 3), gpu0.border_title
        assert app.snapshot is not None and app.snapshot.gpus[0].temperature_c is not None
        assert "NOT RESPONDING" in _panel(app, 1)
        assert await until(pilot, lambda: _states(app) == [GpuState.OK] * 2, 15), _states(app)
        assert "DRIVER CRASHED" not in header(app)

    source = _run(tmp_path, CRASH_FIRST, body)
    assert source.restarts >= 1


def test_the_dashboard_lives_on_when_the_driver_crashes_opening(tmp_path: Path) -> None:
    path = tmp_path / "box.toml"
    path.write_text(
        BOX + '[[fault]]\ncall = "nvmlInitWithFlags"\nkind = "crash"\nuntil_s = 4.0\n',
        encoding="utf-8",
    )
    with on_terminal("--scenario", str(path), size=(120, 34)) as term:
        term.wait_for(b"DRIVER CRASHED")
        term.read_for(1.0)
        assert term.proc.poll() is None, bytes(term.output[-300:])  # no exit 3
        term.wait_for(b"A100", timeout_s=20)  # the driver came back: its GPUs are drawn
        assert term.proc.poll() is None


def test_the_dashboard_starts_while_the_driver_hangs_opening_and_says_so(tmp_path: Path) -> None:
    """A hung nvmlInit holds neither the first frame nor the truth: no "0 GPUs", no "the
    driver lists none" (it has listed nothing yet), then the GPUs once it answers."""
    path = tmp_path / "box.toml"
    path.write_text(
        BOX + '[[fault]]\ncall = "nvmlInitWithFlags"\nkind = "hang"\nuntil_s = 6.0\n',
        encoding="utf-8",
    )
    started = time.monotonic()
    with on_terminal("--scenario", str(path), size=(120, 34)) as term:
        term.wait_for(b"nvmlInitWithFlags not answering", timeout_s=5)
        assert time.monotonic() - started < 5.5  # drawn while the driver still hangs
        term.wait_for(NO_READING_YET.encode(), timeout_s=3)
        assert b"? GPUs" in term.output
        assert b"0 GPUs" not in term.output and NO_GPUS.encode() not in term.output
        term.wait_for(b"A100", timeout_s=20)  # it answered: its GPUs are drawn
        assert term.proc.poll() is None
