"""Every NVML return code on every per-GPU call the sampler makes (issue 35): one failed call
costs its own reading, never the GPU, its process list or a verdict about its processes.

The calls are those the simulated driver counted while a source opened and read one snapshot
(counters included), not a list written here: a call the sampler starts making is covered too.
Each (code, call) fails on every GPU at once, a whole GPU with a real listed process and a GPU in
MIG mode with another, each holding its GPU's device file in a folder of the test's own.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from gputop import sim
from gputop.commands.doctor import diagnose
from gputop.engine.enrich import enrich
from gputop.engine.holders import HolderScan, scan_holders
from gputop.engine.model import GpuSample, GpuState, ProcState, Snapshot
from gputop.engine.nvml import NvmlSource
from gputop.sim.scenario import Scenario
from tests.engine.spawn import HOLD, Spawner

# Every return code pynvml names, and one no NVML has (a code a newer driver may add).
CODES = sorted(
    {v for k, v in vars(pynvml).items() if k.startswith("NVML_ERROR_") and isinstance(v, int)}
    | {4242}
)
LOST = pynvml.NVML_ERROR_GPU_IS_LOST
NOT_FOUND = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND  # "this driver lacks it": the next call is tried
# Calls that name a GPU by index, not by handle: no GPU's call, so no GPU's fault.
NO_HANDLE = ("nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex")
# The identity fields, and the call each is read by (a failed one is N/A; the others stay).
IDENTITY = {
    "uuid": "nvmlDeviceGetUUID",
    "name": "nvmlDeviceGetName",
    "pci_bus_id": "nvmlDeviceGetPciInfo",
    "minor_number": "nvmlDeviceGetMinorNumber",
}


def _scenario(whole_pid: int, mig_pid: int) -> Scenario:
    return Scenario.from_dict(
        {
            "name": "error-codes",
            "gpu": [
                {
                    "name": "NVIDIA A100-SXM4-80GB",
                    "pci_bus_id": "00000000:01:00.0",
                    "memory_total_mib": 81920,
                    "memory_reserved_mib": 0,
                    "processes": [{"pid": whole_pid, "used_memory_mib": 4096, "sm_util": 50}],
                },
                {
                    "name": "NVIDIA H100 80GB HBM3",
                    "pci_bus_id": "00000000:18:00.0",
                    "memory_total_mib": 81559,
                    "compute_capability": [9, 0],
                    "mig": True,
                    "gpu_instances": [{"profile": "3g.40gb", "id": 1}],
                    "processes": [{"pid": mig_pid, "gpu_instance": 1, "used_memory_mib": 2048}],
                },
            ],
        }
    )


def _failing(scenario: Scenario, call: str, code: int) -> Scenario:
    """``scenario`` with ``call`` answering ``code`` on every GPU and every MIG device."""
    gpus = tuple(
        dataclasses.replace(g, call_errors={call: code}, mig_call_errors={call: code})
        for g in scenario.gpus
    )
    return dataclasses.replace(scenario, gpus=gpus)


def _read(scenario: Scenario) -> tuple[Snapshot, list[str]]:
    """One snapshot of ``scenario`` from a fresh source, and the per-GPU calls it made."""
    lib = sim.install(scenario, sim.ManualClock(0.0))
    try:
        source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
        try:
            snapshot = source.snapshot()
        finally:
            source.close()
    finally:
        sim.uninstall()
    calls = [c for c in lib.calls if c.startswith("nvmlDevice") and not c.startswith(NO_HANDLE)]
    return snapshot, sorted(calls)


@dataclasses.dataclass(frozen=True)
class Box:
    scenario: Scenario
    holders: HolderScan
    pids: tuple[int, int]  # the listed processes of GPU 0 and GPU 1, each holding its GPU's file
    baseline: Snapshot
    calls: list[str]


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    dev_dir: Path = tmp_path_factory.mktemp("dev")
    for name in ("nvidia0", "nvidia1", "nvidiactl"):
        (dev_dir / name).write_bytes(b"\0" * 4096)
    spawner = Spawner()
    try:
        whole = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
        mig = spawner.ready(HOLD, str(dev_dir / "nvidia1"))
        scenario = _scenario(whole.pid, mig.pid)
        baseline, calls = _read(scenario)
        holders = scan_holders(str(dev_dir))
        yield Box(scenario, holders, (whole.pid, mig.pid), baseline, calls)
    finally:
        spawner.cleanup()


def test_the_box_is_healthy_and_the_calls_are_many(box: Box) -> None:
    """The baseline the table compares with: both processes listed and active, nothing stuck."""
    rows = enrich(box.baseline, holders=box.holders).processes
    assert {r.pid: r.states for r in rows} == dict.fromkeys(box.pids, (ProcState.ACTIVE,))
    assert [g.state for g in box.baseline.gpus] == [GpuState.OK, GpuState.OK]
    assert all(g.process_list_error is None for g in box.baseline.gpus)
    assert box.baseline.gpus[1].mig_devices  # the MIG calls are made, and so covered
    # Readings, processes, MIG and the exporter's counters: dozens of calls.
    for call in (
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetProcessUtilization",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetTotalEnergyConsumption",
    ):
        assert call in box.calls
    assert len(box.calls) > 40


def _problems(box: Box, call: str, code: int) -> list[str]:
    """What is wrong with the box read while ``call`` answers ``code`` (empty: nothing)."""
    snapshot, _ = _read(_failing(box.scenario, call, code))
    enriched = enrich(snapshot, holders=box.holders)
    problems: list[str] = []
    for gpu, before in zip(snapshot.gpus, box.baseline.gpus, strict=True):
        if gpu.state is GpuState.LOST and code == LOST:
            continue  # only GPU_IS_LOST may make a GPU lost
        problems.extend(f"GPU {gpu.index}: {p}" for p in _gpu_problems(gpu, before, call, code))
    rows = {r.pid: r for r in enriched.processes}
    for pid in box.pids:
        row = rows.get(pid)
        if row is None:
            problems.append(f"PID {pid}: no row")
        elif row.stuck or row.state not in (
            ProcState.ACTIVE,
            ProcState.UNKNOWN,
            ProcState.ON_LOST_GPU,
        ):
            problems.append(f"PID {pid}: {row.state.value}")
    if enriched.unattributed_memory_bytes:
        problems.append(f"unattributed {enriched.unattributed_memory_bytes}")
    diagnosis = diagnose(enriched, box.holders)
    # a kill command (doctor's health section may name "unkillable" processes: no command)
    if diagnosis.stuck_processes or re.search(r"\bkill -[A-Z]", diagnosis.text):
        problems.append("doctor advises a kill")
    return problems


def _gpu_problems(gpu: GpuSample, before: GpuSample, call: str, code: int) -> list[str]:
    if gpu.state is not GpuState.OK:
        return [f"{gpu.state.value} ({gpu.error})"]
    out = [
        f"{field} {getattr(gpu, field)!r}"
        for field, reader in IDENTITY.items()
        if not call.startswith(reader) and getattr(gpu, field) != getattr(before, field)
    ]
    pids, known = {p.pid for p in gpu.processes}, {p.pid for p in before.processes}
    if "RunningProcesses" in call and code != NOT_FOUND:  # the list itself failed: unknown
        if gpu.process_list_error is None:
            out.append("a failed process list taken for an empty one")
        if not pids <= known:
            out.append(f"processes {sorted(pids)}")
    else:
        if gpu.process_list_error is not None:
            out.append(f"process list unknown: {gpu.process_list_error}")
        if pids != known:
            out.append(f"processes {sorted(pids)}, not {sorted(known)}")
    return out


@pytest.mark.parametrize("code", CODES, ids=[f"code-{c}" for c in CODES])
def test_a_failed_call_costs_only_its_reading(box: Box, code: int) -> None:
    failures = {call: p for call in box.calls if (p := _problems(box, call, code))}
    assert not failures, f"NVML code {code}: " + "; ".join(
        f"{call}: {', '.join(p)}" for call, p in failures.items()
    )


def test_a_failed_reading_is_none_and_the_others_are_kept(box: Box) -> None:
    """The issue's case: temperature failing with DEPRECATED blanks temperature alone."""
    snapshot, _ = _read(_failing(box.scenario, "nvmlDeviceGetTemperature", 26))
    gpu, before = snapshot.gpus[0], box.baseline.gpus[0]
    assert gpu.state is GpuState.OK
    assert gpu.temperature_c is None and before.temperature_c is not None
    assert gpu.power_draw_mw == before.power_draw_mw is not None
    assert gpu.memory_used_bytes == before.memory_used_bytes is not None


def test_a_failed_process_list_is_unknown_and_its_holder_not_stuck(box: Box) -> None:
    """The list call failing is no evidence: its process is UNKNOWN, with a note, no kill."""
    failing = _failing(box.scenario, "nvmlDeviceGetComputeRunningProcesses_v3", 999)
    snapshot, _ = _read(failing)
    gpu = snapshot.gpus[0]
    assert gpu.state is GpuState.OK and gpu.processes == ()
    assert gpu.process_list_error is not None
    assert "nvmlDeviceGetComputeRunningProcesses" in gpu.process_list_error
    assert "Unknown Error" in gpu.process_list_error
    enriched = enrich(snapshot, holders=box.holders)
    row = next(r for r in enriched.processes if r.pid == box.pids[0])
    assert row.states == (ProcState.UNKNOWN,) and not row.stuck
    assert row.parent_note is not None and "could not list" in row.parent_note
    assert enriched.unattributed_memory_bytes == ()  # its memory is no one's we know of
    diagnosis = diagnose(enriched, box.holders)
    assert diagnosis.exit_code == 0 and not diagnosis.stuck_processes
    assert "GPUs 0, 1 gave no process list: not diagnosed" in diagnosis.text
    assert "kill" not in diagnosis.text
