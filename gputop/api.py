"""The Python API: ``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``, ``track()``.

One driver connection is opened on first use and shared (closed at exit). ``use_demo()`` (or the
``GPUTOP_DEMO`` environment variable) switches to the simulated driver. Every function also takes
``source=`` to read from a Source of your own. No Textual here; pynvml loads on first use only.
"""

from __future__ import annotations

import atexit
import copy
import os
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any

from gputop import units
from gputop.engine.model import Snapshot
from gputop.engine.source import Source, open_source
from gputop.units import MiB

_lock = threading.RLock()  # one reader of the shared source at a time
_shared: Source | None = None
_demo: str | None = None


def use_demo(name: str | None = "demo") -> None:
    """Read from the simulated driver with this shipped scenario (demo, dgx, faults, flaky) or file.

    ``use_demo(None)`` goes back to the real driver. Takes effect on the next call.
    """
    global _demo
    with _lock:
        _close_shared()
        _demo = name


def _close_shared() -> None:
    global _shared
    with _lock:
        if _shared is not None:
            _shared.close()
            _shared = None


def _source(source: Source | None) -> Source:
    global _shared
    if source is not None:
        return source
    with _lock:
        if _shared is None:
            if _demo is not None and os.path.exists(_demo):
                _shared = open_source(scenario=_demo)
            else:
                _shared = open_source(demo=_demo)
        return _shared


def _read(source: Source | None) -> Snapshot:
    """One driver-level snapshot (GPUs and their NVML process lists)."""
    src = _source(source)
    with _lock:
        return src.snapshot()


def snapshot(*, source: Source | None = None) -> Snapshot:
    """A complete, typed Snapshot with processes joined to the OS view (as ``gputop --json``)."""
    from gputop.engine.enrich import enrich  # psutil only when processes are wanted
    from gputop.engine.holders import scan_holders

    src = _source(source)
    return enrich(_read(src), holders=scan_holders(src.dev_dir))


def devices(*, source: Source | None = None) -> list[dict[str, Any]]:
    """Every GPU as a dict with the keys of ``gputop --json`` (units in the key names)."""
    from gputop.commands.json_out import gpu_to_dict

    return [gpu_to_dict(g) for g in _read(source).gpus]


def processes(*, source: Source | None = None) -> list[dict[str, Any]]:
    """Every GPU-related process (user, command, state, memory) as ``gputop --json`` has them."""
    from gputop.commands.json_out import process_row_to_dict

    return [process_row_to_dict(r) for r in snapshot(source=source).processes]


def show(file: IO[str] | None = None, *, source: Source | None = None) -> None:
    """Print a compact table of GPU and memory utilisation, like GPUtil's showUtilization()."""
    out = file if file is not None else sys.stdout
    lines = [f"| {'ID':>2} | {'GPU':>4} | {'MEM':>4} |", "-" * 20]
    for g in _read(source).gpus:
        mem = None
        if g.memory_used_bytes is not None and g.memory_total_bytes:
            mem = 100 * g.memory_used_bytes / g.memory_total_bytes
        gpu = units.percent(g.utilization_gpu_percent)
        lines.append(f"| {g.index:>2} | {gpu:>4} | {units.percent(mem):>4} |")
    out.write("\n".join(lines) + "\n")


@dataclass(slots=True, kw_only=True)
class MemoryTrace:
    """Memory over a tracked block: at start, at end, and the highest value seen."""

    start_bytes: int
    end_bytes: int
    peak_bytes: int
    peak_at_s: float = 0.0  # seconds after the block started

    @property
    def delta_bytes(self) -> int:
        """end - start: what the block left allocated."""
        return self.end_bytes - self.start_bytes

    def update(self, value: int, at_s: float) -> None:
        """Record one reading."""
        self.end_bytes = value
        if value > self.peak_bytes:
            self.peak_bytes, self.peak_at_s = value, at_s


@dataclass(slots=True, kw_only=True)
class TrackReport:
    """What ``track`` saw: per GPU (all users) and for the tracked PIDs (total and per GPU)."""

    label: str
    pids: tuple[int, ...]
    duration_s: float = 0.0
    samples: int = 0
    devices: dict[int, MemoryTrace] = field(default_factory=dict)
    process: MemoryTrace | None = None  # the tracked PIDs, summed over all GPUs
    process_by_device: dict[int, MemoryTrace] = field(default_factory=dict)

    def summary(self) -> str:
        """A readable table (MiB)."""
        head = f"{'':<24}{'start':>10}{'end':>10}{'delta':>11}{'peak':>10}{'peak at':>9}"
        lines = [
            f"gputop.track {self.label!r}: {self.duration_s:.2f} s, {self.samples} samples",
            head,
        ]
        for i, t in sorted(self.devices.items()):
            lines.append(_trace_line(f"GPU {i} (all processes)", t))
        pids = ",".join(str(p) for p in self.pids)
        if self.process is not None:
            lines.append(_trace_line(f"pid {pids} (all GPUs)", self.process))
        for i, t in sorted(self.process_by_device.items()):
            lines.append(_trace_line(f"  on GPU {i}", t))
        return "\n".join(lines)


def _trace_line(name: str, t: MemoryTrace) -> str:
    return (
        f"{name:<24}{t.start_bytes // MiB:>6} MiB{t.end_bytes // MiB:>6} MiB"
        f"{t.delta_bytes // MiB:>+7} MiB{t.peak_bytes // MiB:>6} MiB{t.peak_at_s:>7.2f} s"
    )


def _update(
    traces: dict[int, MemoryTrace], key: int, value: int, at_s: float, *, start: int | None
) -> None:
    """Add a reading; a new trace starts at ``start`` (None: this reading is the start)."""
    trace = traces.get(key)
    if trace is None:
        first = value if start is None else start
        traces[key] = trace = MemoryTrace(start_bytes=first, end_bytes=first, peak_bytes=first)
    trace.update(value, at_s)


class Tracker:
    """Context manager from :func:`track`; read ``report`` (or print it) afterwards."""

    def __init__(
        self, label: str, *, interval_s: float, pids: Iterable[int] | None, source: Source | None
    ) -> None:
        self.interval_s = interval_s
        self._source = source
        self._report = TrackReport(label=label, pids=tuple(pids or (os.getpid(),)))
        self._data_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.errors = 0  # samples that failed (driver errors); the tracked code never sees them

    def __enter__(self) -> Tracker:
        self._t0 = time.monotonic()
        self._sample()  # the "start" values: before the block runs
        self._thread = threading.Thread(target=self._run, name="gputop-track", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, 4 * self.interval_s))
        if self._thread is None or not self._thread.is_alive():
            self._sample()  # the "end" values: after the block
        with self._data_lock:
            self._report.duration_s = time.monotonic() - self._t0

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self) -> None:
        try:
            snap = _read(self._source)
        except Exception:  # noqa: BLE001 - a thread's top level: never disturb the tracked code
            self.errors += 1
            return
        at_s = snap.taken_at_mono - self._t0
        pids = set(self._report.pids)
        with self._data_lock:
            r = self._report
            total = 0
            for g in snap.gpus:
                if g.memory_used_bytes is not None:
                    _update(r.devices, g.index, g.memory_used_bytes, at_s, start=None)
                mine = sum(p.used_memory_bytes or 0 for p in g.processes if p.pid in pids)
                total += mine
                if mine or g.index in r.process_by_device:
                    # A GPU the process starts using mid-block started at 0 bytes.
                    first = None if r.samples == 0 else 0
                    _update(r.process_by_device, g.index, mine, at_s, start=first)
            if r.process is None:
                r.process = MemoryTrace(start_bytes=total, end_bytes=total, peak_bytes=total)
            else:
                r.process.update(total, at_s)
            r.samples += 1

    @property
    def report(self) -> TrackReport:
        """A copy of the figures so far (final once the block has ended)."""
        with self._data_lock:
            return copy.deepcopy(self._report)

    @property
    def samples(self) -> int:
        """How many readings were taken (start and end included)."""
        return self.report.samples

    def summary(self) -> str:
        """The report as a readable table."""
        return self.report.summary()

    def __str__(self) -> str:
        return self.summary()


def track(
    label: str = "",
    *,
    interval_s: float = 0.05,
    pids: Iterable[int] | None = None,
    source: Source | None = None,
) -> Tracker:
    """``with gputop.track("stage") as t:`` -- GPU memory of each device and of this process.

    Samples every ``interval_s`` in a daemon thread (catching peaks between a dashboard's
    1 s ticks); ``pids`` defaults to this process. ``print(t)`` afterwards shows start, end,
    delta and peak; ``t.report`` holds the numbers.
    """
    return Tracker(label, interval_s=interval_s, pids=pids, source=source)


atexit.register(_close_shared)
