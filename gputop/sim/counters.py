"""The simulated driver's counters, events and GPM metrics (what the exporter reads beyond a tick).

A mixin of :class:`gputop.sim.library.SimLibrary`:

* energy since the driver loaded (nvmlDeviceGetTotalEnergyConsumption, mJ): ``power_w``
  integrated over scenario time, so it grows faster while the GPU draws more;
* PCIe replays (nvmlDeviceGetPcieReplayCounter): the ``pcie_replay_count`` reading;
* NVLink (nvmlDeviceGetNvLinkState and the NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX field values
  per link, KiB): ``nvlink_links`` active links, each moving ``nvlink_tx_kibps`` /
  ``nvlink_rx_kibps``, integrated over time;
* Xid events (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2,
  nvmlEventSetFree): a GPU's ``xids`` (``[{at_s = 40, xid = 13}]``) are delivered once to each
  event set registered for critical Xid errors on it before they happen;
* GPM (nvmlGpmQueryDeviceSupport, nvmlGpmSampleAlloc/Get/Free, nvmlGpmMetricsGet): on GPUs of
  compute capability 9.0 and later, the graphics, tensor and DRAM utilisation between two
  samples are the mean of ``gpm_graphics_util``, ``gpm_tensor_util`` and ``gpm_dram_bw_util``
  over that time; older GPUs answer NOT_SUPPORTED.

Counters integrate a reading in whole-second steps (the value at each whole second holds until
the next), so they are deterministic for a seed and a clock and never go down.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputop.sim.answers import (
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_SUPPORTED,
    NOT_AVAILABLE_U32,
    SUCCESS,
    _put,
    _set,
    _target,
    _Unsupported,
    _write_address,
)
from gputop.sim.scenario import Scenario, SimGpu

if TYPE_CHECKING:
    from gputop.sim.clock import Clock

ERROR_TIMEOUT = 10
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError: the only event type this driver has
FIELD_NVLINK_DATA_TX = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, KiB, per link (scopeId)
FIELD_NVLINK_DATA_RX = 139
NVLINK_FIELDS = {FIELD_NVLINK_DATA_TX: "nvlink_tx_kibps", FIELD_NVLINK_DATA_RX: "nvlink_rx_kibps"}
# NVML_GPM_METRIC_* id -> the reading it is the mean of
GPM_METRICS = {1: "gpm_graphics_util", 5: "gpm_tensor_util", 10: "gpm_dram_bw_util"}
GPM_MIN_CAPABILITY = (9, 0)  # Hopper


@dataclass(slots=True)
class _EventSet:
    """One nvmlEventSet_t: the GPUs registered on it (since when) and what it delivered."""

    buffer: Any
    since: dict[int, float] = field(default_factory=dict)  # GPU position -> registered at
    delivered: set[tuple[int, int]] = field(default_factory=set)  # (GPU position, xid's place)


@dataclass(slots=True)
class _GpmSample:
    """One nvmlGpmSample_t: the GPU and the time it was taken, and each metric's integral."""

    buffer: Any
    gpu: int | None = None
    at: float = 0.0
    integrals: dict[int, float] = field(default_factory=dict)


def _address(pointer: Any) -> int:
    """The address an opaque handle (a ctypes pointer) holds."""
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


class CounterCalls:
    """Energy, PCIe replays, NVLink counters, Xid events and GPM metrics."""

    if TYPE_CHECKING:  # SimLibrary's, which this is mixed into
        clock: Clock
        _handle_bufs: list[Any]
        _scenario: Scenario
        _sums: dict[tuple[int, str], tuple[int, float]]
        _nvlink_memo: dict[tuple[int, str], tuple[float, int, float]]

        def _seed(self, gpu: SimGpu) -> int: ...

        def _position(self, gpu: SimGpu) -> int: ...

        def _int(self, gpu: SimGpu, key: str) -> int: ...

    def _init_counters(self) -> None:
        self._counter_lock = threading.Lock()
        self._event_sets: dict[int, _EventSet] = {}
        self._gpm_samples: dict[int, _GpmSample] = {}

    # -- integrals ------------------------------------------------------------------------
    def integral(self, gpu: SimGpu, key: str, t: float) -> float:
        """The reading ``key`` summed over scenario time [0, t] (its value at each whole second
        holding until the next; never negative), e.g. watts -> joules."""
        wave = gpu.readings.get(key)
        if wave is None:
            raise _Unsupported
        t = max(0.0, t)
        whole, seed = int(t), self._seed(gpu)
        with self._counter_lock:
            done, total = self._sums.get((id(gpu), key), (0, 0.0))
            if whole < done:  # a clock set back (tests): start over
                done, total = 0, 0.0
            while done < whole:
                total += max(0.0, wave.at(done, seed))
                done += 1
            self._sums[(id(gpu), key)] = (done, total)
        return total + (t - whole) * max(0.0, wave.at(whole, seed))

    def _nvmlDeviceGetTotalEnergyConsumption(self, gpu: SimGpu, out: Any) -> int:
        _put(out, round(self.integral(gpu, "power_w", self.clock.now()) * 1000))  # J -> mJ
        return SUCCESS

    def _nvmlDeviceGetPcieReplayCounter(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_replay_count"))
        return SUCCESS

    # -- NVLink ---------------------------------------------------------------------------
    def _links(self, gpu: SimGpu) -> int:
        return self._int(gpu, "nvlink_links") if gpu.readings.get("nvlink_links") else 0

    def _nvmlDeviceGetNvLinkState(self, gpu: SimGpu, link: Any, out: Any) -> int:
        links = self._links(gpu)
        if not links:
            raise _Unsupported  # a board without NVLink
        index = link if isinstance(link, int) else _target(link).value  # pynvml passes an int
        if not 0 <= index < links:
            return ERROR_INVALID_ARGUMENT
        _put(out, 1)  # NVML_FEATURE_ENABLED: the link is active
        return SUCCESS

    def nvlink_field(self, gpu: SimGpu, field_id: int, link: int) -> int | None:
        """A per-link NVLink throughput counter (KiB since the start), or None: not one."""
        key = NVLINK_FIELDS.get(field_id)
        if key is None:
            return None
        now = self.clock.now()
        # A GPU's links are asked for together (one field-value call): the link count and the
        # sum are worked out once for the call, not once a link.
        at, links, total = self._nvlink_memo.get((id(gpu), key), (-1.0, 0, 0.0))
        if not 0 <= now - at < 0.05:
            links, total = self._links(gpu), self.integral(gpu, key, now)
            self._nvlink_memo[(id(gpu), key)] = (now, links, total)
        if not 0 <= link < links:
            raise _Unsupported
        # Links of one GPU differ a little, as on real boards.
        return round(total * (1 + 0.01 * link))

    # -- Xid events -----------------------------------------------------------------------
    def _nvmlEventSetCreate(self, out: Any) -> int:
        buffer = ctypes.create_string_buffer(8)
        _write_address(out, buffer)
        self._event_sets[ctypes.addressof(buffer)] = _EventSet(buffer=buffer)
        return SUCCESS

    def _nvmlDeviceRegisterEvents(self, gpu: SimGpu, types: Any, event_set: Any) -> int:
        found = self._event_sets.get(_address(event_set))
        if found is None:
            return ERROR_INVALID_ARGUMENT
        if _target(types).value & ~XID_CRITICAL:
            raise _Unsupported
        found.since.setdefault(self._position(gpu), self.clock.now())
        return SUCCESS

    def _nvmlEventSetWait_v2(self, event_set: Any, data: Any, timeout_ms: Any) -> int:
        found = self._event_sets.get(_address(event_set))
        if found is None:
            return ERROR_INVALID_ARGUMENT
        now = self.clock.now()
        due = [
            (at_s, position, place, xid)
            for position, since in found.since.items()
            for place, (at_s, xid) in enumerate(self._scenario.gpus[position].xids)
            if since <= at_s <= now and (position, place) not in found.delivered
        ]
        if not due:
            return ERROR_TIMEOUT  # nothing within the timeout (a simulated one never waits)
        _, position, place, xid = min(due)
        found.delivered.add((position, place))
        event = _target(data)
        device_type = dict(type(event)._fields_)["device"]
        address = ctypes.addressof(self._handle_bufs[position])
        _set(event, "device", ctypes.cast(address, device_type))
        _set(event, "eventType", XID_CRITICAL)
        _set(event, "eventData", xid)
        _set(event, "gpuInstanceId", NOT_AVAILABLE_U32)
        _set(event, "computeInstanceId", NOT_AVAILABLE_U32)
        return SUCCESS

    def _nvmlEventSetFree(self, event_set: Any) -> int:
        return (
            SUCCESS if self._event_sets.pop(_address(event_set), None) else ERROR_INVALID_ARGUMENT
        )

    # -- GPM ------------------------------------------------------------------------------
    @staticmethod
    def _gpm_supported(gpu: SimGpu) -> bool:
        return gpu.compute_capability is not None and gpu.compute_capability >= GPM_MIN_CAPABILITY

    def _nvmlGpmQueryDeviceSupport(self, gpu: SimGpu, out: Any) -> int:
        _set(_target(out), "isSupportedDevice", int(self._gpm_supported(gpu)))
        return SUCCESS

    def _nvmlGpmSampleAlloc(self, out: Any) -> int:
        buffer = ctypes.create_string_buffer(8)
        _write_address(out, buffer)
        self._gpm_samples[ctypes.addressof(buffer)] = _GpmSample(buffer=buffer)
        return SUCCESS

    def _nvmlGpmSampleFree(self, sample: Any) -> int:
        gone = self._gpm_samples.pop(_address(sample), None)
        return SUCCESS if gone else ERROR_INVALID_ARGUMENT

    def _nvmlGpmSampleGet(self, gpu: SimGpu, sample: Any) -> int:
        if not self._gpm_supported(gpu):
            raise _Unsupported
        found = self._gpm_samples.get(_address(sample))
        if found is None:
            return ERROR_INVALID_ARGUMENT
        found.gpu, found.at = self._position(gpu), self.clock.now()
        found.integrals = {}
        for metric, key in GPM_METRICS.items():
            try:
                found.integrals[metric] = self.integral(gpu, key, found.at)
            except _Unsupported:
                continue
        return SUCCESS

    def _nvmlGpmMetricsGet(self, out: Any) -> int:
        request = _target(out)
        first = self._gpm_samples.get(_address(request.sample1))
        second = self._gpm_samples.get(_address(request.sample2))
        if first is None or second is None or first.gpu is None or first.gpu != second.gpu:
            return ERROR_INVALID_ARGUMENT
        span = second.at - first.at
        gpu = self._scenario.gpus[second.gpu]
        for i in range(min(int(request.numMetrics), len(request.metrics))):
            metric = request.metrics[i]
            wanted = int(metric.metricId)
            if wanted not in first.integrals or wanted not in second.integrals:
                _set(metric, "nvmlReturn", ERROR_NOT_SUPPORTED)
                continue
            if span > 0:
                value = (second.integrals[wanted] - first.integrals[wanted]) / span
            else:  # two samples at one instant: the reading then
                wave = gpu.readings.get(GPM_METRICS[wanted])
                value = 0.0 if wave is None else max(0.0, wave.at(second.at, self._seed(gpu)))
            _set(metric, "value", min(100.0, value))
            _set(metric, "nvmlReturn", SUCCESS)
        return SUCCESS
