"""A healthy but slow driver is never called NOT RESPONDING at a short --interval.

At ``--interval 0.1`` the sampler used to wait 80 ms for a reading (0.8 of the interval): a
reading through the driver process that took longer made healthy GPUs flicker "NOT RESPONDING
for 0 s". A tick now waits at least 0.5 s, the loops' floor; a call that really hangs is still
NOT RESPONDING. Real driver processes on simulated boxes, the real Sampler.
"""

from __future__ import annotations

import queue
import time
from pathlib import Path

import pytest

from gputop.engine.deadline import MIN_ROW_WAIT_S, tick_wait
from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.model import GpuState, Snapshot
from gputop.engine.sampler import Sampler

SLOW = """
name = "slow-but-healthy"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
count = 2
slow_calls = { nvmlDeviceGetPowerUsage = 0.12 }
"""

HUNG = """
name = "hung-power"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
count = 2

[[fault]]
call = "nvmlDeviceGetPowerUsage"
kind = "hang"
gpu = 1
after_s = 1.0
"""


def test_the_wait_is_a_share_of_the_interval_with_a_floor() -> None:
    assert tick_wait(2.0) == pytest.approx(1.6)
    assert tick_wait(1.0) == pytest.approx(0.8)
    assert tick_wait(0.1) == MIN_ROW_WAIT_S == 0.5


def _snapshots(box: str, tmp_path: Path, seconds: float) -> list[Snapshot]:
    path = tmp_path / "box.toml"
    path.write_text(box, encoding="utf-8")
    source = IsolatedSource(DriverConfig(scenario=str(path)))
    got: queue.Queue[Snapshot] = queue.Queue()
    sampler = Sampler(source, on_snapshot=got.put, interval_s=0.1, dev_dir=str(tmp_path))
    try:
        assert source.wait_ready(10.0)
        sampler.start()
        time.sleep(seconds)
    finally:
        sampler.stop()
        source.close()
    return [got.get_nowait() for _ in range(got.qsize())]


def test_a_slow_healthy_reading_is_waited_for(tmp_path: Path) -> None:
    # Each GPU's power reading takes 120 ms: a reading takes over 240 ms, three 0.1 s ticks.
    snaps = [s for s in _snapshots(SLOW, tmp_path, 3.0) if s.gpus]
    assert len(snaps) >= 4
    states = {g.state for s in snaps for g in s.gpus}
    assert states == {GpuState.OK}, [(s.seq, s.driver_note) for s in snaps]


def test_a_hung_call_is_still_not_responding(tmp_path: Path) -> None:
    snaps = _snapshots(HUNG, tmp_path, 3.5)
    silent = [s for s in snaps if any(g.state is GpuState.NOT_RESPONDING for g in s.gpus)]
    assert silent, [(s.seq, [g.state for g in s.gpus]) for s in snaps]
    last = silent[-1]
    assert [g.state for g in last.gpus] == [GpuState.OK, GpuState.NOT_RESPONDING]
    assert "nvmlDeviceGetPowerUsage" in (last.driver_note or "")
