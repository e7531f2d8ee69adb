"""A verdict needs evidence (issue 35), end to end: ``python -m gputop`` on a scenario file whose
GPU lists a real process holding the GPU's device file (in a folder of the test's own).

A reading that fails with an uncommon code costs that reading only: doctor finds nothing stuck
and query prints the driver's error for that field alone. A process list that fails, or a GPU
that hangs from the first call, leaves its worker unknown: never stuck, never a kill command.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.engine.spawn import HOLD, Spawner

ROOT = Path(__file__).resolve().parents[2]
A100 = "NVIDIA A100-SXM4-80GB"


def gputop(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP", "TEXTUAL"))}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


@pytest.fixture
def worker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real process holding ``nvidia1`` of a device folder of the test's own: (PID, folder)."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (dev / name).write_bytes(b"\0" * 4096)
    spawner = Spawner()
    try:
        yield spawner.ready(HOLD, str(dev / "nvidia1")).pid, dev
    finally:
        spawner.cleanup()


def scenario(
    tmp_path: Path, pid: int, *, faults: tuple[dict[str, Any], ...] = (), **gpu1: Any
) -> Path:
    """GPU 0 idle, GPU 1 listing ``pid`` (4096 MiB, all of its used memory), with ``gpu1``;
    ``faults``: the scenario's [[fault]] tables."""
    gpu: dict[str, Any] = {"name": A100, "memory_total_mib": 81920, "memory_reserved_mib": 0}
    data = {
        "name": "evidence",
        "gpu": [
            {**gpu, "pci_bus_id": "00000000:01:00.0"},
            {
                **gpu,
                "pci_bus_id": "00000000:02:00.0",
                "processes": [{"pid": pid, "used_memory_mib": 4096}],
                **gpu1,
            },
        ],
        "fault": list(faults),
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data))
    return path


FAILING_READINGS = {"nvmlDeviceGetTemperature": "deprecated", "nvmlDeviceGetPowerUsage": "unknown"}


def test_doctor_finds_nothing_stuck_when_a_reading_fails(
    worker: tuple[int, Path], tmp_path: Path
) -> None:
    pid, dev = worker
    path = scenario(tmp_path, pid, call_errors=FAILING_READINGS)
    result = gputop("doctor", "--scenario", str(path), "--dev-dir", str(dev))
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"GPU 1  {A100}: used 4,096 MiB, attributed 4,096 MiB to 1 process" in result.stdout
    assert f"PID {pid}" not in result.stdout  # active, listed: nothing to say about it
    assert "kill" not in result.stdout and "ERROR" not in result.stdout
    assert result.stdout.rstrip().endswith("OK: nothing stuck.")


def test_query_prints_the_error_of_the_failed_field_alone(
    worker: tuple[int, Path], tmp_path: Path
) -> None:
    pid, _ = worker
    path = scenario(tmp_path, pid, call_errors=FAILING_READINGS)
    fields = "index,name,temperature.gpu,power.draw,memory.used,clocks.sm"
    result = gputop(
        "query", "--scenario", str(path), f"--query-gpu={fields}", "--format=csv,noheader"
    )
    assert result.returncode == 0, result.stderr
    _, gpu1 = result.stdout.splitlines()
    cells = gpu1.split(", ")
    assert cells[:2] == ["1", A100]
    assert cells[2] == "[Requested functionality has been deprecated]"
    assert cells[3] == "[Unknown Error]"
    assert cells[4] == "4096 MiB"
    assert cells[5].endswith(" MHz") and cells[5][:-4].isdigit()
    apps = gputop(
        "query", "--scenario", str(path), "--query-compute-apps=pid", "--format=csv,noheader"
    )
    assert apps.stdout.split() == [str(pid)]  # its process is still listed


def test_a_failed_process_list_leaves_its_worker_unknown(
    worker: tuple[int, Path], tmp_path: Path
) -> None:
    pid, dev = worker
    path = scenario(
        tmp_path, pid, call_errors={"nvmlDeviceGetComputeRunningProcesses_v3": "unknown"}
    )
    result = gputop("doctor", "--scenario", str(path), "--dev-dir", str(dev))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "its process list could not be read" in out
    assert f"PID {pid}  [unknown]" in out
    assert "kill" not in out and "UNATTRIBUTED" not in out
    assert out.rstrip().endswith(
        "INCOMPLETE: nothing stuck on the GPUs that answered (GPU 1 gave no process list: "
        "not diagnosed)."
    )
    data = json.loads(gputop("--json", "--scenario", str(path)).stdout)
    gpu1 = data["gpus"][1]
    assert gpu1["state"] == "ok" and gpu1["processes"] == []
    assert "nvmlDeviceGetComputeRunningProcesses" in gpu1["process_list_error"]


def test_a_gpu_that_hangs_from_the_start_leaves_its_worker_unknown_not_lost(
    worker: tuple[int, Path], tmp_path: Path
) -> None:
    pid, dev = worker
    hang = {"call": "nvmlDeviceGetPowerUsage", "kind": "hang", "gpu": 1}
    path = scenario(tmp_path, pid, faults=(hang,))
    result = gputop("doctor", "--timeout", "1.5", "--scenario", str(path), "--dev-dir", str(dev))
    assert result.returncode == 3, result.stdout + result.stderr
    out = result.stdout
    assert f"GPU 1  {A100}: NOT RESPONDING" in out
    assert "it may answer again: wait, and check the driver" in out
    assert f"PID {pid}  [unknown]" in out
    assert "lost-gpu" not in out and "reboot" not in out and "kill" not in out
    assert "GPU 1 did not answer: not diagnosed" in out.splitlines()[-1]
