"""The IPython extension: ``%load_ext gputop`` -- which cell ate the GPU memory.

After each cell one line: wall time; for each GPU this process uses, its memory delta and peak
during the cell (NVML's per-process figure), and the GPU's free memory after it; host RSS delta
and peak; and, when PyTorch is already imported and has initialised CUDA, the caching allocator
(allocated, reserved, reclaimable, its own peak during the cell) and the CUDA context overhead
(NVML's figure minus torch's reserved; ``n/a`` when torch's reserved is above NVML's figure).

Each peak says what kind it is: ``exact`` (the kernel's peak RSS, reset at the cell's start; on
a GPU torch uses, torch's own reserved peak, reset per cell) or ``sampled`` (``peak≥``: the
highest reading of a sampler thread; the true peak may be higher). See gputop.tracking.

Each cell runs inside a :class:`gputop.tracking.Tracker`. Its readings are the light ones (the
driver's process lists and each used GPU's free memory, ``Source.pid_memory``); ``full`` also
takes whole snapshots for its table. The driver is read through gputop.api, so in a process of
its own: a driver that crashes or hangs gives the cell one line saying so (``GPU n/a: DRIVER
CRASHED (...)``), never a dead kernel, and the next cell reads again once the driver process is
back. ``use_demo()``/``use_driver()`` after the first cell take effect on the next one.

``%gputop on|off|brief|full|summary|reclaim|warn|experiment|preload`` (reclaim, experiment
and preload: gputop.reclaim and gputop.experiment); the cells' figures as data:
``CellRecord.as_dict()``, ``CellMonitor.as_dicts()``, :func:`records`.
Nothing here imports IPython or torch: the shell is handed in, torch is read from sys.modules.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from typing import IO, Any

from gputop import api, experiment, reclaim, tracking, units
from gputop.engine.source import Source
from gputop.errors import DriverCrashed, DriverTimeout
from gputop.tracking import PEAK_EXACT, MemoryTrace, TorchMemory, Tracker, TrackReport, memory_table
from gputop.units import GiB, KiB, MiB, TiB

MAGIC = "gputop"
PREFIX = "[gputop]"
USAGE = (
    "%gputop on | off | brief | full | summary | reclaim | warn [SIZE | N% | off]\n"
    "        | experiment ... | preload [--import-torch]\n"
    "  on/off: the line after each cell; brief: one line, full: a table per cell;\n"
    "  summary: the cells so far, the top memory eaters first;\n"
    "  reclaim: gc.collect(), the frames a failed cell left, torch.cuda.empty_cache(), then\n"
    "    what they gave back;\n"
    "  warn 2GiB | warn 10% | warn off: a warning after a cell that leaves a GPU it uses\n"
    "    with less free memory than that (warn alone: the setting now);\n"
    f"  {experiment.USAGE.removeprefix('%gputop ')}:\n"
    "    memory over cells; the variables it made are deleted at its end;\n"
    "  preload: create torch's CUDA context now, so no cell is charged for it"
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

    def as_dict(self) -> dict[str, Any]:
        """The cell's figures as one flat dict: bytes, seconds, ``None`` where not measured.

        Keys (every record has these; ``peak`` is the highest value during the cell, ``rise``
        how far it rose above the cell's start, the line's ``peak +N``):
        ``number``, ``source``, ``duration_s``, ``error``, ``gpu_error``;
        ``gpu_delta_bytes``, ``gpu_end_bytes``, ``gpu_peak_bytes``, ``gpu_peak_rise_bytes``,
        ``gpu_peak_kind`` (this process on all GPUs; kinds ``"exact"``/``"sampled"``);
        ``host_rss_delta_bytes``, ``host_rss_end_bytes``, ``host_rss_peak_bytes``,
        ``host_rss_peak_rise_bytes``, ``host_peak_kind``;
        ``torch_allocated_delta_bytes``, ``torch_allocated_end_bytes``,
        ``torch_allocated_peak_bytes``, ``torch_reserved_end_bytes``,
        ``torch_reserved_peak_bytes``, ``torch_reclaimable_bytes`` (all torch's devices),
        ``context_overhead_bytes``.
        For each GPU ``i`` (NVML index) the process used: ``gpu{i}_delta_bytes``,
        ``gpu{i}_end_bytes``, ``gpu{i}_peak_bytes``, ``gpu{i}_peak_rise_bytes``,
        ``gpu{i}_peak_kind``, ``gpu{i}_free_bytes``, ``gpu{i}_total_bytes`` (the GPU's, all
        processes, after the cell) and, where torch uses it, ``gpu{i}_torch_reclaimable_bytes``.
        """
        r = self.report
        out: dict[str, Any] = {
            "number": self.number,
            "source": self.source,
            "duration_s": r.duration_s,
            "error": self.error,
            "gpu_error": self.gpu_error,
        }
        out |= _trace_keys("gpu", r.process)
        out["gpu_peak_kind"] = None if r.process is None else r.process_peak_kind
        out |= _trace_keys("host_rss", r.host_rss)
        out["host_peak_kind"] = None if r.host_rss is None else r.host_peak_kind
        t = r.torch
        out |= {
            "torch_allocated_delta_bytes": None if t is None else t.allocated.delta_bytes,
            "torch_allocated_end_bytes": None if t is None else t.allocated.end_bytes,
            "torch_allocated_peak_bytes": None if t is None else t.allocated.peak_bytes,
            "torch_reserved_end_bytes": None if t is None else t.reserved.end_bytes,
            "torch_reserved_peak_bytes": None if t is None else t.reserved.peak_bytes,
            "torch_reclaimable_bytes": None if t is None else t.reclaimable_bytes,
            "context_overhead_bytes": r.context_overhead_bytes,
        }
        on_gpu = _torch_on_gpu(r)
        for i, trace in sorted(r.process_by_device.items()):
            out |= _trace_keys(f"gpu{i}", trace)
            out[f"gpu{i}_peak_kind"] = r.process_peak_kinds.get(i)
            out[f"gpu{i}_free_bytes"] = r.gpu_free_bytes.get(i)
            out[f"gpu{i}_total_bytes"] = r.gpu_total_bytes.get(i)
            if i in on_gpu:
                out[f"gpu{i}_torch_reclaimable_bytes"] = on_gpu[i].reclaimable_bytes
        return out


def _trace_keys(name: str, t: MemoryTrace | None) -> dict[str, int | None]:
    return {
        f"{name}_delta_bytes": None if t is None else t.delta_bytes,
        f"{name}_end_bytes": None if t is None else t.end_bytes,
        f"{name}_peak_bytes": None if t is None else t.peak_bytes,
        f"{name}_peak_rise_bytes": None if t is None else t.peak_bytes - t.start_bytes,
    }


def _torch_on_gpu(report: TrackReport) -> dict[int, TorchMemory]:
    """torch's figures per device, keyed by NVML index (devices NVML does not map: left out)."""
    return {
        report.cuda_to_gpu[d]: t
        for d, t in report.torch_by_device.items()
        if d in report.cuda_to_gpu
    }


def _gib(value: int) -> str:
    return f"{value / GiB:.1f} GiB"


def _trace(name: str, t: MemoryTrace, kind: str) -> str:
    """``GPU0 +4000 MiB (peak +4000 MiB exact)``: the delta, how far the peak rose, its kind.

    A sampled peak is a lower bound: ``(peak≥ +4000 MiB sampled)``.
    """
    at_least = "" if kind == PEAK_EXACT else "≥"
    rise = units.mib_signed(t.peak_bytes - t.start_bytes)
    return f"{name} {units.mib_signed(t.delta_bytes)} (peak{at_least} {rise} {kind})"


def _gpu_part(r: TrackReport, index: int, trace: MemoryTrace, torch: dict[int, TorchMemory]) -> str:
    text = _trace(f"GPU{index}", trace, r.process_peak_kinds.get(index, "sampled"))
    text += f" = {units.mib_rounded(trace.end_bytes)}"
    free = r.gpu_free_bytes.get(index)
    if free is not None:
        text += f", {_gib(free)} free"
    if len(r.torch_by_device) > 1 and index in torch:  # one device: the torch part says it
        text += f", torch reclaimable {units.mib_rounded(torch[index].reclaimable_bytes)}"
    return text


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
        torch = _torch_on_gpu(r)
        gpus = [_gpu_part(r, i, t, torch) for i, t in sorted(r.process_by_device.items())]
        parts.append("; ".join(gpus))
    parts.append("RSS n/a" if r.host_rss is None else _trace("RSS", r.host_rss, r.host_peak_kind))
    if r.torch is not None:
        t = r.torch
        mib, signed = units.mib_rounded, units.mib_signed
        text = (
            f"torch alloc {signed(t.allocated.delta_bytes)} = {mib(t.allocated.end_bytes)}"
            f" (peak {mib(t.allocated.peak_bytes)}), reserved {mib(t.reserved.end_bytes)},"
            f" reclaimable {mib(t.reclaimable_bytes)}"
        )
        overhead = r.context_overhead_bytes
        if overhead is not None:
            text += f", context {units.mib_rounded(overhead)}"
        elif r.torch_above_nvml:
            text += ", context n/a: torch reserved > NVML"
        parts.append(text)
    line = " | ".join(parts)
    if record.gpu_error is not None and r.process is not None:
        line += f" | GPU read failed: {record.gpu_error}"
    if record.error:
        line += f" | raised {record.error}"
    return line


_SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([kmgt]i?b?|b)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": KiB, "m": MiB, "g": GiB, "t": TiB}


@dataclass(frozen=True, slots=True)
class Threshold:
    """``%gputop warn``: warn when a GPU has less free memory than this (bytes or a share)."""

    bytes_: int | None = None
    percent: float | None = None

    def under(self, free_bytes: int, total_bytes: int | None) -> bool:
        if self.bytes_ is not None:
            return free_bytes < self.bytes_
        if self.percent is not None and total_bytes:
            return free_bytes * 100 < self.percent * total_bytes
        return False

    def text(self) -> str:
        if self.bytes_ is not None:
            return _gib(self.bytes_)
        return f"{self.percent:g}%"


def parse_threshold(text: str) -> Threshold | None:
    """``2GiB``, ``500MiB``, ``2G``, ``10%`` -> a Threshold; ``off`` -> None; else ValueError.

    Sizes are binary whatever the spelling (``GB`` is taken as GiB, as nvidia-smi's MiB are).
    """
    word = text.strip()
    if word.lower() == "off":
        return None
    if word.endswith("%"):
        try:
            share = float(word[:-1])
        except ValueError:
            share = -1.0
        if not 0 < share <= 100:
            raise ValueError(f"a share is 0-100%, got {word!r}")
        return Threshold(percent=share)
    m = _SIZE.fullmatch(word)
    if m is None:
        raise ValueError(f"expected a size (2GiB, 500MiB), a share (10%) or off, got {word!r}")
    unit = (m[2] or "").lower()[:1]
    return Threshold(bytes_=int(float(m[1]) * _UNITS[unit]))


def low_memory_warnings(record: CellRecord, threshold: Threshold | None) -> list[str]:
    """One line per GPU the cell's process uses whose free memory is under ``threshold``."""
    if threshold is None:
        return []
    r = record.report
    return [
        f"{PREFIX} warning: GPU{i} has {_gib(free)} free after In [{record.number}],"
        f" under {threshold.text()} (%gputop warn)"
        for i, free in sorted(r.gpu_free_bytes.items())
        if threshold.under(free, r.gpu_total_bytes.get(i))
    ]


def _first_line(cell: str) -> str:
    for line in cell.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _is_own_magic(cell: str) -> bool:
    """A cell that is only ``%gputop ...``: not recorded, no line."""
    lines = [line.strip() for line in cell.splitlines() if line.strip()]
    return bool(lines) and all(line.split()[0] == f"%{MAGIC}" for line in lines)


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
        self.warn: Threshold | None = None  # %gputop warn: a GPU's free memory under this
        self._generation = api.generation()  # use_demo()/use_driver() since: probe again
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
            if self.source is None and api.generation() != self._generation:
                self._generation = api.generation()  # another driver or demo: probe it
                self.gpu = None
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
            for warning in low_memory_warnings(record, self.warn):
                self._say(warning)
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
        """``%gputop on|off|brief|full|summary|reclaim|warn|experiment|preload``."""
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
        elif command == "experiment":
            self._say(
                experiment.magic(self.shell, self.source, words[1:], gpu=self.gpu is not False)
            )
        elif command == "preload":
            self._say(reclaim.preload(import_torch="--import-torch" in words[1:]))
        elif command == "warn":
            self._warn(words[1:])
        else:
            self._say(USAGE)

    def _warn(self, words: list[str]) -> None:
        if not words:
            now = "off" if self.warn is None else f"under {self.warn.text()} free"
            self._say(f"{PREFIX} warn: {now}")
            return
        try:
            self.warn = parse_threshold("".join(words))
        except ValueError as e:
            self._say(f"{PREFIX} warn: {e}")
            return
        if self.warn is None:
            self._say(f"{PREFIX} warn off")
        else:
            self._say(
                f"{PREFIX} warn when a GPU this process uses has under {self.warn.text()} free"
            )

    def as_dicts(self) -> list[dict[str, Any]]:
        """Every recorded cell as :meth:`CellRecord.as_dict` (``pandas.DataFrame(...)`` of it)."""
        return [r.as_dict() for r in self.records]

    def summary(self) -> str:
        """The cells so far as a table, the top memory eaters first."""
        if not self.records:
            return f"{PREFIX} no cells tracked yet"
        ranked = sorted(self.records, key=lambda r: r.rank(), reverse=True)
        n = len(self.records)
        title = f"{PREFIX} {n} cell{'' if n == 1 else 's'}, the top memory eaters first"
        return title + "\n" + memory_table(((r.name, r.report) for r in ranked), first="cell")

    def reclaim(self) -> reclaim.Reclaimed:
        """gc, the exception frames IPython keeps, torch's cache: what came back
        (gputop.reclaim)."""
        return reclaim.reclaim(
            self.shell, self.source, gpu=self.gpu is not False, timeout_s=self.timeout_s
        )


def monitor_of(shell: Any) -> CellMonitor | None:
    """The monitor ``%load_ext gputop`` installed on this shell, if any."""
    return _MONITORS.get(id(shell))


def records(shell: Any | None = None) -> list[dict[str, Any]]:
    """The recorded cells as dicts (bytes, seconds; keys: :meth:`CellRecord.as_dict`).

    ``shell``: whose cells; None: the one shell with ``%load_ext gputop``. One line to a
    DataFrame: ``pandas.DataFrame(gputop.cell_records())``.
    """
    if shell is not None:
        monitor = monitor_of(shell)
        if monitor is None:
            raise ValueError("gputop is not loaded in this shell: run %load_ext gputop first")
        return monitor.as_dicts()
    if not _MONITORS:
        raise ValueError("gputop is not loaded in any shell: run %load_ext gputop first")
    if len(_MONITORS) > 1:
        raise ValueError(f"gputop is loaded in {len(_MONITORS)} shells: pass shell=")
    (monitor,) = _MONITORS.values()
    return monitor.as_dicts()


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
