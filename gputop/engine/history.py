"""Bounded history of the metrics a user graphs, and peak memory since start. Thread-safe."""

from __future__ import annotations

import operator
import threading
from array import array
from collections.abc import Sequence

from gputop.engine.model import GpuState, Snapshot, row_identity

# GpuSample field names that History keeps a series of, in storage order.
METRICS = (
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "memory_used_bytes",
    "temperature_c",
    "power_draw_mw",
    "clock_sm_mhz",
    "clock_memory_mhz",
    "pcie_rx_kbps",
    "pcie_tx_kbps",
)
_METRIC_INDEX = {name: i for i, name in enumerate(METRICS)}
_metrics_of = operator.attrgetter(*METRICS)  # a GpuSample's METRICS as one tuple, read in C

ProcKey = tuple[int, float | None]  # (pid, create_time): a reused PID is another process


HISTORY_TICKS = 600  # ten minutes at the default 1 s interval
_WIDTH = len(METRICS)
# No value (None): no reading is this. The series are machine integers in flat arrays, not a
# dict of tuples of Python ints a tick: 8 GPUs' ten minutes take 0.35 MiB instead of ~1.8
# (issue 42: the dashboard's memory grew for its first ten minutes).
_NONE = -(2**63)
_ABSENT = array("q", [_NONE]) * _WIDTH


class History:
    """Ring buffers of per-GPU metrics (``maxlen`` ticks) plus GPU and process peak memory.

    Each tick stores one small tuple per GPU, so memory is bounded by ``maxlen`` whatever the
    run time. Process peaks of processes unseen for ``maxlen`` ticks are forgotten. Appends and
    reads hold one lock: the sampler thread appends while the dashboard reads.
    """

    def __init__(self, maxlen: int = HISTORY_TICKS) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self.maxlen = maxlen
        self._lock = threading.Lock()
        # A ring of maxlen ticks: _next is where the next one goes, _stored how many are held.
        self._times = array("d", bytes(8 * maxlen))
        self._series: dict[int, array[int]] = {}  # GPU index -> maxlen x METRICS, tick-major
        self._next = 0
        self._stored = 0
        self._gpu_peaks: dict[int, int] = {}
        self._proc_peaks: dict[ProcKey, int] = {}
        self._proc_seen: dict[ProcKey, int] = {}  # key -> tick count when last seen
        self._present: set[ProcKey] = set()  # the processes of the rows noted last
        self._tick = 0  # their number (RowChanges.tick; 0: not known)
        self._count = 0

    def __len__(self) -> int:
        with self._lock:
            return self._stored

    def append(self, snapshot: Snapshot) -> None:
        """Record one (fresh) snapshot; stale re-sends should not be appended."""
        tick = {
            g.index: array("q", [_NONE if v is None else v for v in _metrics_of(g)])
            for g in snapshot.gpus
            if g.state is GpuState.OK
        }
        with self._lock:
            self._count += 1
            at = self._next
            self._times[at] = snapshot.taken_at_wall
            start, end = at * _WIDTH, (at + 1) * _WIDTH
            for index in tick:
                if index not in self._series:  # None for the ticks before it was seen
                    self._series[index] = _ABSENT * self.maxlen
            for index, series in self._series.items():
                series[start:end] = tick.get(index, _ABSENT)
            self._next = (at + 1) % self.maxlen
            self._stored = min(self._stored + 1, self.maxlen)
            for g in snapshot.gpus:
                if g.memory_used_bytes is not None:
                    prev = self._gpu_peaks.get(g.index, 0)
                    self._gpu_peaks[g.index] = max(prev, g.memory_used_bytes)
            self._note_rows(snapshot)
            if self._count % self.maxlen == 0:
                self._forget_old_processes()

    def _note_rows(self, snapshot: Snapshot) -> None:
        """Peaks and last sightings of the processes: from what changed since the rows noted
        last (``Snapshot.changes``, rules in gputop.engine.changes), else from every row."""
        changes = snapshot.changes
        if changes is not None and changes.tick == self._tick:
            return  # the rows noted last, again
        seen, peaks, tick = self._proc_seen, self._proc_peaks, self._count
        if changes is not None and changes.follows(self._tick):
            present = self._present
            for key in changes.removed:
                seen[key] = tick - 1
                present.discard(key)
            for row in changes.added:
                key = row.identity
                seen[key] = tick
                present.add(key)
                _raise_peak(peaks, key, row.used_memory_bytes)
            # A row's peak can rise only where its row changed.
            for row in changes.changed:
                _raise_peak(peaks, row.identity, row.used_memory_bytes)
        else:
            rows = snapshot.processes
            now = set(map(row_identity, rows))
            for gone in self._present - now:
                seen[gone] = tick - 1
            for new in now - self._present:
                seen[new] = tick
            for row in rows:
                _raise_peak(peaks, row.identity, row.used_memory_bytes)
            self._present = now
        self._tick = changes.tick if changes is not None else 0

    def _forget_old_processes(self) -> None:
        horizon = self._count - self.maxlen
        # A process listed all along was noted when its row was last new: it stays.
        present = self._present
        for key in [
            k for k, seen in self._proc_seen.items() if seen <= horizon and k not in present
        ]:
            del self._proc_seen[key]
            self._proc_peaks.pop(key, None)

    def _positions(self, n: int) -> range:
        """Ring positions of the newest ``n`` stored ticks, oldest first: from -maxlen to
        maxlen - 1, each an index into the ring (a negative one counts from its end)."""
        k = min(max(0, n), self._stored)
        return range(self._next - k, self._next)

    def times(self) -> list[float]:
        """Wall-clock time of each stored tick, oldest first."""
        with self._lock:
            times = self._times
            return [times[i] for i in self._positions(self._stored)]

    def series(self, gpu_index: int, metric: str) -> list[float | None]:
        """One metric of one GPU, oldest first, aligned with ``times()`` (None where unknown)."""
        try:
            i = _METRIC_INDEX[metric]
        except KeyError:
            raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}") from None
        with self._lock:
            series = self._series.get(gpu_index)
            positions = self._positions(self._stored)
            if series is None:
                return [None] * len(positions)
            return [_value(series[p * _WIDTH + i]) for p in positions]

    @property
    def count(self) -> int:
        """Snapshots appended since start (not bounded: it numbers the samples)."""
        with self._lock:
            return self._count

    def tail(
        self, gpu_index: int, metrics: Sequence[str], n: int
    ) -> tuple[int, list[list[float | None]]]:
        """The newest ``n`` values of several metrics of one GPU, and ``count`` at that moment.

        Cheaper than ``series`` per tick: it reads only the end of the ring buffer.
        """
        try:
            idx = [_METRIC_INDEX[m] for m in metrics]
        except KeyError as exc:
            raise ValueError(
                f"unknown metric {exc.args[0]!r}; known: {', '.join(METRICS)}"
            ) from None
        with self._lock:
            positions = self._positions(n)
            series = self._series.get(gpu_index)
            count = self._count
            if series is None:
                return count, [[None] * len(positions) for _ in idx]
            out: list[list[float | None]] = [
                [_value(series[p * _WIDTH + i]) for p in positions] for i in idx
            ]
        return count, out

    def gpu_peak_memory_bytes(self, gpu_index: int) -> int | None:
        """Highest memory used on this GPU since start, or None if never known."""
        with self._lock:
            return self._gpu_peaks.get(gpu_index)

    def process_peak_memory_bytes(self, pid: int, create_time: float | None) -> int | None:
        """Highest GPU memory (summed over its GPUs) this process used since first seen."""
        with self._lock:
            return self._proc_peaks.get((pid, create_time))

    def tracked_processes(self) -> int:
        """How many processes have a remembered peak (bounded by recent activity)."""
        with self._lock:
            return len(self._proc_seen)


def _value(stored: int) -> int | None:
    return None if stored == _NONE else stored


def _raise_peak(peaks: dict[ProcKey, int], key: ProcKey, used: int | None) -> None:
    if used is not None:
        peak = peaks.get(key)
        if peak is None or used > peak:
            peaks[key] = used
