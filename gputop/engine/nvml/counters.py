"""The exporter's counters (GpuCounters): energy, PCIe replays, remapped rows, NVLink data,
GPM utilisation and Xid events, a few cheap driver calls a GPU a tick (the Xid events and the
remapped rows from gputop.engine.nvml.health, which reads them every tick for the verdict).

A call that fails costs only its reading (never the GPU); a GPU without GPM or NVLink is asked
once; only a lost GPU raises (its sample says so).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pynvml

from gputop.engine.in_flight import calling
from gputop.engine.model import GpuCounters
from gputop.engine.nvml.calls import MISSING, VALUE_MEMBERS, Lost, raise_if_lost, soft
from gputop.engine.nvml.health import HealthReader
from gputop.engine.nvml.pynvml_private import field_request, field_values

# NVML_GPM_METRIC_*: graphics engine, any tensor pipe and DRAM bandwidth utilisation (%).
_GPM_METRICS = (1, 5, 10)


class _Gpm:
    """One GPU's GPM (Hopper and later): two samples, the previous tick's and this one's.

    nvmlGpmMetricsGet works out the metrics between two samples; the previous one is kept from
    tick to tick so every tick costs one sample and one metrics call.
    """

    def __init__(self) -> None:
        self.previous: Any = None  # a sample holding the previous tick's reading
        self.current: Any = None
        self.valid = False  # ``previous`` holds a reading

    def read(self, h: Any) -> tuple[float | None, ...]:
        if self.previous is None:
            self.previous, self.current = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        with calling("nvmlGpmSampleGet"):
            pynvml.nvmlGpmSampleGet(h, self.current)
        had, self.valid = self.valid, False
        values: tuple[float | None, ...] = (None,) * len(_GPM_METRICS)
        if had:
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(_GPM_METRICS)
            request.sample1, request.sample2 = self.previous, self.current
            for i, metric in enumerate(_GPM_METRICS):
                request.metrics[i].metricId = metric
            with calling("nvmlGpmMetricsGet"):
                pynvml.nvmlGpmMetricsGet(request)
            values = tuple(
                float(m.value) if m.nvmlReturn == pynvml.NVML_SUCCESS else None
                for m in (request.metrics[i] for i in range(len(_GPM_METRICS)))
            )
        self.previous, self.current = self.current, self.previous
        self.valid = True
        return values

    def free(self) -> None:
        for sample in (self.previous, self.current):
            if sample is not None:
                with contextlib.suppress(pynvml.NVMLError, *MISSING):
                    pynvml.nvmlGpmSampleFree(sample)
        self.previous = self.current = None


class CounterReader:
    """The exporter's counters (GpuCounters) of each GPU, a few cheap driver calls a tick.

    Every tick: energy, PCIe replays, NVLink throughput (one field-value call for all links) and
    GPM (one sample and one metrics call). The Xid events and the remapped rows are the health
    reader's (gputop.engine.nvml.health), which reads them whether or not counters are asked for:
    remapped rows change only when the GPU retires a memory row, so they are read every
    REMAP_EVERY ticks. A call that fails costs only its reading (never the GPU); a GPU without
    GPM or NVLink is asked once.
    """

    REMAP_EVERY = HealthReader.EVERY

    def __init__(self, health: HealthReader) -> None:
        self._health = health
        self._gpm: dict[int, _Gpm | None] = {}  # None: the GPU has no GPM
        self._links: dict[int, tuple[int, ...]] = {}  # active NVLink links, read once
        self._nvlink_requests: dict[int, Any] = {}  # GPU index -> its field-value array

    def read(self, index: int, h: Any) -> GpuCounters | None:
        """The GPU's counters; None when it is lost (its sample says so next tick). Read after
        the GPU's health readings of the same tick."""
        try:
            return self._read(index, h)
        except Lost:
            return None

    def _read(self, index: int, h: Any) -> GpuCounters:
        rows = self._health.remapped_rows(index)
        events = self._health.events
        count = events.count.get(index)
        xid, at = events.last.get(index, (None, None))
        gpm = self._read_gpm(index, h)
        return GpuCounters(
            index=index,
            energy_mj=soft(pynvml.nvmlDeviceGetTotalEnergyConsumption, h),
            pcie_replay_count=soft(pynvml.nvmlDeviceGetPcieReplayCounter, h),
            remapped_rows_correctable=None if rows is None else int(rows[0]),
            remapped_rows_uncorrectable=None if rows is None else int(rows[1]),
            remapped_rows_pending=None if rows is None else bool(rows[2]),
            remapped_rows_failure=None if rows is None else bool(rows[3]),
            nvlink_data_kib=self._read_nvlink(index, h),
            xid_count=count,
            xid_last=xid,
            xid_last_at_wall=at,
            gpm_graphics_percent=gpm[0],
            gpm_tensor_percent=gpm[1],
            gpm_dram_percent=gpm[2],
        )

    def _read_gpm(self, index: int, h: Any) -> tuple[float | None, ...]:
        if index not in self._gpm:
            support = soft(pynvml.nvmlGpmQueryDeviceSupport, h)
            self._gpm[index] = _Gpm() if support and support.isSupportedDevice else None
        gpm = self._gpm[index]
        if gpm is None:
            return (None,) * len(_GPM_METRICS)
        try:
            return gpm.read(h)
        except pynvml.NVMLError as exc:
            raise_if_lost(exc)
        except MISSING:
            pass
        gpm.valid = False  # start over from the next sample
        return (None,) * len(_GPM_METRICS)

    def _read_nvlink(self, index: int, h: Any) -> int | None:
        """Data sent and received over all the GPU's active links since the driver loaded (KiB)."""
        links = self._links.get(index)
        if links is None:
            links = self._links[index] = _active_links(h)
        if not links:
            return None
        request = self._nvlink_requests.get(index)
        if request is None:  # made once: 2 fields a link, up to 36
            fields = [(f, link) for link in links for f in _NVLINK_FIELDS]
            request = self._nvlink_requests[index] = field_request(fields)
        try:
            values = field_values(h, request)
        except pynvml.NVMLError as exc:
            raise_if_lost(exc)
            return None
        except MISSING:
            return None
        known = [v for v in values if v.nvmlReturn == pynvml.NVML_SUCCESS]
        if not known:
            return None
        return sum(int(getattr(v.value, VALUE_MEMBERS[v.valueType])) for v in known)

    def close(self) -> None:
        for gpm in self._gpm.values():
            if gpm is not None:
                gpm.free()


# NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX and _RX: a link's data counters in KiB (scopeId: link).
_NVLINK_FIELDS = (138, 139)
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS


def _active_links(h: Any) -> tuple[int, ...]:
    """The GPU's active NVLink links (none: a board without NVLink)."""
    active = []
    for link in range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS))):
        try:
            with calling("nvmlDeviceGetNvLinkState"):
                state = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except pynvml.NVMLError as exc:
            raise_if_lost(exc)
            break  # NOT_SUPPORTED (no NVLink) or INVALID_ARGUMENT (past the last link)
        except MISSING:
            break
        if state:
            active.append(link)
    return tuple(active)
