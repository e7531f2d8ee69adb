"""Issue 14's cases on the simulated driver: numbers and states as the driver and the OS say them.

A C+G process counted once, with the memory no process owns next to it; a GPU lost before gputop
started and one lost while it runs, and the real processes that hold their device files; a PID
from another namespace named by the driver.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gputop import sim
from gputop.engine.enrich import enrich
from gputop.engine.holders import scan_holders
from gputop.engine.model import GpuState, ProcessRow, ProcessType, ProcState, Snapshot
from tests.engine.spawn import HOLD, Spawner

MiB = 1024**2
FOREIGN_PID = 4_242_001  # no such PID here: a process in another PID namespace


def box(*, lost_after_s: float | None = 0.0, holder_pid: int | None = None) -> dict[str, Any]:
    """GPU 0: a C+G app (6100 MiB) and 3 GiB no process owns; GPU 1: lost at ``lost_after_s``."""
    gpu1: dict[str, Any] = {
        "name": "NVIDIA RTX A6000",
        "pci_bus_id": "00000000:02:00.0",
        "memory_total_mib": 49140,
        "lost_after_s": lost_after_s,
    }
    if holder_pid is not None:  # listed until the GPU is lost
        gpu1["processes"] = [{"pid": holder_pid, "used_memory_mib": 2048}]
    return {
        "name": "truth",
        "gpu": [
            {
                "name": "NVIDIA RTX A6000",
                "pci_bus_id": "00000000:01:00.0",
                "memory_total_mib": 49140,
                "extra_used_mib": 3072,
                "processes": [
                    {
                        "pid": FOREIGN_PID,
                        "name": "blender",
                        "type": "compute+graphics",
                        "used_memory_mib": 6100,
                    }
                ],
            },
            gpu1,
        ],
    }


def _row(snapshot: Snapshot, pid: int) -> ProcessRow:
    rows = {r.pid: r for r in snapshot.processes}
    assert pid in rows, f"no row for {pid}: {sorted(rows)}"
    return rows[pid]


def test_a_cg_process_is_counted_once_and_the_unowned_memory_shows(sim_source: Any) -> None:
    source, _ = sim_source(box())
    snap = enrich(source.snapshot())
    gpu = snap.gpus[0]
    (proc,) = gpu.processes
    assert proc.type is ProcessType.MIXED
    assert proc.used_memory_bytes == 6100 * MiB
    row = _row(snap, FOREIGN_PID)
    assert row.type is ProcessType.MIXED
    assert row.used_memory_bytes == 6100 * MiB
    # used = 6100 (the process, once) + 3072 (no one's): the 3 GiB is reported, all of it.
    assert gpu.memory_used_bytes == (6100 + 3072) * MiB
    assert dict(snap.unattributed_memory_bytes) == {0: 3072 * MiB}


def test_a_gpu_lost_before_start_is_lost_not_an_error(sim_source: Any) -> None:
    source, _ = sim_source(box(lost_after_s=0.0))
    gpu = source.snapshot().gpus[1]
    assert gpu.state is GpuState.LOST
    assert gpu.error is not None and "GPU is lost" in gpu.error
    assert gpu.memory_used_bytes is None


def test_another_namespace_pid_is_named_by_the_driver(sim_source: Any) -> None:
    source, lib = sim_source(box())
    snap = enrich(source.snapshot())
    (proc,) = snap.gpus[0].processes
    assert proc.driver_name == "blender"
    row = _row(snap, FOREIGN_PID)
    assert row.states == (ProcState.NAMESPACE,)
    assert row.info.name == "blender"
    calls = lib.calls["nvmlSystemGetProcessName"]
    source.snapshot()
    assert lib.calls["nvmlSystemGetProcessName"] == calls  # asked once while it stays listed


def test_a_visible_pid_is_not_named_by_the_driver(sim_source: Any, spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    scenario = box()
    scenario["gpu"][0]["processes"][0]["pid"] = proc.pid
    source, lib = sim_source(scenario)
    (listed,) = source.snapshot().gpus[0].processes
    assert listed.driver_name is None
    assert lib.calls["nvmlSystemGetProcessName"] == 0


def test_holder_of_a_gpu_lost_before_start_is_not_stuck(
    sim_source: Any, spawner: Spawner, dev_dir: Path
) -> None:
    (dev_dir / "nvidia1").write_bytes(b"\0" * 4096)
    source, _ = sim_source(box(lost_after_s=0.0))
    assert source.snapshot().gpus[1].minor_number is None  # no handle: no minor number either
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
    snap = enrich(source.snapshot(), holders=scan_holders(str(dev_dir)))
    row = _row(snap, proc.pid)
    assert row.states == (ProcState.ON_LOST_GPU,)
    assert not row.stuck
    assert row.gpu_indices == (1,)
    assert row.parent_note is not None and "lost" in row.parent_note


def test_holder_of_a_healthy_gpu_is_still_a_holder(
    sim_source: Any, spawner: Spawner, dev_dir: Path
) -> None:
    source, _ = sim_source(box(lost_after_s=0.0))
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    snap = enrich(source.snapshot(), holders=scan_holders(str(dev_dir)))
    row = _row(snap, proc.pid)
    assert row.states == (ProcState.HOLDER,)
    assert row.stuck


def test_a_process_on_a_gpu_lost_while_running_is_not_stuck(
    sim_source: Any, spawner: Spawner, dev_dir: Path, sim_clock: sim.ManualClock
) -> None:
    (dev_dir / "nvidia1").write_bytes(b"\0" * 4096)
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
    source, _ = sim_source(box(lost_after_s=5.0, holder_pid=proc.pid))
    before = enrich(source.snapshot(), holders=scan_holders(str(dev_dir)))
    assert _row(before, proc.pid).states == (ProcState.ACTIVE,)
    sim_clock.set(6.0)
    after = enrich(source.snapshot(), holders=scan_holders(str(dev_dir)))
    assert after.gpus[1].state is GpuState.LOST
    assert after.gpus[1].minor_number == 1  # read at start: its file still names it
    row = _row(after, proc.pid)
    assert row.states == (ProcState.ON_LOST_GPU,)
    assert not row.stuck
    assert row.gpu_indices == (1,)
