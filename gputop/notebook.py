"""The IPython extension: ``%load_ext gputop`` -- which cell ate the GPU memory.

After each cell one line: wall time; this process's GPU memory (NVML, per GPU it uses) delta and
peak during the cell; host RSS delta and peak; and, when PyTorch is already imported and has
initialised CUDA, the caching allocator (allocated, reserved, reclaimable, its own peak during
the cell) and the CUDA context overhead (NVML's figure minus torch's reserved).

Each cell runs inside a :class:`gputop.tracking.Tracker` sampling in a daemon thread, so a peak
that is gone again before the cell ends is still caught. Its readings are the light ones (the
driver's process lists only, ``Source.pid_memory``); ``full`` also takes whole snapshots for its
table. The driver is read through gputop.api, so in a process of its own: a driver that crashes
or hangs gives the cell one line saying so (``GPU n/a: DRIVER CRASHED (...)``), never a dead
kernel, and the next cell reads again once the driver process is back.
``%gputop on|off|brief|full|summary|reclaim``.
Nothing here imports IPython or torch: the shell is handed in, torch is read from sys.modules.
"""

from __future__ import annotations

import gc
import os
import sys
from dataclasses import dataclass
from typing import IO, Any

from gputop import api, tracking
from gputop.engine.source import Source
from gputop.errors import DriverCrashed, DriverTimeout
from gputop.tracking import MemoryTrace, Tracker, TrackReport, memory_table
from gputop.units import MiB

MAGIC = "gputop"
PREFIX = "[gputop]"
USAGE = (
    "%gputop on | off | brief | full | summary | reclaim\n"
    "  on/off: the line after each cell; brief: one line, full: a table per cell;\n"
    "  summary: the cells so far, the top memory eaters first;\n"
    "  reclaim: gc.collect() and torch.cuda.empty_cache(), then what they gave back"
)

# A cell waits at most this long for each of its start and end reads (normally about a
# millisecond): a hung driver delays each cell by no more. The first cell's probe, which may
# start the driver process, has the API's default time limit.
CELL_TIMEOUT_S = 1.0

_MONITORS: dict[int, CellMonitor] = {}  # id(shell) -> its monitor


@dataclass(slots=True, kw_only=True)
class CellRecord:
    """One cell that ran while the extension was on."""

    number: int | None  # the shell's execution count (In [n])
    source: str  # the cell's first non-empty line
    report: TrackReport
    error: str | None = None  # the exception's class name when the cell raised
    gpu_error: str | None = None  # why the last GPU reading failed, if one did (one line)

    @property
    def name(self) -> str:
        num = "?" if self.number is None else str(self.number)
        text = self.source if len(self.source) <= 32 else self.source[:31] + "~"
        return f"[{num}] {text}" + (" !" if self.error else "")

    def rank(self) -> tuple[int, int, int]:
        """How much memory the cell ate: GPU rise, then torch's, then the host's."""
        r = self.report
        gpu = r.process.peak_bytes - r.process.start_bytes if r.process else 0
        torch = r.torch.allocated.peak_bytes - r.torch.allocated.start_bytes if r.torch else 0
        host = r.host_rss.peak_bytes - r.host_rss.start_bytes if r.host_rss else 0
        return gpu, torch, host


def _mib(value: int) -> str:
    return f"{round(value / MiB)} MiB"


def _signed(value: int) -> str:
    return f"{round(value / MiB):+d} MiB"


def _trace(name: str, t: MemoryTrace) -> str:
    """``GPU0 +4000 MiB (peak +4000 MiB)``: the delta, and how far the peak rose."""
    return f"{name} {_signed(t.delta_bytes)} (peak {_signed(t.peak_bytes - t.start_bytes)})"


def cell_line(record: CellRecord) -> str:
    """The compact line printed after a cell."""
    r = record.report
    num = "?" if record.number is None else str(record.number)
    parts = [f"{PREFIX} In [{num}] {r.duration_s:.2f} s"]
    if r.process is None:
        parts.append("GPU n/a" if record.gpu_error is None else f"GPU n/a: {record.gpu_error}")
    elif not r.process_by_device:
        parts.append("GPU none")
    else:
        gpus = [
            _trace(f"GPU{i}", t) + f" = {_mib(t.end_bytes)}"
            for i, t in sorted(r.process_by_device.items())
        ]
        parts.append(", ".join(gpus))
    parts.append("RSS n/a" if r.host_rss is None else _trace("RSS", r.host_rss))
    if r.torch is not None:
        t = r.torch
        torch = (
            f"torch alloc {_signed(t.allocated.delta_bytes)} = {_mib(t.allocated.end_bytes)}"
            f" (peak {_mib(t.allocated.peak_bytes)}), reserved {_mib(t.reserved.end_bytes)},"
            f" reclaimable {_mib(t.reclaimable_bytes)}"
        )
        overhead = r.context_overhead_bytes
        if overhead is not None:
            torch += f", context {_mib(overhead)}"
        parts.append(torch)
    line = " | ".join(parts)
    if record.gpu_error is not None and r.process is not None:
        line += f" | GPU read failed: {record.gpu_error}"
    if record.error:
        line += f" | raised {record.error}"
    return line


def _first_line(cell: str) -> str:
    for line in cell.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _is_own_magic(cell: str) -> bool:
    """A cell that is only ``%gputop ...``: not recorded, no line."""
    lines = [line.strip() for line in cell.splitlines() if line.strip()]
    return bool(lines) and all(line.split()[0] == f"%{MAGIC}" for line in lines)


@dataclass(slots=True, kw_only=True)
class Reclaimed:
    """What ``%gputop reclaim`` gave back: (before, after) per reading, None where absent."""

    collected: int  # objects gc.collect() found unreachable
    gpu: tuple[int, int] | None  # this process, NVML, all GPUs
    host_rss: tuple[int, int] | None
    torch_reserved: tuple[int, int] | None
    torch_allocated: tuple[int, int] | None

    def line(self) -> str:
        parts = [f"{PREFIX} reclaim: gc.collect() found {self.collected} objects"]
        if self.torch_reserved is None:
            parts.append("torch not in use (no empty_cache)")
        else:
            parts.append(_pair("torch reserved", self.torch_reserved))
        for name, pair in (("GPU (NVML)", self.gpu), ("RSS", self.host_rss)):
            if pair is not None:
                parts.append(_pair(name, pair))
        return " | ".join(parts)


def _pair(name: str, pair: tuple[int, int]) -> str:
    before, after = pair
    return f"{name} {_mib(before)} -> {_mib(after)} ({_signed(after - before)})"


class CellMonitor:
    """The per-cell tracker of one IPython shell (``%load_ext gputop`` makes one)."""

    def __init__(
        self,
        shell: Any,
        *,
        source: Source | None = None,
        interval_s: float = 0.01,
        max_share: float = 0.02,
        file: IO[str] | None = None,
        timeout_s: float = CELL_TIMEOUT_S,
    ) -> None:
        self.shell = shell
        self.source = source  # None: gputop's shared driver connection (use_demo honoured)
        self.interval_s = interval_s  # the sampler's period during a cell
        self.max_share = max_share  # slower reads are spaced out to stay under this share
        self.file = file  # None: sys.stdout at print time (the cell's output in Jupyter)
        self.timeout_s = timeout_s  # each cell's start and end reads' time limit
        self.enabled = True
        self.full = False
        # None: not probed yet (or the driver was down at the last probe); False: no GPU here
        self.gpu: bool | None = None
        self.records: list[CellRecord] = []
        self._tracker: Tracker | None = None
        self._cell = ""
        self._number: int | None = None
        self._gpu_down: str | None = None  # why this cell has no GPU readings (probe failed)

    @property
    def current(self) -> Tracker | None:
        """The tracker of the cell running now, if one is tracked."""
        return self._tracker

    # -- the shell's events -------------------------------------------------------------------
    def pre_run_cell(self, info: Any) -> None:
        self._stop()
        cell = str(getattr(info, "raw_cell", "") or "")
        if not self.enabled or _is_own_magic(cell):
            return
        try:
            self._gpu_down = None
            if self.gpu is None:
                self.gpu = self._probe()
            self._cell = cell
            self._number = getattr(self.shell, "execution_count", None)
            tracker = tracking.track(
                "cell",
                interval_s=self.interval_s,
                source=self.source,
                gpu=bool(self.gpu),
                max_share=self.max_share,
                devices=self.full,  # only the full table shows each GPU's all-process figures
                timeout_s=self.timeout_s,
            )
            tracker.__enter__()
            self._tracker = tracker
        except Exception as e:  # noqa: BLE001 - never disturb the cell
            self._say(f"{PREFIX} not tracking this cell: {e}")

    def post_run_cell(self, result: Any) -> None:
        tracker = self._stop()
        if tracker is None:
            return
        try:
            error = getattr(result, "error_in_exec", None) or getattr(
                result, "error_before_exec", None
            )
            number = getattr(result, "execution_count", None)
            record = CellRecord(
                number=self._number if number is None else number,
                source=_first_line(self._cell),
                report=tracker.report,
                error=None if error is None else type(error).__name__,
                gpu_error=tracker.last_error or self._gpu_down,
            )
            record.report.label = f"In [{record.number}]"
            self.records.append(record)
            self._say(cell_line(record))
            if self.full:
                self._say(record.report.summary())
        except Exception as e:  # noqa: BLE001 - never disturb the shell
            self._say(f"{PREFIX} no line for this cell: {e}")

    def _stop(self) -> Tracker | None:
        tracker, self._tracker = self._tracker, None
        if tracker is not None:
            tracker.__exit__(None, None, None)
        return tracker

    def _probe(self) -> bool | None:
        """Whether NVML answers here; if not, say so and track the host (and torch) only.

        No driver at all: False, said once. A driver process that crashed or did not answer in
        time: None, said on this cell's line (it is restarted; the next cell asks again).
        """
        try:
            api.read_pids(self.source, (os.getpid(),))
        except (DriverCrashed, DriverTimeout) as e:
            self._gpu_down = str(e)
            return None
        except Exception as e:  # noqa: BLE001 - no driver, no GPU: still a useful extension
            self._say(f"{PREFIX} no GPU readings ({e}); tracking host memory only")
            return False
        return True

    def _say(self, text: str) -> None:
        out = self.file if self.file is not None else sys.stdout
        out.write(text + "\n")
        out.flush()

    # -- the commands -------------------------------------------------------------------------
    def magic(self, line: str) -> None:
        """``%gputop on|off|brief|full|summary|reclaim``."""
        words = line.split()
        command = words[0] if words else ""
        if command == "on":
            self.enabled = True
            self._say(f"{PREFIX} on ({'full' if self.full else 'brief'})")
        elif command == "off":
            self.enabled = False
            self._say(f"{PREFIX} off")
        elif command in ("brief", "full"):
            self.full = command == "full"
            self.enabled = True
            self._say(f"{PREFIX} {command}")
        elif command == "summary":
            self._say(self.summary())
        elif command == "reclaim":
            self._say(self.reclaim().line())
        else:
            self._say(USAGE)

    def summary(self) -> str:
        """The cells so far as a table, the top memory eaters first."""
        if not self.records:
            return f"{PREFIX} no cells tracked yet"
        ranked = sorted(self.records, key=lambda r: r.rank(), reverse=True)
        n = len(self.records)
        title = f"{PREFIX} {n} cell{'' if n == 1 else 's'}, the top memory eaters first"
        return title + "\n" + memory_table(((r.name, r.report) for r in ranked), first="cell")

    def reclaim(self) -> Reclaimed:
        """gc.collect(), torch.cuda.empty_cache() when torch is in use; what they gave back."""
        before = self._measure()
        collected = gc.collect()
        cuda = tracking.torch_cuda()
        if cuda is not None:
            cuda.empty_cache()
        after = self._measure()

        def pair(i: int) -> tuple[int, int] | None:
            b, a = before[i], after[i]
            return None if b is None or a is None else (b, a)

        return Reclaimed(
            collected=collected,
            gpu=pair(0),
            host_rss=pair(1),
            torch_reserved=pair(2),
            torch_allocated=pair(3),
        )

    def _measure(self) -> tuple[int | None, int | None, int | None, int | None]:
        """(NVML bytes of this process on all GPUs, RSS, torch reserved, torch allocated)."""
        gpu = None
        if self.gpu is not False:
            try:
                gpu = api.read_pids(self.source, (os.getpid(),)).total_bytes
            except Exception:  # noqa: BLE001 - no GPU reading
                gpu = None
        reserved = allocated = None
        cuda = tracking.torch_cuda()
        if cuda is not None:
            reserved, allocated = int(cuda.memory_reserved()), int(cuda.memory_allocated())
        return gpu, tracking.host_rss_bytes(), reserved, allocated


def monitor_of(shell: Any) -> CellMonitor | None:
    """The monitor ``%load_ext gputop`` installed on this shell, if any."""
    return _MONITORS.get(id(shell))


def load_ipython_extension(shell: Any) -> CellMonitor:
    """Register the cell events and ``%gputop`` on the shell (again: the same monitor)."""
    monitor = _MONITORS.get(id(shell))
    if monitor is not None:
        return monitor
    monitor = CellMonitor(shell)
    shell.events.register("pre_run_cell", monitor.pre_run_cell)
    shell.events.register("post_run_cell", monitor.post_run_cell)
    shell.register_magic_function(monitor.magic, magic_kind="line", magic_name=MAGIC)
    _MONITORS[id(shell)] = monitor
    return monitor


def unload_ipython_extension(shell: Any) -> None:
    """Unregister everything ``load_ipython_extension`` registered."""
    monitor = _MONITORS.pop(id(shell), None)
    if monitor is None:
        return
    monitor._stop()
    shell.events.unregister("pre_run_cell", monitor.pre_run_cell)
    shell.events.unregister("post_run_cell", monitor.post_run_cell)
    shell.magics_manager.magics["line"].pop(MAGIC, None)
