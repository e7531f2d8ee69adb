"""gputop.Device and MigDevice on the simulator: by NVML index, CUDA index, UUID; a lost GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import gputop
from gputop import sim
from gputop.device import Device, MigDevice
from gputop.engine.model import GpuState
from tests.conftest import shipped

MiB = 1024**2
Sim = Callable[..., tuple[Any, sim.SimLibrary]]


def test_device_by_nvml_index_reads_typed_values_with_units(sim_source: Sim) -> None:
    source, _ = sim_source(shipped("demo"))
    gpu = Device(2, source=source)
    sample = gpu.sample()
    assert (gpu.index, gpu.name) == (2, "NVIDIA L40S")
    assert gpu.uuid == sample.uuid and gpu.uuid is not None and gpu.uuid.startswith("GPU-")
    assert gpu.memory_total_bytes() == 46068 * MiB
    assert gpu.memory_used_bytes() == sample.memory_used_bytes
    assert gpu.memory_free_bytes() == sample.memory_free_bytes
    assert gpu.fan_speed_percent() == 41
    assert sample.power_draw_mw is not None
    assert gpu.power_draw_w() == pytest.approx(sample.power_draw_mw / 1000)
    assert gpu.state is GpuState.OK
    assert 5051377 in {p.pid for p in gpu.processes()}


def test_all_devices_in_nvml_order(sim_source: Sim) -> None:
    source, _ = sim_source(shipped("dgx"))
    devices = Device.all(source=source)
    assert [d.index for d in devices] == list(range(8))
    assert len({d.uuid for d in devices}) == 8


def test_an_unknown_index_or_uuid_is_one_clear_line(sim_source: Sim) -> None:
    source, _ = sim_source(shipped("demo"))
    with pytest.raises(gputop.DeviceNotFound) as index_error:
        Device(9, source=source)
    assert str(index_error.value) == "no GPU with NVML index 9: this machine has 4 (0-3)"
    with pytest.raises(gputop.DeviceNotFound) as uuid_error:
        Device.from_uuid("GPU-nope", source=source)
    assert "\n" not in str(uuid_error.value) and "'GPU-nope'" in str(uuid_error.value)
    assert isinstance(uuid_error.value, gputop.GputopError | LookupError)


def test_a_lost_gpu_is_a_state_with_no_readings_never_an_exception(
    sim_source: Sim, sim_clock: sim.ManualClock
) -> None:
    source, _ = sim_source(shipped("faults"))
    lost = Device(1, source=source)  # found while it was there
    sim_clock.set(6.0)  # GPU 1 falls off the bus at 5 s
    assert lost.state is GpuState.LOST
    assert lost.memory_used_bytes() is None and lost.temperature_c() is None
    assert lost.power_draw_w() is None and lost.utilization_gpu_percent() is None
    assert lost.processes() == []
    assert lost.name == "Tesla V100-SXM2-32GB"  # its identity stays
    assert Device(0, source=source).temperature_c() == 71  # the others read on


def test_mig_devices_of_a_gpu_and_by_uuid(sim_source: Sim) -> None:
    source, _ = sim_source(shipped("mig"))
    gpu = Device(0, source=source)
    migs = gpu.mig_devices()
    assert [m.profile for m in migs] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert Device(1, source=source).mig_devices() == []
    big = migs[0]
    assert big.uuid is not None
    assert Device.from_uuid(big.uuid.lower(), source=source) == big
    assert MigDevice(big.uuid, source=source) == big
    assert big.parent() == gpu
    assert big.utilization_gpu_percent() is None  # NVML gives MIG devices none
    total, used, free = big.memory_total_bytes(), big.memory_used_bytes(), big.memory_free_bytes()
    assert total is not None and used is not None and free is not None
    assert used + free <= total
    assert {p.driver_name for p in big.processes()} == {"python", "jupyter-lab"}
    assert migs[3].processes() == []
    with pytest.raises(gputop.DeviceNotFound, match="a whole GPU"):
        MigDevice(str(gpu.uuid), source=source)


def test_mig_device_of_a_lost_gpu_has_no_readings(
    sim_source: Sim, sim_clock: sim.ManualClock
) -> None:
    scenario = {
        "name": "lost mig",
        "gpu": [{"mig": True, "lost_after_s": 5, "gpu_instances": [{"profile": "7g.80gb"}]}],
    }
    source, _ = sim_source(scenario)
    (mig,) = Device(0, source=source).mig_devices()
    assert mig.memory_total_bytes() is not None
    sim_clock.set(6.0)
    assert mig.state is GpuState.LOST
    assert mig.memory_used_bytes() is None and mig.sample() is None


@pytest.mark.parametrize(
    ("visible", "nvml_order"),
    [
        (None, [0, 1, 2, 3, 4, 5, 6, 7]),
        ("2,0", [2, 0]),
        ("3,1,-1,0", [3, 1]),  # the first invalid entry ends the list, as in CUDA
        ("1,1", []),  # a device named twice: CUDA sees none
        ("", []),
    ],
)
def test_cuda_all_follows_cuda_visible_devices(
    sim_source: Sim, visible: str | None, nvml_order: list[int]
) -> None:
    source, _ = sim_source(shipped("dgx"))
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    devices = Device.cuda_all(source=source, environ=env)
    assert [d.index for d in devices if isinstance(d, Device)] == nvml_order
    assert len(devices) == len(nvml_order)


def test_cuda_index_by_gpu_uuid_agrees_with_the_driver_layer(sim_source: Sim) -> None:
    plain, _ = sim_source(shipped("dgx"))
    uuid5 = Device(5, source=plain).uuid
    visible = f"{uuid5},3"
    source, _ = sim_source(shipped("dgx"), CUDA_VISIBLE_DEVICES=visible)
    env = {"CUDA_VISIBLE_DEVICES": visible}
    first = Device.from_cuda_index(0, source=source, environ=env)
    second = Device.from_cuda_index(1, source=source, environ=env)
    assert isinstance(first, Device) and isinstance(second, Device)
    assert (first.index, second.index) == (5, 3)
    # GpuSample.cuda_index (what the driver layer works out) says the same
    assert first.sample().cuda_index == 0 and second.sample().cuda_index == 1
    with pytest.raises(gputop.DeviceNotFound) as error:
        Device.from_cuda_index(2, source=source, environ=env)
    assert str(error.value) == (
        f"no CUDA device 2: CUDA_VISIBLE_DEVICES='{visible}' shows CUDA 2 device(s)"
    )


def test_cuda_index_of_a_mig_uuid_is_that_mig_device(sim_source: Sim) -> None:
    source, _ = sim_source(shipped("mig"))
    mig = Device(0, source=source).mig_devices()[1]
    env = {"CUDA_VISIBLE_DEVICES": str(mig.uuid)}
    assert Device.cuda_all(source=source, environ=env) == [mig]
    assert Device.from_cuda_index(0, source=source, environ=env) == mig


def test_cuda_index_reads_this_process_environment_by_default(
    sim_source: Sim, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = sim_source(shipped("dgx"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "6,4")
    picked = Device.from_cuda_index(1, source=source)
    assert isinstance(picked, Device) and picked.index == 4


def test_devices_through_the_shared_connection_follow_use_demo() -> None:
    gputop.use_demo("dgx")
    assert len(Device.all()) == 8
    gputop.use_demo("mig")  # after a read: the next read is on the new box
    assert len(Device.all()) == 2 and len(Device(0).mig_devices()) == 4
