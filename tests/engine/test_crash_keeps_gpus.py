"""A driver that crashes part-way through a reading keeps the GPUs it read before the crash.

The first reading, and those after a crash, come from the driver process GPU by GPU; so when a
call on GPU 2 crashes it, GPUs 0 and 1 are still shown (their reading, marked stale) and only
GPU 2 is NOT RESPONDING with DRIVER CRASHED. Real driver processes on a simulated box.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.model import GpuState

BOX = """
name = "crash-on-gpu-2"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 3

[[fault]]
call = "nvmlDeviceGetPowerUsage"
kind = "crash"
gpu = 2
"""


def _box(tmp_path: Path) -> Path:
    path = tmp_path / "box.toml"
    path.write_text(BOX, encoding="utf-8")
    return path


def test_the_gpus_read_before_a_crash_are_kept_stale_and_the_crashed_one_named(
    tmp_path: Path,
) -> None:
    source = IsolatedSource(DriverConfig(scenario=str(_box(tmp_path))))
    try:
        first = source.snapshot_within(10.0)
        assert [g.state for g in first.gpus] == [
            GpuState.OK,
            GpuState.OK,
            GpuState.NOT_RESPONDING,
        ], first.gpus
        for kept in first.gpus[:2]:
            assert kept.temperature_c is not None and kept.memory_total_bytes is not None
            assert kept.stale_s is not None and kept.stale_s >= 0  # an old reading, said so
        assert "DRIVER CRASHED" in (first.gpus[2].error or "")
        assert "DRIVER CRASHED" in (first.driver_note or "")
        # While the driver process is restarted (and crashes again), they stay, still stale.
        time.sleep(0.6)
        later = source.snapshot_within(3.0)
        assert [g.state for g in later.gpus][:2] == [GpuState.OK, GpuState.OK]
        assert all(g.stale_s is not None for g in later.gpus[:2])
        assert later.gpus[2].state is GpuState.NOT_RESPONDING
    finally:
        source.close()


def test_once_and_json_show_the_gpus_read_before_the_crash(tmp_path: Path) -> None:
    path = _box(tmp_path)
    run = [sys.executable, "-m", "gputop", "--scenario", str(path), "--timeout", "10"]
    once = subprocess.run([*run, "--once"], capture_output=True, text=True, timeout=60)
    assert once.returncode == 3, once.stderr
    lines = once.stdout.splitlines()
    gpu_lines = [line for line in lines if "A100" in line]
    assert len(gpu_lines) == 3, once.stdout
    for line in gpu_lines[:2]:
        assert "STALE" in line and "°C" in line and "NOT RESPONDING" not in line, line
    assert "NOT RESPONDING" in gpu_lines[2] and "DRIVER CRASHED" in gpu_lines[2]
    assert "Traceback" not in once.stderr

    as_json = subprocess.run([*run, "--json"], capture_output=True, text=True, timeout=60)
    assert as_json.returncode == 3, as_json.stderr
    gpus = json.loads(as_json.stdout)["gpus"]
    assert [g["state"] for g in gpus] == ["ok", "ok", "not-responding"]
    assert all(g["stale_s"] is not None and g["temperature_c"] is not None for g in gpus[:2])
