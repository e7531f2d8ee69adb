"""MIG in the driver layer (gputop.engine.nvml) on the simulated driver, the real pynvml between.

GPU 0 of the ``mig`` scenario is an H100 in MIG mode: 3g.40gb (GI 1) + 2g.20gb (GI 5) +
1g.10gb (GI 13) + 1g.10gb (GI 14); GPU 1 a whole H100.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gputop import sim
from gputop.engine import wire
from gputop.engine.model import GpuState, MigDevice, ProcessRow, ProcInfo, ProcState, Snapshot
from gputop.sim.scenario import Scenario

MiB = 1024**2
SimSource = Callable[..., tuple[Any, sim.SimLibrary]]


def mig_box(**gpu0: Any) -> Scenario:
    """The shipped ``mig`` box, with GPU 0's scenario keys overridden."""
    scenario = sim.load_scenario("mig")
    if not gpu0:
        return scenario
    return replace(scenario, gpus=(replace(scenario.gpus[0], **gpu0), *scenario.gpus[1:]))


def test_mig_devices_under_their_gpu(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    gpu0, gpu1 = source.snapshot().gpus
    assert gpu0.mig_mode is True and gpu1.mig_mode is False
    assert gpu1.mig_devices == ()
    ids = [
        (m.index, m.gpu_index, m.gpu_instance_id, m.compute_instance_id) for m in gpu0.mig_devices
    ]
    assert ids == [(0, 0, 1, 0), (1, 0, 5, 0), (2, 0, 13, 0), (3, 0, 14, 0)]
    assert [m.profile for m in gpu0.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert [m.label for m in gpu0.mig_devices] == ["0/1", "0/5", "0/13", "0/14"]
    assert [m.gpu_instance_slices for m in gpu0.mig_devices] == [3, 2, 1, 1]
    assert [m.multiprocessor_count for m in gpu0.mig_devices] == [60, 32, 16, 16]
    assert all(m.uuid and m.uuid.startswith("MIG-") for m in gpu0.mig_devices)
    assert len({m.uuid for m in gpu0.mig_devices}) == 4


def test_memory_per_mig_device(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    gpu0 = source.snapshot().gpus[0]
    used = [m.memory_used_bytes for m in gpu0.mig_devices]
    assert used == [30086 * MiB, 14125 * MiB, 6212 * MiB, 12 * MiB]
    assert [m.memory_total_bytes for m in gpu0.mig_devices] == [
        40448 * MiB,
        20096 * MiB,
        9984 * MiB,
        9984 * MiB,
    ]
    assert all(
        m.memory_free_bytes == (m.memory_total_bytes or 0) - (m.memory_used_bytes or 0)
        for m in gpu0.mig_devices
    )
    assert gpu0.memory_used_bytes == sum(u or 0 for u in used)


def test_no_utilisation_on_a_gpu_in_mig_mode(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    gpu0, gpu1 = source.snapshot().gpus
    assert gpu0.utilization_gpu_percent is None and gpu0.utilization_memory_percent is None
    assert gpu0.encoder_percent is None and gpu0.decoder_percent is None
    assert all(m.utilization_gpu_percent is None for m in gpu0.mig_devices)
    assert all(p.sm_util_percent is None for p in gpu0.processes)  # N/A per process too
    assert gpu1.utilization_gpu_percent == 92
    assert gpu1.processes[0].sm_util_percent == 88
    assert gpu0.temperature_c == 41 and gpu0.power_draw_mw is not None  # the rest is read


def test_processes_know_their_gpu_and_compute_instance(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    gpu0, gpu1 = source.snapshot().gpus
    placed = {p.pid: (p.gpu_instance_id, p.compute_instance_id) for p in gpu0.processes}
    assert placed == {5300101: (1, 0), 5300102: (1, 0), 5300201: (5, 0), 5300301: (13, 0)}
    assert [p.device_label for p in gpu0.processes] == ["0/1", "0/1", "0/5", "0/13"]
    (whole,) = gpu1.processes
    assert (whole.gpu_instance_id, whole.compute_instance_id, whole.device_label) == (
        None,
        None,
        "1",
    )
    mig = gpu0.mig_device_of(gpu0.processes[2])
    assert mig is not None and mig.profile == "2g.20gb"
    assert gpu1.mig_device_of(whole) is None


def test_snapshot_device_labels_for_the_process_table(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    snap = source.snapshot()

    def row(pid: int, gpus: tuple[int, ...]) -> ProcessRow:
        return ProcessRow(
            pid=pid, info=ProcInfo(pid=pid), states=(ProcState.ACTIVE,), gpu_indices=gpus
        )

    assert snap.device_labels(row(5300201, (0,))) == ("0/5",)
    assert snap.device_labels(row(5300401, (1,))) == ("1",)
    assert snap.device_labels(row(777, (0, 1))) == ("0", "1")  # a holder: listed nowhere


def test_old_process_struct_has_no_instance_ids(sim_source: SimSource) -> None:
    source, _ = sim_source(replace(mig_box(), process_api="v1"))
    gpu0 = source.snapshot().gpus[0]
    assert {p.pid for p in gpu0.processes} == {5300101, 5300102, 5300201, 5300301}
    assert all(p.gpu_instance_id is None for p in gpu0.processes)
    assert len(gpu0.mig_devices) == 4


def test_without_privileges_the_processes_come_from_each_mig_device(sim_source: SimSource) -> None:
    # NVML lists a MIG GPU's processes on its own handle only to a privileged caller.
    denied = {
        "nvmlDeviceGetComputeRunningProcesses_v3": 4,
        "nvmlDeviceGetGraphicsRunningProcesses_v3": 4,
    }
    source, _ = sim_source(mig_box(call_errors=denied))
    gpu0 = source.snapshot().gpus[0]
    placed = {p.pid: (p.gpu_instance_id, p.compute_instance_id) for p in gpu0.processes}
    assert placed == {5300101: (1, 0), 5300102: (1, 0), 5300201: (5, 0), 5300301: (13, 0)}
    assert gpu0.processes[0].used_memory_bytes == 28000 * MiB


@pytest.mark.parametrize(
    "call",
    [
        "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex",
        "nvmlDeviceGetGpuInstanceProfileInfoV",
    ],
)
@pytest.mark.parametrize("error", [3, 999, 4])  # not supported, unknown, no permission
def test_a_failing_mig_call_never_costs_the_gpu(
    sim_source: SimSource, call: str, error: int
) -> None:
    source, _ = sim_source(mig_box(call_errors={call: error}))
    gpu0 = source.snapshot().gpus[0]
    assert gpu0.state is GpuState.OK and gpu0.error is None
    assert gpu0.temperature_c == 41 and len(gpu0.processes) == 4
    if call == "nvmlDeviceGetGpuInstanceProfileInfoV":  # named from the attributes instead
        assert [m.profile for m in gpu0.mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    else:
        assert gpu0.mig_devices == ()


@pytest.mark.parametrize("error", [3, 999])
def test_a_failing_call_on_a_mig_device_leaves_out_only_that_reading(
    sim_source: SimSource, error: int
) -> None:
    source, _ = sim_source(
        mig_box(
            mig_call_errors={"nvmlDeviceGetMemoryInfo": error, "nvmlDeviceGetAttributes_v2": error}
        )
    )
    gpu0 = source.snapshot().gpus[0]
    assert gpu0.state is GpuState.OK and gpu0.memory_used_bytes is not None
    assert len(gpu0.mig_devices) == 4
    assert all(m.memory_used_bytes is None and m.profile is None for m in gpu0.mig_devices)
    assert [m.gpu_instance_id for m in gpu0.mig_devices] == [1, 5, 13, 14]


def test_a_lost_mig_gpu_is_lost(sim_source: SimSource, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source(mig_box(lost_after_s=5.0))
    assert len(source.snapshot().gpus[0].mig_devices) == 4
    sim_clock.set(6.0)
    gpu0, gpu1 = source.snapshot().gpus
    assert gpu0.state is GpuState.LOST and gpu0.mig_devices == ()
    assert gpu1.state is GpuState.OK


def test_profile_names_come_from_the_driver(sim_source: SimSource) -> None:
    # 1g.10gb and 1g.10gb+me have the same slices and memory: the media engines tell them apart.
    gpu = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "mig": True,
        "gpu_instances": [
            {"profile": "1g.10gb+me", "id": 9},
            {"profile": "1g.10gb", "id": 10},
            {"profile": "3g.40gb", "id": 2, "compute_instances": [{"id": 0, "slices": 2}, 1]},
        ],
    }
    source, _ = sim_source({"name": "m", "gpu": [gpu]})
    names = [m.profile for m in source.snapshot().gpus[0].mig_devices]
    assert names == ["1g.10gb+me", "1g.10gb", "2c.3g.40gb", "1c.3g.40gb"]


def test_without_profile_info_names_are_made_as_nvidia_names_devices(sim_source: SimSource) -> None:
    unsupported = frozenset(
        {"nvmlDeviceGetGpuInstanceProfileInfoV", "nvmlDeviceGetGpuInstanceProfileInfo"}
    )
    source, _ = sim_source(mig_box(unsupported=unsupported))
    names = [m.profile for m in source.snapshot().gpus[0].mig_devices]
    assert names == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]  # slices, ceil(GiB) gb


def test_what_does_not_change_is_asked_for_once(sim_source: SimSource) -> None:
    source, lib = sim_source("mig")
    source.snapshot()
    asked = lib.calls["nvmlDeviceGetGpuInstanceProfileInfoV"]
    attributes = lib.calls["nvmlDeviceGetAttributes_v2"]
    assert asked > 0 and attributes == 4
    # both GPUs, and the first MIG device: no MIG device gives utilisation, so no more asking
    assert lib.calls["nvmlDeviceGetUtilizationRates"] == 3
    source.snapshot()
    assert lib.calls["nvmlDeviceGetGpuInstanceProfileInfoV"] == asked
    assert lib.calls["nvmlDeviceGetAttributes_v2"] == attributes  # a known device's, kept
    assert lib.calls["nvmlDeviceGetUtilizationRates"] == 5
    assert lib.calls["nvmlDeviceGetMemoryInfo"] == 8  # each MIG device's, every time


def test_a_gpu_not_in_mig_mode_asks_no_mig_call(sim_source: SimSource) -> None:
    source, lib = sim_source("demo")
    source.snapshot()
    assert lib.calls["nvmlDeviceGetMaxMigDeviceCount"] == 0
    assert lib.calls["nvmlDeviceGetMigDeviceHandleByIndex"] == 0


def mig_uuids(source: Any) -> list[str]:
    return [m.uuid for m in source.snapshot().gpus[0].mig_devices]


def test_cuda_visible_devices_names_a_mig_device(sim_source: SimSource) -> None:
    probe, _ = sim_source("mig")
    uuids = mig_uuids(probe)
    source, _ = sim_source("mig", CUDA_VISIBLE_DEVICES=uuids[1])
    gpu0, gpu1 = source.snapshot().gpus
    assert [m.cuda_index for m in gpu0.mig_devices] == [None, 0, None, None]
    assert (gpu0.cuda_index, gpu1.cuda_index) == (0, None)


def test_cuda_visible_devices_abbreviated_and_old_form(sim_source: SimSource) -> None:
    probe, _ = sim_source("mig")
    snap = probe.snapshot()
    uuids = [m.uuid or "" for m in snap.gpus[0].mig_devices]
    parent = snap.gpus[0].uuid
    short, _ = sim_source("mig", CUDA_VISIBLE_DEVICES=uuids[2][:12].lower())
    assert [m.cuda_index for m in short.snapshot().gpus[0].mig_devices] == [None, None, 0, None]
    old, _ = sim_source("mig", CUDA_VISIBLE_DEVICES=f"1,MIG-{parent}/14/0")
    gpu0, gpu1 = old.snapshot().gpus
    assert [m.cuda_index for m in gpu0.mig_devices] == [None, None, None, 1]
    assert (gpu0.cuda_index, gpu1.cuda_index) == (1, 0)
    nowhere, _ = sim_source("mig", CUDA_VISIBLE_DEVICES=f"MIG-{parent}/2/0")
    gpu0, gpu1 = nowhere.snapshot().gpus
    assert (gpu0.cuda_index, gpu1.cuda_index) == (None, None)  # no GI 2: nothing visible


def test_snapshots_with_mig_devices_cross_the_wire(sim_source: SimSource) -> None:
    source, _ = sim_source("mig")
    snap = source.snapshot()
    again = pickle.loads(wire.dumps(("snapshot", snap)))[1]
    assert isinstance(again, Snapshot)
    assert again == snap
    assert isinstance(again.gpus[0].mig_devices[0], MigDevice)
    assert again.gpus[0].processes[0].gpu_instance_id == 1
