"""The readings the GPU health verdict is made from (gputop.engine.gpu_health), every tick, cheap.

* Xid events: one event set every GPU is registered on, drained with one
  ``nvmlEventSetWait_v2`` call a tick (timeout 0) while none is waiting. NVML keeps no history:
  a GPU has the Xids the driver told of since this reader started, for an hour
  (:attr:`HealthReader.RECENT_S`).
* Remapped rows (pending, failure), retired pages pending and the unrepairable-memory flag change
  only after an Xid 63/64 or a reset: read on the first tick and every :attr:`HealthReader.EVERY`
  ticks (three calls a GPU), kept in between. The exporter's remapped-row counts reuse them.
* The recovery action is a field value, read in the same ``nvmlDeviceGetFieldValues`` call as the
  memory temperature (gputop.engine.nvml.reader): no call of its own.
* Hardware slowdowns held: how long each hardware slowdown reason has been active without a
  break, from the throttle reasons the tick reads anyway.

Measured on the simulated dgx box (8 GPUs, in process): a tick costs the same within noise with
these readings as without (see tests/engine/test_gpu_health.py for the call counts).
"""

from __future__ import annotations

import contextlib
import ctypes
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import pynvml

from gputop.engine.in_flight import calling
from gputop.engine.model import XidEvent
from gputop.engine.nvml.calls import MISSING, soft

# Throttle reasons that mean the hardware is protecting itself (heat, power, an external brake);
# sw_power_cap and sw_thermal_slowdown are the driver's normal control under load.
HW_SLOWDOWNS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")


class XidEvents:
    """Critical Xid errors, from one NVML event set every GPU is registered on.

    NVML keeps no history of them: the count and the newest are those the driver told of since
    this reader started. A GPU whose driver gives no such events (NOT_SUPPORTED, an old driver,
    a vGPU guest) has no count at all (None), rather than a 0 that would claim there were none.
    """

    MAX_PER_TICK = 256  # a flood of events is read over several ticks, never forever
    KEEP = 32  # recent events kept a GPU (the oldest go first)

    def __init__(self, handles: Sequence[Any | None]) -> None:
        self._set: Any = None
        self._by_address: dict[int, int] = {}  # device handle's address -> GPU index
        self.count: dict[int, int] = {}  # GPU index -> Xids seen (registered GPUs only)
        self.last: dict[int, tuple[int, float]] = {}  # GPU index -> (Xid, time.time())
        self.recent: dict[int, deque[XidEvent]] = {}  # GPU index -> its newest events
        try:
            with calling("nvmlEventSetCreate"):
                self._set = pynvml.nvmlEventSetCreate()
        except (pynvml.NVMLError, *MISSING):
            return
        for index, h in enumerate(handles):
            if h is None:
                continue
            try:
                with calling("nvmlDeviceRegisterEvents"):
                    pynvml.nvmlDeviceRegisterEvents(
                        h, pynvml.nvmlEventTypeXidCriticalError, self._set
                    )
            except (pynvml.NVMLError, *MISSING):
                continue
            self._by_address[_address(h)] = index
            self.count[index] = 0
            self.recent[index] = deque(maxlen=self.KEEP)

    def drain(self) -> None:
        """Take every event waiting (without waiting for more)."""
        if not self.count:
            return
        for _ in range(self.MAX_PER_TICK):
            try:
                with calling("nvmlEventSetWait_v2"):
                    event = pynvml.nvmlEventSetWait_v2(self._set, 0)
            except (pynvml.NVMLError, *MISSING):  # TIMEOUT: none left (else: next tick)
                return
            index = self._by_address.get(_address(event.device))
            if index is None or not event.eventType & pynvml.nvmlEventTypeXidCriticalError:
                continue
            xid, at = int(event.eventData), time.time()
            self.count[index] += 1
            self.last[index] = (xid, at)
            self.recent[index].append(XidEvent(xid=xid, at_wall=at))

    def since(self, index: int, wall: float) -> tuple[XidEvent, ...] | None:
        """The GPU's events told of at ``wall`` or later (None: it gives no Xid events)."""
        events = self.recent.get(index)
        if events is None:
            return None
        return tuple(e for e in events if e.at_wall >= wall)

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(pynvml.NVMLError, *MISSING):
                pynvml.nvmlEventSetFree(self._set)
            self._set = None


def _address(pointer: Any) -> int:
    """The address an opaque NVML handle holds (an event's device is the GPU's own handle)."""
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


class HealthReader:
    """A GPU's health readings (GpuSample fields), for the verdict of gputop.engine.gpu_health."""

    EVERY = 30  # ticks between two readings of the slow-changing flags
    RECENT_S = 3600.0  # an Xid counts for this long after the driver told of it

    def __init__(self, handles: Sequence[Any | None]) -> None:
        self.ticks = 0
        self.events = XidEvents(handles)
        self._flags: dict[int, dict[str, bool | None]] = {}  # GPU index -> the slow flags
        self._rows: dict[int, tuple[Any, ...] | None] = {}  # nvmlDeviceGetRemappedRows' answer
        self._held_since: dict[int, dict[str, float]] = {}  # GPU -> reason -> monotonic start

    def begin(self) -> None:
        """Before a tick's GPUs: take the Xid events that arrived since the last tick."""
        self.events.drain()

    def end(self) -> None:
        """After a tick's GPUs."""
        self.ticks += 1

    def remapped_rows(self, index: int) -> tuple[Any, ...] | None:
        """(correctable, uncorrectable, pending, failure) as last read (None: unreadable)."""
        return self._rows.get(index)

    def read(self, index: int, h: Any, throttle: tuple[str, ...] | None) -> dict[str, Any]:
        """The GPU's health fields of GpuSample (but recovery_action, read with the memory
        temperature). ``throttle``: the reasons this tick read (None: unreadable)."""
        if index not in self._flags or self.ticks % self.EVERY == 0:
            self._flags[index] = self._read_flags(index, h)
        values: dict[str, Any] = dict(self._flags[index])
        values["recent_xids"] = self.events.since(index, time.time() - self.RECENT_S)
        values["slowdowns_held_s"] = self._held(index, throttle)
        return values

    def _read_flags(self, index: int, h: Any) -> dict[str, bool | None]:
        rows = self._rows[index] = soft(pynvml.nvmlDeviceGetRemappedRows, h)
        pending = soft(pynvml.nvmlDeviceGetRetiredPagesPendingStatus, h)
        unrepairable = soft(pynvml.nvmlDeviceGetUnrepairableMemoryFlag_v1, h)
        return {
            "remapped_rows_pending": None if rows is None else bool(rows[2]),
            "remapped_rows_failure": None if rows is None else bool(rows[3]),
            "retired_pages_pending": None if pending is None else bool(pending),
            "unrepairable_memory": None if unrepairable is None else bool(unrepairable),
        }

    def _held(
        self, index: int, throttle: tuple[str, ...] | None
    ) -> tuple[tuple[str, float], ...] | None:
        """Each hardware slowdown active now, with the seconds since it was first seen active
        on an unbroken run of ticks (a tick without it, or unreadable, starts over); None when
        the reasons are unreadable."""
        since = self._held_since.setdefault(index, {})
        if throttle is None:
            since.clear()
            return None
        active = [r for r in HW_SLOWDOWNS if r in throttle]
        for reason in list(since):
            if reason not in active:
                del since[reason]
        now = time.monotonic()
        return tuple((r, now - since.setdefault(r, now)) for r in active)

    def close(self) -> None:
        self.events.close()
