"""The simulated driver's counters, Xid events and GPM metrics, through the real pynvml.

Energy integrates power over scenario time, NVLink counters integrate each link's rate, Xid
events reach an event set once each, and GPM answers on compute capability 9.0 and later only.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.errors import UsageError
from gputop.sim.scenario import Scenario, load_scenario

BOX: dict[str, Any] = {
    "gpu": [
        {  # an H100 drawing a steady 100 W, with NVLink and two Xids
            "name": "NVIDIA H100 80GB HBM3",
            "compute_capability": [9, 0],
            "power_w": 100,
            "pcie_replay_count": 7,
            "nvlink_links": 4,
            "nvlink_tx_kibps": 1000,
            "nvlink_rx_kibps": 500,
            "util_gpu": 40,
            "gpm_tensor_util": 25,
            "gpm_dram_bw_util": 60,
            "xids": [{"at_s": 20, "xid": 31}, {"at_s": 5, "xid": 13}],
        },
        {  # an A100 drawing 300 W: no NVLink here, no GPM
            "name": "NVIDIA A100-SXM4-80GB",
            "compute_capability": [8, 0],
            "power_w": 300,
            "xids": [{"at_s": 8, "xid": 79}],
        },
    ]
}


@pytest.fixture
def clock() -> sim.ManualClock:
    return sim.ManualClock(0.0)


@pytest.fixture
def nvml(clock: sim.ManualClock) -> Iterator[Callable[..., sim.SimLibrary]]:
    started: list[bool] = []

    def start(scenario: dict[str, Any] | str = BOX) -> sim.SimLibrary:
        box = scenario if isinstance(scenario, str) else Scenario.from_dict(scenario)
        lib = sim.install(box, clock)
        pynvml.nvmlInit()
        started.append(True)
        return lib

    yield start
    if started:
        pynvml.nvmlShutdown()


def error_of(call: Any, *args: Any) -> int:
    with pytest.raises(pynvml.NVMLError) as caught:
        call(*args)
    return int(caught.value.value)


def handles() -> list[Any]:
    return [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]


def address(pointer: Any) -> int:
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


def test_energy_grows_with_the_power_drawn(nvml: Any, clock: sim.ManualClock) -> None:
    nvml()
    h100, a100 = handles()
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h100) == 0
    clock.set(10.0)
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h100) == 1_000_000  # 100 W * 10 s, in mJ
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(a100) == 3_000_000
    clock.set(12.5)  # between whole seconds too
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h100) == 1_250_000


def test_energy_follows_a_changing_draw_and_never_goes_down(
    nvml: Any, clock: sim.ManualClock
) -> None:
    nvml({"gpu": [{"power_w": {"base": 100, "step_at": 5, "step_to": 400}}]})
    (h,) = handles()
    readings = []
    for t in range(12):
        clock.set(float(t))
        readings.append(pynvml.nvmlDeviceGetTotalEnergyConsumption(h))
    assert readings == sorted(readings)
    assert readings[5] == 500_000 and readings[11] == 500_000 + 6 * 400_000
    clock.set(3.0)  # a clock set back (a test's) starts the sum over, as it should
    assert pynvml.nvmlDeviceGetTotalEnergyConsumption(h) == 300_000


def test_energy_without_a_power_sensor_is_not_supported(nvml: Any) -> None:
    nvml({"gpu": [{"power_w": "unsupported"}]})
    (h,) = handles()
    assert (
        error_of(pynvml.nvmlDeviceGetTotalEnergyConsumption, h) == pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def test_pcie_replays_and_remapped_rows(nvml: Any) -> None:
    nvml({"gpu": [{"pcie_replay_count": 7, "remapped_rows_correctable": 2}, {}]})
    h0, h1 = handles()
    assert pynvml.nvmlDeviceGetPcieReplayCounter(h0) == 7
    assert pynvml.nvmlDeviceGetPcieReplayCounter(h1) == 0  # the default
    assert pynvml.nvmlDeviceGetRemappedRows(h0) == (2, 0, 0, 0)


def test_nvlink_links_and_their_counters(nvml: Any, clock: sim.ManualClock) -> None:
    nvml()
    h100, a100 = handles()
    assert [pynvml.nvmlDeviceGetNvLinkState(h100, link) for link in range(4)] == [1, 1, 1, 1]
    assert error_of(pynvml.nvmlDeviceGetNvLinkState, h100, 4) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert error_of(pynvml.nvmlDeviceGetNvLinkState, a100, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    clock.set(10.0)
    fields = [(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)]
    fields += [(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 3)]
    fields += [(pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 9)]  # no link 9
    tx0, rx3, none = pynvml.nvmlDeviceGetFieldValues(h100, fields)
    assert (tx0.nvmlReturn, tx0.value.ullVal) == (pynvml.NVML_SUCCESS, 10_000)  # 1000 KiB/s, 10 s
    assert (rx3.nvmlReturn, rx3.value.ullVal) == (pynvml.NVML_SUCCESS, 5_150)  # link 3: +3 %
    assert none.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    (on_a100,) = pynvml.nvmlDeviceGetFieldValues(a100, fields[:1])
    assert on_a100.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_xid_events_arrive_once_each_in_time_order(nvml: Any, clock: sim.ManualClock) -> None:
    nvml()
    h100, _ = handles()
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(h100, pynvml.nvmlEventTypeXidCriticalError, events)
    assert error_of(pynvml.nvmlEventSetWait_v2, events, 0) == pynvml.NVML_ERROR_TIMEOUT
    clock.set(30.0)
    first = pynvml.nvmlEventSetWait_v2(events, 0)
    second = pynvml.nvmlEventSetWait_v2(events, 0)
    assert (first.eventType, first.eventData) == (pynvml.nvmlEventTypeXidCriticalError, 13)
    assert second.eventData == 31
    assert address(first.device) == address(h100)  # the GPU's own handle
    # The A100's Xid 79 is not delivered: that GPU was never registered on this set.
    assert error_of(pynvml.nvmlEventSetWait_v2, events, 0) == pynvml.NVML_ERROR_TIMEOUT
    pynvml.nvmlEventSetFree(events)
    assert error_of(pynvml.nvmlEventSetWait_v2, events, 0) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_xids_before_registration_are_not_delivered(nvml: Any, clock: sim.ManualClock) -> None:
    nvml()
    _, a100 = handles()
    clock.set(10.0)  # after the A100's Xid 79 at 8 s
    events = pynvml.nvmlEventSetCreate()
    pynvml.nvmlDeviceRegisterEvents(a100, pynvml.nvmlEventTypeXidCriticalError, events)
    assert error_of(pynvml.nvmlEventSetWait_v2, events, 0) == pynvml.NVML_ERROR_TIMEOUT


def test_only_xid_events_can_be_registered(nvml: Any) -> None:
    nvml()
    h100, _ = handles()
    events = pynvml.nvmlEventSetCreate()
    kinds = pynvml.nvmlEventTypeXidCriticalError | pynvml.nvmlEventTypeSingleBitEccError
    assert error_of(pynvml.nvmlDeviceRegisterEvents, h100, kinds, events) == (
        pynvml.NVML_ERROR_NOT_SUPPORTED
    )


def gpm_metrics(first: Any, second: Any, *ids: int) -> list[Any]:
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
    request.numMetrics = len(ids)
    request.sample1, request.sample2 = first, second
    for i, metric in enumerate(ids):
        request.metrics[i].metricId = metric
    pynvml.nvmlGpmMetricsGet(request)
    return [request.metrics[i] for i in range(len(ids))]


def test_gpm_on_hopper_is_the_mean_between_two_samples(nvml: Any, clock: sim.ManualClock) -> None:
    nvml(
        {
            "gpu": [
                {
                    "compute_capability": [9, 0],
                    "util_gpu": {"base": 20, "step_at": 10, "step_to": 80},
                    "gpm_tensor_util": 25,
                    "util_memory": 60,
                }
            ]
        }
    )
    (h,) = handles()
    assert pynvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice == 1
    first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    clock.set(5.0)
    pynvml.nvmlGpmSampleGet(h, first)
    clock.set(15.0)
    pynvml.nvmlGpmSampleGet(h, second)
    graphics, tensor, dram, other = gpm_metrics(
        first,
        second,
        pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL,
        pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
        pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL,
        pynvml.NVML_GPM_METRIC_FP64_UTIL,
    )
    assert graphics.nvmlReturn == pynvml.NVML_SUCCESS
    assert graphics.value == pytest.approx(50.0)  # 5 s at 20 %, 5 s at 80 %
    assert (tensor.value, dram.value) == (pytest.approx(25.0), pytest.approx(60.0))
    assert other.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED
    pynvml.nvmlGpmSampleFree(first)
    pynvml.nvmlGpmSampleFree(second)


def test_gpm_samples_of_two_gpus_do_not_mix(nvml: Any) -> None:
    nvml({"gpu": [{"compute_capability": [9, 0]}, {"compute_capability": [9, 0]}]})
    h0, h1 = handles()
    first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    pynvml.nvmlGpmSampleGet(h0, first)
    pynvml.nvmlGpmSampleGet(h1, second)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        gpm_metrics(first, second, pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL)


def test_gpm_before_hopper_is_not_supported(nvml: Any) -> None:
    nvml()
    _, a100 = handles()
    assert pynvml.nvmlGpmQueryDeviceSupport(a100).isSupportedDevice == 0
    sample = pynvml.nvmlGpmSampleAlloc()
    assert error_of(pynvml.nvmlGpmSampleGet, a100, sample) == pynvml.NVML_ERROR_NOT_SUPPORTED


@pytest.mark.parametrize("name", ["dgx", "mig"])
def test_shipped_hopper_boxes_answer_gpm(nvml: Any, clock: sim.ManualClock, name: str) -> None:
    nvml(name)
    first, second = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
    for h in handles():
        clock.set(1.0)
        pynvml.nvmlGpmSampleGet(h, first)
        clock.set(6.0)
        pynvml.nvmlGpmSampleGet(h, second)
        (tensor,) = gpm_metrics(first, second, pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL)
        assert tensor.nvmlReturn == pynvml.NVML_SUCCESS and 0 < tensor.value <= 100


def test_older_scenarios_keep_working_with_the_defaults() -> None:
    demo = load_scenario("demo")
    assert all(g.xids == () for g in demo.gpus)
    readings = demo.gpus[0].readings
    nvlink = readings["nvlink_links"]
    assert nvlink is not None and nvlink.base == 0
    assert readings["gpm_graphics_util"] == readings["util_gpu"]  # derived by default


@pytest.mark.parametrize(
    "xids", [[{"at_s": 3}], [{"at_s": 3, "xid": 13, "gpu": 0}], ["13"]], ids=str
)
def test_bad_xids_are_refused(xids: list[Any]) -> None:
    with pytest.raises(UsageError, match="xids"):
        Scenario.from_dict({"gpu": [{"xids": xids}]})
