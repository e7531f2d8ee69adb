"""MIG in the simulated driver, through the real pynvml: handles, ids, UUIDs, memory, processes.

The ``mig`` scenario: GPU 0, an H100 80GB in MIG mode, split 3g.40gb (GI 1) + 2g.20gb (GI 5) +
1g.10gb (GI 13) + 1g.10gb (GI 14); GPU 1 a whole H100.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.errors import UsageError
from gputop.sim.scenario import Scenario

MiB = 1024**2
NOT_AVAILABLE = 0xFFFFFFFF


@pytest.fixture
def nvml() -> Iterator[sim.SimLibrary]:
    lib = sim.install("mig", sim.ManualClock(0.0))
    pynvml.nvmlInit()
    yield lib
    pynvml.nvmlShutdown()


def mig_handles(h: Any) -> list[Any]:
    out = []
    for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
        try:
            out.append(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, i))
        except pynvml.NVMLError_NotFound:
            continue
    return out


def error_of(call: Any, *args: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as caught:
        call(*args)
    return int(caught.value.value)


def test_mig_mode_and_device_count(nvml: sim.SimLibrary) -> None:
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    assert pynvml.nvmlDeviceGetMigMode(h0) == [1, 1]
    assert pynvml.nvmlDeviceGetMigMode(h1) == [0, 0]
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(h0) == 7
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(h1) == 0  # NVML: zero when MIG is off
    assert len(mig_handles(h0)) == 4
    assert error_of(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h0, 4) == 6  # NOT_FOUND
    assert error_of(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h0, 7) == 2  # INVALID_ARGUMENT
    assert error_of(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h1, 0) == 3  # NOT_SUPPORTED


def test_mig_device_ids_uuids_and_parent(nvml: sim.SimLibrary) -> None:
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    parent_uuid = pynvml.nvmlDeviceGetUUID(h0)
    handles = mig_handles(h0)
    ids = [
        (pynvml.nvmlDeviceGetGpuInstanceId(m), pynvml.nvmlDeviceGetComputeInstanceId(m))
        for m in handles
    ]
    assert ids == [(1, 0), (5, 0), (13, 0), (14, 0)]
    uuids = [pynvml.nvmlDeviceGetUUID(m) for m in handles]
    assert all(u.startswith("MIG-") and len(u) == 40 for u in uuids)
    assert len(set(uuids)) == 4 and parent_uuid not in uuids
    for m in handles:
        assert pynvml.nvmlDeviceIsMigDeviceHandle(m).value == 1
        parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m)
        assert pynvml.nvmlDeviceGetUUID(parent) == parent_uuid
    assert pynvml.nvmlDeviceIsMigDeviceHandle(h0).value == 0
    assert error_of(pynvml.nvmlDeviceGetGpuInstanceId, h0) == 3
    assert pynvml.nvmlDeviceGetName(handles[0]) == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    # the same handle again: the same device
    again = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h0, 2)
    assert pynvml.nvmlDeviceGetUUID(again) == uuids[2]


def test_attributes_and_profiles_name_the_instances(nvml: sim.SimLibrary) -> None:
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    attrs = [pynvml.nvmlDeviceGetAttributes(m) for m in mig_handles(h0)]
    assert [(a.gpuInstanceSliceCount, a.computeInstanceSliceCount) for a in attrs] == [
        (3, 3),
        (2, 2),
        (1, 1),
        (1, 1),
    ]
    assert [a.memorySizeMB for a in attrs] == [40448, 20096, 9984, 9984]
    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h0, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE)
    assert (info.name, info.id, info.sliceCount, info.memorySizeMB) == ("MIG 3g.40gb", 9, 3, 40448)
    v1 = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h0, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE, 1)
    assert (v1.id, v1.sliceCount, v1.instanceCount) == (19, 1, 7)
    assert error_of(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h0, 5) == 3  # no 8-slice here


def test_memory_per_mig_device_adds_up_to_the_gpu(nvml: sim.SimLibrary) -> None:
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    mems = [pynvml.nvmlDeviceGetMemoryInfo(m) for m in mig_handles(h0)]
    # at t=0 every wave is at its base: processes plus what each GI uses by itself
    assert [m.used // MiB for m in mems] == [28000 + 2048 + 38, 14100 + 25, 6200 + 12, 12]
    assert [m.total // MiB for m in mems] == [40448, 20096, 9984, 9984]
    assert all(m.free == m.total - m.used for m in mems)
    whole = pynvml.nvmlDeviceGetMemoryInfo(h0, version=pynvml.nvmlMemory_v2)
    assert whole.used == sum(m.used for m in mems)
    assert whole.reserved == 600 * MiB


def test_no_utilisation_in_mig_mode(nvml: sim.SimLibrary) -> None:
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    for call in (
        pynvml.nvmlDeviceGetUtilizationRates,
        pynvml.nvmlDeviceGetEncoderUtilization,
        pynvml.nvmlDeviceGetDecoderUtilization,
    ):
        assert error_of(call, h0) == 3
        assert error_of(call, mig_handles(h0)[0]) == 3
        call(h1)  # the whole GPU answers
    assert error_of(pynvml.nvmlDeviceGetProcessUtilization, h0, 0) == 3
    assert pynvml.nvmlDeviceGetProcessUtilization(h1, 0)[0].pid == 5300401
    # and most calls are not answered for a MIG device at all
    assert error_of(pynvml.nvmlDeviceGetTemperature, mig_handles(h0)[0], 0) == 3


def test_processes_carry_their_instance_ids(nvml: sim.SimLibrary) -> None:
    h0, h1 = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    on_gpu = {
        p.pid: (p.gpuInstanceId, p.computeInstanceId)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h0)
    }
    assert on_gpu == {5300101: (1, 0), 5300102: (1, 0), 5300201: (5, 0), 5300301: (13, 0)}
    per_device = [
        sorted(p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(m))
        for m in mig_handles(h0)
    ]
    assert per_device == [[5300101, 5300102], [5300201], [5300301], []]
    (whole,) = pynvml.nvmlDeviceGetComputeRunningProcesses(h1)
    assert (whole.gpuInstanceId, whole.computeInstanceId) == (NOT_AVAILABLE, NOT_AVAILABLE)


def test_a_lost_gpu_loses_its_mig_devices(nvml: sim.SimLibrary) -> None:
    h0 = pynvml.nvmlDeviceGetHandleByIndex(0)
    handle = mig_handles(h0)[0]
    nvml.scenario = Scenario.from_dict(
        {"name": "m", "gpu": [{**_mig_gpu(), "lost_after_s": 0}, {"name": "B"}]}
    )
    assert error_of(pynvml.nvmlDeviceGetMemoryInfo, handle) == 15  # GPU_IS_LOST


def _mig_gpu(**extra: Any) -> dict[str, Any]:
    return {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "mig": True,
        "gpu_instances": [{"profile": "3g.40gb", "id": 1}],
        **extra,
    }


def test_a_smaller_compute_instance_is_a_device_of_its_own() -> None:
    gpu = _mig_gpu(
        gpu_instances=[{"profile": "3g.40gb", "id": 2, "compute_instances": [0, 1]}],
        processes=[{"pid": 9, "gpu_instance": 2, "compute_instance": 1}],
    )
    scenario = Scenario.from_dict({"name": "m", "gpu": [gpu]})
    (spec,) = scenario.gpus
    assert [(m.gpu_instance_id, m.compute_instance_id, m.slices) for m in spec.mig_devices] == [
        (2, 0, 1),
        (2, 1, 1),
    ]
    assert [m.name for m in spec.mig_devices] == ["1c.3g.40gb", "1c.3g.40gb"]
    assert spec.processes[0].compute_instance == 1


def test_a_process_takes_its_gpu_instances_first_compute_instance() -> None:
    scenario = Scenario.from_dict(
        {"name": "m", "gpu": [_mig_gpu(processes=[{"pid": 9, "gpu_instance": 1}])]}
    )
    assert scenario.gpus[0].processes[0].compute_instance == 0


def test_pending_mode_may_differ() -> None:
    sim.install(Scenario.from_dict({"name": "m", "gpu": [_mig_gpu(mig_pending=False)]}))
    pynvml.nvmlInit()
    try:
        assert pynvml.nvmlDeviceGetMigMode(pynvml.nvmlDeviceGetHandleByIndex(0)) == [1, 0]
    finally:
        pynvml.nvmlShutdown()


@pytest.mark.parametrize(
    ("gpu", "message"),
    [
        (_mig_gpu(gpu_instances=[{"profile": "5g.50gb"}]), "unknown profile '5g.50gb'"),
        (_mig_gpu(mig=False), "gpu_instances need mig = true"),
        (
            _mig_gpu(gpu_instances=[{"profile": "4g.40gb"}, {"profile": "4g.40gb", "id": 2}]),
            "2 gpu instances of 4g.40gb",
        ),
        (
            _mig_gpu(
                gpu_instances=[
                    {"profile": "4g.40gb"},
                    {"profile": "2g.20gb", "id": 2},
                    {"profile": "2g.20gb", "id": 3},
                ]
            ),
            "take 8 slices of 7",
        ),
        (_mig_gpu(gpu_instances=[{"profile": "1g.10gb", "id": 3}] * 2), "ids repeat"),
        (
            _mig_gpu(gpu_instances=[{"profile": "1g.10gb", "compute_instances": [0, 1]}]),
            "take 2 slices of 1",
        ),
        (_mig_gpu(processes=[{"pid": 9}]), "needs its gpu_instance"),
        (_mig_gpu(processes=[{"pid": 9, "gpu_instance": 3}]), "no gpu instance 3"),
        (
            _mig_gpu(processes=[{"pid": 9, "gpu_instance": 1, "compute_instance": 4}]),
            "has no compute instance 4",
        ),
        ({"name": "G", "processes": [{"pid": 9, "gpu_instance": 1}]}, "without gpu_instances"),
        (_mig_gpu(gpu_instances=[{"profile": "1g.10gb", "size": 1}]), "unknown keys ['size']"),
    ],
)
def test_bad_mig_scenarios_say_why(gpu: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match="gpu 0") as caught:
        Scenario.from_dict({"name": "m", "gpu": [gpu]})
    assert message in str(caught.value)


def test_a_40gb_board_has_its_own_profiles() -> None:
    gpu = _mig_gpu(memory_total_mib=40960, gpu_instances=[{"profile": "3g.20gb"}])
    (mig,) = Scenario.from_dict({"name": "m", "gpu": [gpu]}).gpus[0].mig_devices
    assert (mig.name, mig.profile.memory_mib) == ("3g.20gb", 19968)
    with pytest.raises(UsageError, match=r"unknown profile .3g\.40gb"):
        Scenario.from_dict({"name": "m", "gpu": [_mig_gpu(memory_total_mib=40960)]})


@pytest.mark.parametrize("name", ["demo", "dgx", "faults", "flaky"])
def test_the_other_shipped_scenarios_have_no_mig_devices(name: str) -> None:
    assert all(not g.mig_devices for g in sim.load_scenario(name).gpus)
    assert all(p.gpu_instance is None for g in sim.load_scenario(name).gpus for p in g.processes)


def test_mig_is_shipped() -> None:
    assert "mig" in sim.SHIPPED
    scenario = sim.load_scenario("mig")
    assert [len(g.mig_devices) for g in scenario.gpus] == [4, 0]
    assert [m.name for m in scenario.gpus[0].mig_devices] == [
        "3g.40gb",
        "2g.20gb",
        "1g.10gb",
        "1g.10gb",
    ]
