"""Tracking memory over a block of code: ``gputop.track()``, ``gputop.stages()``, their reports.

A daemon thread samples the GPU memory (through gputop.api, so through the driver process, each
read within its time limit), this process's host RSS and, when PyTorch is already imported,
its caching allocator on every device it uses. A failed or late driver read is counted
(``Tracker.errors``, the last one's line in ``Tracker.last_error``), never raised into the
tracked code.

Peaks are exact where something keeps count, sampled elsewhere (each peak says which,
``PEAK_EXACT``/``PEAK_SAMPLED``): the host RSS peak is the kernel's (gputop.host_memory resets
the process's VmHWM when a block starts), and a GPU's peak is torch's own (its reserved peak,
reset per block) when torch holds that GPU's memory; NVML's sampled per-process figure is the
fallback. The driver is opened and read once before a block's start time and values are taken,
so the first block is not charged gputop's own start-up.
"""

from __future__ import annotations

import copy
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from gputop import api, host_memory, torch_memory, units
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.model import PidMemory, pid_memory_of
from gputop.engine.sanitize import clean
from gputop.engine.source import Source
from gputop.host_memory import PEAK_EXACT, PEAK_SAMPLED
from gputop.host_memory import rss_bytes as host_rss_bytes
from gputop.torch_memory import torch_cuda
from gputop.units import MiB

__all__ = [
    "PEAK_EXACT",
    "PEAK_SAMPLED",
    "MemoryTrace",
    "Stages",
    "TorchMemory",
    "TrackReport",
    "Tracker",
    "host_rss_bytes",
    "memory_table",
    "stages",
    "torch_cuda",
    "track",
]


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
    """What ``track`` saw: per GPU (all users) and for the tracked PIDs (total and per GPU).

    GPUs are NVML indices, except ``torch_by_device`` (torch's CUDA indices; ``cuda_to_gpu``
    maps them). A ``*_peak_kind`` is ``"exact"`` or ``"sampled"`` (the true peak may be higher).
    """

    label: str
    pids: tuple[int, ...]
    duration_s: float = 0.0
    samples: int = 0
    devices: dict[int, MemoryTrace] = field(default_factory=dict)
    process: MemoryTrace | None = None  # the tracked PIDs, summed over all GPUs
    process_peak_kind: str = PEAK_SAMPLED
    process_by_device: dict[int, MemoryTrace] = field(default_factory=dict)
    process_peak_kinds: dict[int, str] = field(default_factory=dict)  # per GPU, as above
    gpu_free_bytes: dict[int, int] = field(default_factory=dict)  # at the end, GPUs used
    gpu_total_bytes: dict[int, int] = field(default_factory=dict)
    host_rss: MemoryTrace | None = None  # this process's resident host memory (RSS)
    host_peak_kind: str = PEAK_SAMPLED
    torch: TorchMemory | None = None  # PyTorch's caching allocator (all its devices), if loaded
    torch_by_device: dict[int, TorchMemory] = field(default_factory=dict)  # by CUDA index
    cuda_to_gpu: dict[int, int] = field(default_factory=dict)  # CUDA index -> NVML index

    @property
    def context_overhead_bytes(self) -> int | None:
        """NVML's memory for the process minus torch's reserved: the CUDA context and libraries.

        None without torch figures or without an NVML reading of the process, and when torch's
        reserved is above NVML's figure (:attr:`torch_above_nvml`): never a negative number.
        """
        if self.torch is None or self.process is None or not self.process.end_bytes:
            return None
        overhead = self.process.end_bytes - self.torch.reserved.end_bytes
        return overhead if overhead >= 0 else None

    @property
    def torch_above_nvml(self) -> bool:
        """torch says it reserved more than NVML says the process holds (the two disagree:
        e.g. NVML's figure lags, or its per-process accounting is off in a container)."""
        return (
            self.torch is not None
            and self.process is not None
            and bool(self.process.end_bytes)
            and self.torch.reserved.end_bytes > self.process.end_bytes
        )

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
        if self.host_rss is not None:
            lines.append(_trace_line("host RSS (this process)", self.host_rss))
        if self.torch is not None:
            lines.append(_trace_line("torch allocated", self.torch.allocated))
            lines.append(_trace_line("torch reserved", self.torch.reserved))
            lines.append(
                f"{'torch reclaimable':<24}{'':>20}{self.torch.reclaimable_bytes // MiB:>7} MiB"
            )
            overhead = self.context_overhead_bytes
            if overhead is not None:
                lines.append(f"{'CUDA context (NVML-torch)':<24}{'':>20}{overhead // MiB:>7} MiB")
            elif self.torch_above_nvml:
                lines.append(f"{'CUDA context (NVML-torch)':<24}  n/a: torch reserved > NVML")
        return "\n".join(lines)


@dataclass(slots=True, kw_only=True)
class TorchMemory:
    """PyTorch's caching allocator over a block (``torch.cuda``): one device, or all of them.

    ``allocated`` is memory held by tensors, ``reserved`` what the allocator holds from the
    driver. On one device both peaks are the allocator's own counters (``max_memory_allocated``
    and ``max_memory_reserved``, reset when the block starts): exact. Summed over several
    devices, a peak is the highest sampled sum (at least each device's own peak).
    """

    allocated: MemoryTrace
    reserved: MemoryTrace

    @property
    def reclaimable_bytes(self) -> int:
        """reserved - allocated at the end: what ``torch.cuda.empty_cache()`` could give back."""
        return self.reserved.end_bytes - self.allocated.end_bytes


def _one_line(exc: Exception) -> str:
    """The exception as one clean line (its text may be the driver's)."""
    text = clean(str(exc)).splitlines()
    return text[0] if text and text[0] else type(exc).__name__


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


def _torch_at(allocated: int, reserved: int) -> TorchMemory:
    return TorchMemory(
        allocated=MemoryTrace(start_bytes=allocated, end_bytes=allocated, peak_bytes=allocated),
        reserved=MemoryTrace(start_bytes=reserved, end_bytes=reserved, peak_bytes=reserved),
    )


class Tracker:
    """Context manager from :func:`track`; read ``report`` (or print it) afterwards."""

    def __init__(
        self,
        label: str,
        *,
        interval_s: float,
        pids: Iterable[int] | None,
        source: Source | None,
        gpu: bool = True,
        host: bool | None = None,
        torch: bool | None = None,
        max_share: float | None = None,
        devices: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s  # the start and end reads' time limit (gputop.api)
        self.max_share = max_share  # at most this share of the time spent sampling (None: no cap)
        self._source = source
        pids = None if pids is None else tuple(pids)  # an iterator is read once
        own = pids is None or pids == (os.getpid(),)
        self._gpu = gpu  # False: no NVML reads at all (no GPU here)
        # False: the PIDs' memory only, from the process lists (no whole snapshots, no
        # report.devices): a fraction of the cost, for the notebook's line after each cell.
        self._devices = devices
        self._host = own if host is None else host
        self._torch_wanted = own if torch is None else torch
        self._cuda: Any | None = None
        self._torch_devices: tuple[int, ...] = ()  # torch's devices in use at the start
        self._host_peak: host_memory.PeakBlock | None = None
        self._report = TrackReport(label=label, pids=tuple(pids or (os.getpid(),)))
        self._data_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self.errors = 0  # samples that failed (driver errors); the tracked code never sees them
        self.last_error: str | None = None  # the last failed sample's one line, if any

    def __enter__(self) -> Tracker:
        # The start GPU read comes first: it opens the driver (imports, the driver process)
        # before the block's start time, start RSS and peak reset, which are the block's own.
        self._t0 = time.monotonic()
        if self._gpu:
            self._sample_gpu(self.timeout_s)
        self._cuda = torch_cuda() if self._torch_wanted else None
        if self._cuda is not None:
            try:
                torch_memory.reset_peaks(self._cuda)  # the allocator's peaks: this block's own
                self._torch_devices = torch_memory.devices_in_use(self._cuda)
            except Exception:  # noqa: BLE001 - no torch figures rather than a failed block
                self._cuda = None
        if self._host:
            self._host_peak = host_memory.PeakBlock().open()
        self._t0 = time.monotonic()
        self._sample_host(0.0)  # the "start" values: before the block runs
        self._thread = threading.Thread(target=self._run, name="gputop-track", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        duration_s = time.monotonic() - self._t0  # the block's, not the end reads'
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(1.0, 4 * self.interval_s))
        if self._thread is None or not self._thread.is_alive():
            self._sample(self.timeout_s)  # the "end" values: after the block
        host_peak = self._host_peak.close() if self._host_peak is not None else None
        torch_peaks = self._torch_peaks()
        with self._data_lock:
            r = self._report
            r.duration_s = duration_s
            if r.host_rss is not None and host_peak is not None:
                r.host_peak_kind = PEAK_EXACT
                if host_peak > r.host_rss.peak_bytes:  # between samples: no time known
                    r.host_rss.peak_bytes = host_peak
            if torch_peaks is not None:
                self._apply_torch_peaks(torch_peaks)
                self._exact_gpu_peaks()

    def _torch_peaks(self) -> dict[int, torch_memory.DevicePeaks] | None:
        """The allocator's peaks per device since the start (and the end values of devices
        first used during the block); None without torch."""
        if self._cuda is None:
            return None
        try:
            devices = torch_memory.used_since_reset(self._cuda, self._torch_devices)
            late = tuple(d for d in devices if d not in self._torch_devices)
            if late:  # first used during the block: they started at 0
                at_s = time.monotonic() - self._t0
                with self._data_lock:
                    for d, value in torch_memory.now(self._cuda, late).items():
                        t = self._report.torch_by_device.setdefault(d, _torch_at(0, 0))
                        t.allocated.update(value.allocated_bytes, at_s)
                        t.reserved.update(value.reserved_bytes, at_s)
            return torch_memory.peaks(self._cuda, devices)
        except Exception:  # noqa: BLE001 - keep the sampled peaks
            return None

    def _apply_torch_peaks(self, peaks: dict[int, torch_memory.DevicePeaks]) -> None:
        r = self._report
        for d, peak in peaks.items():
            t = r.torch_by_device.get(d)
            if t is None:
                continue
            t.allocated.peak_bytes = max(t.allocated.peak_bytes, peak.allocated_bytes)
            t.reserved.peak_bytes = max(t.reserved.peak_bytes, peak.reserved_bytes)
        if not r.torch_by_device:
            return
        if len(r.torch_by_device) == 1:
            r.torch = copy.deepcopy(next(iter(r.torch_by_device.values())))
            return
        total = r.torch or _torch_at(0, 0)
        total.allocated.start_bytes = sum(
            t.allocated.start_bytes for t in r.torch_by_device.values()
        )
        total.allocated.end_bytes = sum(t.allocated.end_bytes for t in r.torch_by_device.values())
        total.reserved.start_bytes = sum(t.reserved.start_bytes for t in r.torch_by_device.values())
        total.reserved.end_bytes = sum(t.reserved.end_bytes for t in r.torch_by_device.values())
        for name in ("allocated", "reserved"):
            trace: MemoryTrace = getattr(total, name)
            highest = max(getattr(t, name).peak_bytes for t in r.torch_by_device.values())
            trace.peak_bytes = max(trace.peak_bytes, highest, trace.start_bytes, trace.end_bytes)
        r.torch = total

    def _exact_gpu_peaks(self) -> None:
        """A GPU whose memory torch holds: its peak is NVML's start plus torch's reserved rise
        (exact), unless NVML was seen higher (something besides torch: that sampled peak)."""
        r = self._report
        for cuda_index, t in r.torch_by_device.items():
            gpu = r.cuda_to_gpu.get(cuda_index)
            trace = None if gpu is None else r.process_by_device.get(gpu)
            if gpu is None or trace is None:
                continue
            exact = trace.start_bytes + t.reserved.peak_bytes - t.reserved.start_bytes
            if exact >= trace.peak_bytes:
                trace.peak_bytes = exact
                r.process_peak_kinds[gpu] = PEAK_EXACT
        if (
            r.process is not None
            and len(r.process_by_device) == 1
            and set(r.process_peak_kinds.values()) == {PEAK_EXACT}
        ):
            (only,) = r.process_by_device.values()
            r.process.peak_bytes = max(r.process.peak_bytes, only.peak_bytes)
            r.process_peak_kind = PEAK_EXACT

    def _run(self) -> None:
        wait = self.interval_s
        while not self._stop.wait(wait):
            # This thread's CPU time: what it takes from the code. It reads on this thread, with
            # no time limit (a hung driver holds this daemon thread only, not the code); through
            # the driver process, most of a read's work is done there, not here.
            t0 = time.thread_time()
            self._sample(None)
            if self.max_share:  # reads that cost more than their share of the time: space them
                cost = time.thread_time() - t0
                wait = max(self.interval_s, cost / self.max_share - cost)

    def _sample(self, timeout_s: float | None) -> None:
        """One reading of everything tracked; the driver's within ``timeout_s`` (None: no limit,
        on this thread)."""
        at_s = time.monotonic() - self._t0
        self._sample_host(at_s)
        if self._gpu:
            self._sample_gpu(timeout_s)

    def _sample_host(self, at_s: float) -> None:
        """RSS and torch's counters: cheap, read on every sample whatever NVML says."""
        rss = host_rss_bytes() if self._host else None
        torch_now: dict[int, torch_memory.DeviceNow] | None = None
        if self._cuda is not None:
            try:
                torch_now = torch_memory.now(self._cuda, self._torch_devices)
            except Exception:  # noqa: BLE001 - never disturb the tracked code
                torch_now = None
        with self._data_lock:
            r = self._report
            if rss is not None:
                if r.host_rss is None:
                    r.host_rss = MemoryTrace(start_bytes=rss, end_bytes=rss, peak_bytes=rss)
                else:
                    r.host_rss.update(rss, at_s)
            if torch_now:
                for d, value in torch_now.items():
                    t = r.torch_by_device.get(d)
                    if t is None:
                        r.torch_by_device[d] = _torch_at(
                            value.allocated_bytes, value.reserved_bytes
                        )
                    else:
                        t.allocated.update(value.allocated_bytes, at_s)
                        t.reserved.update(value.reserved_bytes, at_s)
                allocated = sum(v.allocated_bytes for v in torch_now.values())
                reserved = sum(v.reserved_bytes for v in torch_now.values())
                if r.torch is None:
                    r.torch = _torch_at(allocated, reserved)
                else:
                    r.torch.allocated.update(allocated, at_s)
                    r.torch.reserved.update(reserved, at_s)
            if not self._gpu:
                r.samples += 1

    def _sample_gpu(self, timeout_s: float | None) -> None:
        pids = self._report.pids
        try:
            mine: PidMemory
            if self._devices:
                snap = api.read_snapshot(self._source, timeout_s)
                mine = pid_memory_of(snap, pids)
            else:
                snap, mine = None, api.read_pids(self._source, pids, timeout_s)
        except Exception as exc:  # noqa: BLE001 - a thread's top level: never disturb the code
            self.errors += 1
            self.last_error = _one_line(exc)
            return
        at_s = max(0.0, mine.taken_at_mono - self._t0)  # the start read is before the start
        with self._data_lock:
            r = self._report
            if snap is not None:
                for g in snap.gpus:
                    if g.memory_used_bytes is not None:
                        _update(r.devices, g.index, g.memory_used_bytes, at_s, start=None)
            total = mine.total_bytes
            for index, used in mine.by_gpu_bytes:
                if used or index in r.process_by_device:
                    # A GPU the process starts using mid-block started at 0 bytes.
                    first = None if r.samples == 0 else 0
                    _update(r.process_by_device, index, used, at_s, start=first)
                    r.process_peak_kinds.setdefault(index, PEAK_SAMPLED)
            for index, free, whole in mine.free_bytes:
                r.gpu_free_bytes[index] = free
                r.gpu_total_bytes[index] = whole
            if not r.cuda_to_gpu and mine.cuda_indices:
                r.cuda_to_gpu = {cuda: index for index, cuda in mine.cuda_indices}
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
    gpu: bool = True,
    host: bool | None = None,
    torch: bool | None = None,
    max_share: float | None = None,
    devices: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Tracker:
    """``with gputop.track("stage") as t:`` -- GPU memory of each device and of this process.

    Samples every ``interval_s`` in a daemon thread (catching peaks between a dashboard's
    1 s ticks); ``pids`` defaults to this process. ``print(t)`` afterwards shows start, end,
    delta and peak; ``t.report`` holds the numbers.

    Tracking this process (the default) also follows its host RSS, whose peak is the kernel's
    exact one (gputop resets this process's peak-RSS counter, VmHWM, on entry: see
    gputop.host_memory), and, when PyTorch is already imported and has initialised CUDA, the
    caching allocator on every device it uses: allocated, reserved, reclaimable and the
    allocator's own peaks (``torch.cuda.reset_peak_memory_stats(d)`` on entry), which make the
    peak of a GPU torch holds exact; plus the CUDA context overhead (NVML's figure minus torch's
    reserved; None when torch's is the larger). ``host`` and ``torch`` turn those on or off;
    ``gpu=False`` reads no NVML at all. torch is never imported here. The driver is opened and
    read before the block's start values are taken: gputop's start-up is not the block's.
    ``max_share`` (e.g. 0.05) spaces the reads out when one costs more than that share of the
    interval, so slow drivers or many GPUs never take more than that share of the time.
    ``devices=False`` drops the per-GPU all-process figures (``report.devices``) and reads only
    the tracked PIDs' memory from the driver's process lists: much cheaper per sample.
    ``timeout_s``: the start and end reads' time limit (the sampler thread's reads have none: a
    hung driver holds that daemon thread only). A read that fails (the driver process
    crashed, a GPU did not answer in time) is counted in ``errors``, its line kept in
    ``last_error``: the tracked code never sees it.
    """
    return Tracker(
        label,
        interval_s=interval_s,
        pids=pids,
        source=source,
        gpu=gpu,
        host=host,
        torch=torch,
        max_share=max_share,
        devices=devices,
        timeout_s=timeout_s,
    )


def _rise(trace: MemoryTrace | None) -> int | None:
    """How far the peak rose above the start value."""
    return None if trace is None else trace.peak_bytes - trace.start_bytes


def _delta(trace: MemoryTrace | None) -> int | None:
    return None if trace is None else trace.delta_bytes


def memory_table(rows: Iterable[tuple[str, TrackReport]], first: str = "stage") -> str:
    """One line per tracked block: time, GPU (this process, all GPUs), host RSS and torch.

    "peak+" is how far the peak rose above the block's start value.
    """
    rows = list(rows)
    with_torch = any(r.torch is not None for _, r in rows)
    head = [first, "time", "GPU delta", "GPU peak+", "RSS delta", "RSS peak+"]
    if with_torch:
        head += ["alloc delta", "alloc peak", "reserved", "reclaimable"]
    body: list[list[str]] = []
    for name, r in rows:
        line = [
            name,
            f"{r.duration_s:.2f} s",
            units.mib_signed(_delta(r.process)),
            units.mib_signed(_rise(r.process)),
            units.mib_signed(_delta(r.host_rss)),
            units.mib_signed(_rise(r.host_rss)),
        ]
        if with_torch:
            t = r.torch
            line += (
                ["-"] * 4
                if t is None
                else [
                    units.mib_signed(t.allocated.delta_bytes),
                    units.mib_rounded(t.allocated.peak_bytes),
                    units.mib_rounded(t.reserved.end_bytes),
                    units.mib_rounded(t.reclaimable_bytes),
                ]
            )
        body.append(line)
    # In terminal cells: a label may be CJK (two cells a character) in a notebook or a terminal.
    from gputop import cells as C  # rich.cells: only when a table is drawn, not on import

    widths = [max(C.cell_len(c[i]) for c in [head, *body]) for i in range(len(head))]

    def fmt(cells: list[str]) -> str:
        first_cell = C.ljust(cells[0], widths[0])
        rest = (C.rjust(c, w) for c, w in zip(cells[1:], widths[1:], strict=True))
        return "  ".join([first_cell, *rest]).rstrip()

    return "\n".join([fmt(head), *(fmt(b) for b in body)])


class _StageTracker(Tracker):
    """One stage of :class:`Stages`: a Tracker that files its report when it ends."""

    def __init__(self, stages: Stages, label: str, **kwargs: Any) -> None:
        super().__init__(label, **kwargs)
        self._stages = stages

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        super().__exit__(exc_type, exc, tb)
        self._stages.reports.append(self.report)


class Stages:
    """Memory per stage (fastai's habit): ``with s("load"): ...`` then ``print(s)``."""

    def __init__(self, *, interval_s: float, source: Source | None, gpu: bool) -> None:
        self.interval_s = interval_s
        self._source = source
        self._gpu = gpu
        self.reports: list[TrackReport] = []  # one per finished stage, in order

    def __call__(self, name: str) -> Tracker:
        """A tracked stage: ``with s("train head"):``."""
        return _StageTracker(
            self,
            name,
            interval_s=self.interval_s,
            pids=None,
            source=self._source,
            gpu=self._gpu,
            devices=False,  # the stage table shows no per-GPU all-process figures
        )

    def __enter__(self) -> Stages:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def table(self) -> str:
        """The stages as a table, in the order they ran."""
        return "gputop.stages\n" + memory_table((r.label, r) for r in self.reports)

    def __str__(self) -> str:
        return self.table()


def stages(*, interval_s: float = 0.05, source: Source | None = None, gpu: bool = True) -> Stages:
    """``with gputop.stages() as s:`` then ``with s("load"): ...`` per stage; ``print(s)``.

    Each stage is a :func:`track` of this process (GPU, host RSS, torch when loaded).
    """
    return Stages(interval_s=interval_s, source=source, gpu=gpu)
