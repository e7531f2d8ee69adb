"""Words that are true (issue 35): a GPU that did not answer, or whose driver crashed, is not a
lost one; its workers are of unknown state, not ``lost-gpu``, and doctor's advice follows the
GPU's state as read now. MIG processes have no SM % (N/A), not 0.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gputop import sim
from gputop.commands.doctor import LOST_ADVICE, NOT_RESPONDING_ADVICE, diagnose
from gputop.engine.enrich import enrich
from gputop.engine.holders import scan_holders
from gputop.engine.model import GpuState, ProcessRow, ProcState, Snapshot, silent_gpu
from gputop.sim.scenario import Scenario
from tests.engine.spawn import HOLD, Spawner

NOT_FOUND = 6  # NVML_ERROR_NOT_FOUND: what a driver answers for "no samples"


def two_gpus(pid: int, *, lost_after_s: float | None = None) -> dict[str, Any]:
    """GPU 0 idle; GPU 1 with ``pid`` listed (until it is lost at ``lost_after_s``)."""
    gpu: dict[str, Any] = {"name": "NVIDIA A100-SXM4-80GB", "memory_reserved_mib": 0}
    return {
        "name": "words",
        "gpu": [
            {**gpu, "pci_bus_id": "00000000:01:00.0"},
            {
                **gpu,
                "pci_bus_id": "00000000:02:00.0",
                "processes": [{"pid": pid, "used_memory_mib": 2048}],
                "lost_after_s": lost_after_s,
            },
        ],
    }


def _row(snapshot: Snapshot, pid: int) -> ProcessRow:
    rows = {r.pid: r for r in snapshot.processes}
    assert pid in rows, f"no row for {pid}: {sorted(rows)}"
    return rows[pid]


@pytest.mark.parametrize(
    "why",
    [
        "nvmlDeviceGetPowerUsage did not return",
        "DRIVER CRASHED (SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage)",
    ],
    ids=["not-responding", "driver-crashed"],
)
def test_a_worker_of_a_gpu_that_did_not_answer_is_unknown_not_lost(
    sim_source: Any, spawner: Spawner, dev_dir: Path, why: str
) -> None:
    (dev_dir / "nvidia1").write_bytes(b"\0" * 4096)
    worker = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
    source, _ = sim_source(two_gpus(worker.pid))
    answered = source.snapshot()
    # What the driver process makes of a GPU that hung or a driver that crashed (engine.isolated).
    hung_gpu = silent_gpu(answered.gpus[1], error=why, stale_s=6.0)
    silent = dataclasses.replace(answered, gpus=(answered.gpus[0], hung_gpu), driver_note=why)
    holders = scan_holders(str(dev_dir))

    row = _row(enrich(silent, holders=holders), worker.pid)
    assert row.states == (ProcState.UNKNOWN,)
    assert not row.stuck
    assert row.gpu_indices == (1,)
    assert row.parent_note is not None
    assert "could not list" in row.parent_note and "lost" not in row.parent_note

    diagnosis = diagnose(enrich(silent, holders=holders), holders)
    text = diagnosis.text
    assert f"PID {worker.pid}  [unknown]" in text
    assert "On a GPU whose processes could not be read (not counted as stuck" in text
    assert NOT_RESPONDING_ADVICE in text
    assert "lost-gpu" not in text and "On a lost GPU" not in text and LOST_ADVICE not in text
    assert "reboot" not in text and "kill" not in text
    assert diagnosis.exit_code == 3 and not diagnosis.stuck_processes

    # It answers again: the worker is listed and active, and doctor has no advice left to give.
    back = enrich(source.snapshot(), holders=holders)
    assert _row(back, worker.pid).states == (ProcState.ACTIVE,)
    healthy = diagnose(back, holders)
    assert healthy.exit_code == 0
    assert NOT_RESPONDING_ADVICE not in healthy.text and "reboot" not in healthy.text
    assert healthy.text.rstrip().endswith("OK: nothing stuck.")


def test_only_a_lost_gpu_gets_reset_advice_and_lost_gpu_workers(
    sim_source: Any, spawner: Spawner, dev_dir: Path, sim_clock: sim.ManualClock
) -> None:
    (dev_dir / "nvidia1").write_bytes(b"\0" * 4096)
    worker = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
    source, _ = sim_source(two_gpus(worker.pid, lost_after_s=5.0))
    holders = scan_holders(str(dev_dir))
    before = diagnose(enrich(source.snapshot(), holders=holders), holders)
    assert LOST_ADVICE not in before.text
    sim_clock.set(6.0)
    lost = enrich(source.snapshot(), holders=holders)
    assert lost.gpus[1].state is GpuState.LOST
    assert _row(lost, worker.pid).states == (ProcState.ON_LOST_GPU,)
    text = diagnose(lost, holders).text
    assert "GPU 1  NVIDIA A100-SXM4-80GB: LOST (GPU is lost" in text
    assert LOST_ADVICE in text and "reboot" in LOST_ADVICE
    assert f"PID {worker.pid}  [lost-gpu]" in text
    assert NOT_RESPONDING_ADVICE not in text


def test_a_gpu_with_no_handle_lists_nothing_and_its_holder_is_unknown(
    sim_source: Any, spawner: Spawner, dev_dir: Path
) -> None:
    """ERROR (no handle, not lost): no list could be read, so its holder is not stuck either."""
    (dev_dir / "nvidia1").write_bytes(b"\0" * 4096)
    worker = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
    source, _ = sim_source(two_gpus(worker.pid))
    answered = source.snapshot()
    broken = dataclasses.replace(answered.gpus[1], state=GpuState.ERROR, processes=())
    snap = dataclasses.replace(answered, gpus=(answered.gpus[0], broken))
    row = _row(enrich(snap, holders=scan_holders(str(dev_dir))), worker.pid)
    assert row.states == (ProcState.UNKNOWN,) and not row.stuck


def _mig_box() -> Scenario:
    """GPU 0 in MIG mode with a busy process; GPU 1 whole with one of 70 % SM."""
    box = Scenario.from_dict(
        {
            "name": "mig-sm",
            "gpu": [
                {
                    "name": "NVIDIA H100 80GB HBM3",
                    "memory_total_mib": 81559,
                    "compute_capability": [9, 0],
                    "mig": True,
                    "gpu_instances": [{"profile": "3g.40gb", "id": 1}],
                    "processes": [
                        {"pid": 5300101, "gpu_instance": 1, "used_memory_mib": 900, "sm_util": 80}
                    ],
                },
                {
                    "name": "NVIDIA H100 80GB HBM3",
                    "processes": [{"pid": 5300401, "used_memory_mib": 900, "sm_util": 70}],
                },
            ],
        }
    )
    # As a driver may answer in MIG mode: "no samples" (NOT_FOUND), which is not "idle".
    mig = dataclasses.replace(
        box.gpus[0], call_errors={"nvmlDeviceGetProcessUtilization": NOT_FOUND}
    )
    return dataclasses.replace(box, gpus=(mig, box.gpus[1]))


def test_a_mig_process_has_no_sm_percent(sim_source: Any) -> None:
    source, _ = sim_source(_mig_box())
    snap = enrich(source.snapshot())
    (on_mig,) = snap.gpus[0].processes
    assert on_mig.gpu_instance_id == 1
    assert on_mig.sm_util_percent is None and on_mig.memory_util_percent is None  # N/A, not 0
    assert _row(snap, 5300101).sm_util_percent is None
    (whole,) = snap.gpus[1].processes
    assert whole.sm_util_percent == 70  # a whole GPU's processes keep theirs
