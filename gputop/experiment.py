"""An experiment spanning cells: what it consumed, what its end gave back, what it still holds.

``%gputop experiment start [NAME]`` (or ``gputop.Experiment(NAME)``, also a context manager)
notes the names in the namespace and the memory now; ``%gputop experiment end`` deletes the
variables created since (except those kept), releases what Python, IPython and torch still hold
(:func:`gputop.reclaim.release`), and reports for each reading (this process's GPU memory per
GPU by NVML, host RSS, torch allocated and reserved per device): consumed (before the cleanup -
start), reclaimed (before the cleanup - after) and still held (after - start), naming the
largest survivors. What ipyexperiments' IPyExperiments does, with the exception frames IPython
keeps and its output cache released too.

Nothing here imports IPython or torch: the shell is handed in (or found through an IPython that
is already imported), torch is read from sys.modules.
"""

from __future__ import annotations

import inspect
import re
import sys
import time
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any

from gputop import reclaim, units
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.source import Source
from gputop.errors import GputopError

PREFIX = reclaim.PREFIX
USAGE = (
    "%gputop experiment start [NAME] [--no-preload] | keep NAME... | end [--keep NAME,...] | status"
)
SURVIVORS_SHOWN = 5  # the largest survivors a report names

# IPython's own names: its history (_i, _ii, _i7), its output cache (_, __, ___, _7).
_SHELL_NAME = re.compile(r"_{1,3}|_i{1,3}|_i?\d+")

_ACTIVE: dict[int, Experiment] = {}  # id(namespace) -> the experiment running in it


class ExperimentError(GputopError):
    """An experiment used out of turn: one already runs in this namespace, or it has ended."""


@dataclass(slots=True, kw_only=True)
class Reading:
    """One reading at the start, just before the end's cleanup, and after it (bytes)."""

    start_bytes: int | None
    before_cleanup_bytes: int | None
    end_bytes: int | None

    @property
    def consumed_bytes(self) -> int | None:
        """What the experiment took: before the cleanup - start."""
        return _minus(self.before_cleanup_bytes, self.start_bytes)

    @property
    def reclaimed_bytes(self) -> int | None:
        """What the cleanup gave back: before the cleanup - after."""
        return _minus(self.before_cleanup_bytes, self.end_bytes)

    @property
    def still_held_bytes(self) -> int | None:
        """What the experiment still holds: after - start."""
        return _minus(self.end_bytes, self.start_bytes)


def _minus(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a - b


@dataclass(slots=True, kw_only=True)
class Survivor:
    """A variable the experiment created that its end did not delete."""

    name: str
    size_bytes: int
    kind: str  # its type, and a tensor's device: "torch.Tensor on cuda:0", "bytearray"


@dataclass(slots=True, kw_only=True)
class ExperimentReport:
    """What an experiment consumed, what its end reclaimed, what it still holds."""

    name: str
    duration_s: float
    deleted: tuple[str, ...]  # the variables its end deleted
    kept: tuple[str, ...]  # the variables it created and kept (asked, modules, itself)
    not_found: tuple[str, ...]  # names asked to be kept that were not there
    outputs_dropped: int  # IPython output-cache entries (Out[n], _n) dropped
    survivors: tuple[Survivor, ...]  # the largest kept variables, largest first
    readings: dict[str, Reading]  # by name: see reclaim.MemoryNow.flat()
    released: reclaim.Released
    gpu_error: str | None = None  # why a GPU reading is missing, if one is
    preload: str | None = None  # the CUDA preload's line at the start, if one was made

    def as_dict(self) -> dict[str, Any]:
        """The report as flat data, in bytes and seconds.

        ``name``, ``duration_s``, ``deleted``/``kept``/``not_found`` (lists of names),
        ``outputs_dropped``, ``objects_collected``, ``frames_cleared``, ``torch_cache_emptied``,
        ``gpu_error``, ``survivors`` (a list of ``{"name", "size_bytes", "kind"}``), and for each
        reading R (``gpu``: NVML, this process on all GPUs; ``gpu{i}``: on NVML GPU i;
        ``host_rss``; ``torch_allocated``/``torch_reserved``: all devices;
        ``cuda{d}_allocated``/``cuda{d}_reserved``: torch device d): ``R_start_bytes``,
        ``R_before_cleanup_bytes``, ``R_end_bytes``, ``R_consumed_bytes``,
        ``R_reclaimed_bytes``, ``R_still_held_bytes`` (None where not read).
        """
        out: dict[str, Any] = {
            "name": self.name,
            "duration_s": self.duration_s,
            "deleted": list(self.deleted),
            "kept": list(self.kept),
            "not_found": list(self.not_found),
            "outputs_dropped": self.outputs_dropped,
            "objects_collected": self.released.collected,
            "frames_cleared": self.released.frames_cleared,
            "torch_cache_emptied": self.released.torch_emptied,
            "gpu_error": self.gpu_error,
            "survivors": [
                {"name": s.name, "size_bytes": s.size_bytes, "kind": s.kind} for s in self.survivors
            ],
        }
        for key, r in self.readings.items():
            out[f"{key}_start_bytes"] = r.start_bytes
            out[f"{key}_before_cleanup_bytes"] = r.before_cleanup_bytes
            out[f"{key}_end_bytes"] = r.end_bytes
            out[f"{key}_consumed_bytes"] = r.consumed_bytes
            out[f"{key}_reclaimed_bytes"] = r.reclaimed_bytes
            out[f"{key}_still_held_bytes"] = r.still_held_bytes
        return out

    def text(self) -> str:
        """The report as ``%gputop experiment end`` prints it (MiB)."""
        title = f"{PREFIX} experiment{_quoted(self.name)} ended after {self.duration_s:.2f} s:"
        title += f" deleted {len(self.deleted)}{_names(self.deleted)}"
        title += f", kept {len(self.kept)}{_names(self.kept)}"
        if self.not_found:
            title += f" (not found: {', '.join(self.not_found)})"
        rows = [["", "start", "consumed", "reclaimed", "still held"]]
        for key, label in _rows(self.readings):
            r = self.readings[key]
            rows.append(
                [
                    label,
                    units.mib_rounded(r.start_bytes),
                    units.mib_signed(r.consumed_bytes),
                    units.mib_rounded(r.reclaimed_bytes),
                    units.mib_signed(r.still_held_bytes),
                ]
            )
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = [title]
        for row in rows:
            cells = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
            lines.append("  ".join([row[0].ljust(widths[0]), *cells]))
        if self.gpu_error is not None:
            lines.append(f"GPU n/a: {self.gpu_error}")
        released = self.released.text()
        if self.outputs_dropped:
            released += f", {self.outputs_dropped} cached outputs (Out[n]) dropped"
        lines.append(f"released: {released}")
        if self.survivors:
            lines.append(
                "largest survivors: "
                + ", ".join(
                    f"{s.name} {units.mib_rounded(s.size_bytes)} ({s.kind})" for s in self.survivors
                )
            )
        return "\n".join(line.rstrip() for line in lines)

    def __str__(self) -> str:
        return self.text()


def _quoted(name: str) -> str:
    return f" {name!r}" if name else ""


def _names(names: tuple[str, ...], most: int = 8) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:most])
    return f" ({shown}{f', +{len(names) - most} more' if len(names) > most else ''})"


_LABELS = {
    "gpu": "GPU (NVML)",
    "host_rss": "host RSS",
    "torch_allocated": "torch allocated",
    "torch_reserved": "torch reserved",
}


def _rows(readings: dict[str, Reading]) -> list[tuple[str, str]]:
    """(key, label) of the rows a report shows: the totals; each GPU and torch device too when
    the process uses more than one (a GPU it never used is left out)."""
    gpus = [k for k in readings if re.fullmatch(r"gpu\d+", k) and _used(readings[k])]
    cudas = sorted({k.split("_")[0] for k in readings if re.fullmatch(r"cuda\d+_\w+", k)})
    out: list[tuple[str, str]] = []
    if "gpu" in readings:
        out.append(("gpu", _LABELS["gpu"]))
        if len(gpus) > 1:
            out += [(k, f"  GPU{k[3:]}") for k in gpus]
    if "host_rss" in readings:
        out.append(("host_rss", _LABELS["host_rss"]))
    for what in ("allocated", "reserved"):
        key = f"torch_{what}"
        if key in readings:
            out.append((key, _LABELS[key]))
            if len(cudas) > 1:
                out += [(f"{c}_{what}", f"  {c}") for c in cudas if f"{c}_{what}" in readings]
    return out


def _used(r: Reading) -> bool:
    return any(v for v in (r.start_bytes, r.before_cleanup_bytes, r.end_bytes))


def size_of(value: Any) -> tuple[int, str]:
    """(bytes, kind) of one variable: a tensor's storage (``element_size() * nelement()``) and
    its device, an array's ``nbytes``, a bytes-like's length; else ``sys.getsizeof`` (shallow:
    a list's items are not counted)."""
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__name__}"
    try:
        if kind.__module__.startswith("torch") and hasattr(value, "element_size"):
            size = int(value.element_size()) * int(value.nelement())
            return size, f"torch.Tensor on {value.device}"
        if isinstance(value, (bytes, bytearray)):
            return len(value), name
        if isinstance(value, memoryview):
            return value.nbytes, name
        nbytes = getattr(value, "nbytes", None)
        if isinstance(nbytes, int):
            return nbytes, name
    except Exception:  # noqa: BLE001 - an odd object: its shallow size
        pass
    try:
        return sys.getsizeof(value), f"{name}, shallow"
    except Exception:  # noqa: BLE001 - sizeof itself failed
        return 0, name


def _readings(
    start: reclaim.MemoryNow, before: reclaim.MemoryNow, after: reclaim.MemoryNow
) -> dict[str, Reading]:
    """The three readings side by side; a torch counter missing at one time was 0 then (the
    allocator held nothing on that device); a missing GPU or RSS reading stays unknown."""
    flats = [m.flat() for m in (start, before, after)]
    keys = list(dict.fromkeys(k for f in flats for k in f))

    def get(f: dict[str, int], key: str) -> int | None:
        if key in f:
            return f[key]
        return 0 if key.startswith(("torch_", "cuda")) else None

    return {
        k: Reading(
            start_bytes=get(flats[0], k),
            before_cleanup_bytes=get(flats[1], k),
            end_bytes=get(flats[2], k),
        )
        for k in keys
    }


def _left_alone(value: Any, experiment: Experiment) -> bool:
    """A new name an experiment's end neither deletes nor reports: a module, the experiment."""
    return value is experiment or isinstance(value, ModuleType)


def _find_shell() -> Any | None:
    """The running IPython shell, only when IPython is already imported (never imported here)."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    try:
        return None if get is None else get()
    except Exception:  # noqa: BLE001 - a half-imported IPython: no shell
        return None


def active(namespace: MutableMapping[str, Any]) -> Experiment | None:
    """The experiment running in ``namespace``, if one is."""
    e = _ACTIVE.get(id(namespace))
    return e if e is not None and e.namespace is namespace else None


class Experiment:
    """An experiment over cells (or a block): ``e = gputop.Experiment("finetune")`` ...
    ``e.end()``, or ``with gputop.Experiment("finetune") as e:``.

    ``namespace``: where its variables live; by default the IPython shell's ``user_ns``, else
    the caller's globals. Starting notes the names there and measures; when torch is imported
    its CUDA context is created first (``preload=False``: not), so the experiment is not charged
    for it. ``keep``: names :meth:`end` does not delete. ``source``, ``gpu``, ``timeout_s``: as
    for :func:`gputop.track` (``gpu=False``: no NVML reads). One experiment per namespace at a
    time: starting a second raises :class:`ExperimentError`. ``show``: a ``with`` block prints
    the report at its end (``e.report`` holds it).
    """

    def __init__(
        self,
        name: str = "",
        *,
        namespace: MutableMapping[str, Any] | None = None,
        source: Source | None = None,
        keep: Iterable[str] = (),
        gpu: bool = True,
        preload: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        shell: Any | None = None,
        show: bool = True,
    ) -> None:
        self.name = name
        self.shell = shell if shell is not None else _find_shell()
        if namespace is None:
            namespace = getattr(self.shell, "user_ns", None)
        if namespace is None:
            frame = inspect.currentframe()
            caller = frame.f_back if frame is not None else None
            namespace = caller.f_globals if caller is not None else {}
            del frame, caller
        self.namespace: MutableMapping[str, Any] = namespace
        running = active(namespace)
        if running is not None:
            raise ExperimentError(
                f"experiment{_quoted(running.name)} is already running here"
                f"{running._since()}; end it first"
            )
        self.source = source
        self.gpu = gpu
        self.timeout_s = timeout_s
        self.show = show
        self.report: ExperimentReport | None = None  # set by end()
        self._kept: list[str] = list(dict.fromkeys(keep))
        self.preload_line: str | None = None
        if preload and "torch" in sys.modules:
            self.preload_line = reclaim.preload()
        self._start_cell: int | None = getattr(self.shell, "execution_count", None)
        self._names = frozenset(namespace)
        self._start = reclaim.measure(source, gpu=gpu, timeout_s=timeout_s)
        self._t0 = time.monotonic()
        _ACTIVE[id(namespace)] = self

    def _since(self) -> str:
        return "" if self._start_cell is None else f" (since In [{self._start_cell}])"

    @property
    def running(self) -> bool:
        """Started and not ended yet."""
        return self.report is None

    def keep(self, *names: str) -> None:
        """Names the end must not delete (they may be created later)."""
        self._kept = list(dict.fromkeys([*self._kept, *names]))

    def created(self) -> list[str]:
        """The variables created in the namespace since the start (IPython's own names aside)."""
        return [
            n for n in list(self.namespace) if n not in self._names and not _SHELL_NAME.fullmatch(n)
        ]

    def status(self) -> str:
        """One line: how long it has run, the variables created, the memory taken so far."""
        now = reclaim.measure(self.source, gpu=self.gpu, timeout_s=self.timeout_s)
        readings = _readings(self._start, now, now)
        parts = [
            f"{_LABELS[key]} {units.mib_signed(readings[key].consumed_bytes)}"
            for key in ("gpu", "host_rss", "torch_allocated")
            if key in readings
        ]
        created = tuple(self.created())
        line = (
            f"{PREFIX} experiment{_quoted(self.name)} running for"
            f" {time.monotonic() - self._t0:.2f} s{self._since()}:"
            f" {len(created)} new variables{_names(created)}"
        )
        if parts:
            line += "; so far " + ", ".join(parts)
        if self._kept:
            line += f"; keeping {', '.join(self._kept)}"
        return line

    def end(self, keep: Iterable[str] = ()) -> ExperimentReport:
        """Delete the variables created since the start (except those kept), release, measure:
        the report (also in ``self.report``)."""
        if self.report is not None:
            raise ExperimentError(f"experiment{_quoted(self.name)} has already ended")
        self.keep(*keep)
        duration_s = time.monotonic() - self._t0
        before = reclaim.measure(self.source, gpu=self.gpu, timeout_s=self.timeout_s)
        deleted: list[str] = []
        kept: list[str] = []
        for n in self.created():
            # Modules hold nothing (sys.modules keeps them); the experiment itself stays so
            # that ``with Experiment() as e`` still has ``e.report`` afterwards.
            if _left_alone(self.namespace.get(n), self):
                continue
            if n in self._kept:
                kept.append(n)
                continue
            try:
                del self.namespace[n]
                deleted.append(n)
            except Exception:  # noqa: BLE001 - a namespace that refuses: it survives
                kept.append(n)
        outputs = self._drop_outputs()
        released = reclaim.release(self.shell)
        after = reclaim.measure(self.source, gpu=self.gpu, timeout_s=self.timeout_s)
        survivors = sorted(
            (
                Survivor(name=n, size_bytes=size, kind=kind)
                for n in kept
                if n in self.namespace
                for size, kind in [size_of(self.namespace[n])]
            ),
            key=lambda s: s.size_bytes,
            reverse=True,
        )
        errors = [m.gpu_error for m in (self._start, before, after) if m.gpu_error]
        self.report = ExperimentReport(
            name=self.name,
            duration_s=duration_s,
            deleted=tuple(deleted),
            kept=tuple(kept),
            not_found=tuple(n for n in self._kept if n not in self.namespace),
            outputs_dropped=outputs,
            survivors=tuple(survivors[:SURVIVORS_SHOWN]),
            readings=_readings(self._start, before, after),
            released=released,
            gpu_error=errors[-1] if errors else None,
            preload=self.preload_line,
        )
        if active(self.namespace) is self:
            del _ACTIVE[id(self.namespace)]
        return self.report

    def _drop_outputs(self) -> int:
        """Drop IPython's cached outputs of the cells run since the start (``Out[n]``, ``_n``,
        ``_``/``__``/``___``): they keep a displayed tensor alive after its name is deleted."""
        shell = self.shell
        if shell is None or getattr(shell, "user_ns", None) is not self.namespace:
            return 0
        out = self.namespace.get("_oh")
        if not isinstance(out, dict) or self._start_cell is None:
            return 0
        hidden = getattr(shell, "user_ns_hidden", {})
        dropped = [out.pop(n) for n in [n for n in out if n >= self._start_cell]]
        for n in range(self._start_cell, int(getattr(shell, "execution_count", 0)) + 1):
            self.namespace.pop(f"_{n}", None)
            hidden.pop(f"_{n}", None)
        hook = getattr(shell, "displayhook", None)
        ids = {id(v) for v in dropped}
        for unders in ("_", "__", "___"):
            if hook is not None and id(getattr(hook, unders, None)) in ids:
                setattr(hook, unders, "")
            for names in (self.namespace, hidden):  # push() puts them in both
                if id(names.get(unders)) in ids:
                    names[unders] = ""
        result = getattr(shell, "last_execution_result", None)
        if result is not None and id(getattr(result, "result", None)) in ids:
            result.result = None
        return len(dropped)

    def __enter__(self) -> Experiment:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.report is None:
            report = self.end()
            if self.show:
                print(report.text())


# -- %gputop experiment ---------------------------------------------------------------------------
def _name_list(words: Iterable[str]) -> list[str]:
    """``a,b c`` -> [a, b, c]."""
    return [n for w in words for n in w.split(",") if n]


@dataclass(slots=True)
class _Parsed:
    command: str
    names: list[str] = field(default_factory=list)
    preload: bool = True


def _parse(words: list[str]) -> _Parsed | None:
    if words and words[0] == "experiment":
        words = words[1:]
    if not words:
        return None
    command, rest = words[0], words[1:]
    if command == "start":
        preload = "--no-preload" not in rest
        rest = [w for w in rest if w != "--no-preload"]
        if any(w.startswith("-") for w in rest):
            return None
        return _Parsed("start", [" ".join(rest)], preload)
    if command == "keep" and rest and not any(w.startswith("-") for w in rest):
        return _Parsed("keep", _name_list(rest))
    if command == "end":
        if not rest:
            return _Parsed("end")
        if rest[0].startswith("--keep="):
            rest = [rest[0].split("=", 1)[1], *rest[1:]]
        elif rest[0] == "--keep" and len(rest) > 1:
            rest = rest[1:]
        else:
            return None
        names = _name_list(rest)
        return None if not names or any(n.startswith("-") for n in names) else _Parsed("end", names)
    if command == "status" and not rest:
        return _Parsed("status")
    return None


def magic(shell: Any, source: Source | None, words: list[str], *, gpu: bool) -> str:
    """``%gputop experiment start [NAME] | keep NAME... | end [--keep NAME,...] | status``: the
    text to print. ``words`` are what follows ``%gputop experiment``."""
    parsed = _parse(words)
    if parsed is None:
        return USAGE
    namespace = shell.user_ns
    running = active(namespace)
    if parsed.command == "start":
        if running is not None:
            return (
                f"{PREFIX} experiment{_quoted(running.name)} is already running"
                f"{running._since()}: end it first (%gputop experiment end)"
            )
        e = Experiment(
            parsed.names[0],
            namespace=namespace,
            source=source,
            gpu=gpu,
            preload=parsed.preload,
            shell=shell,
            show=False,
        )
        line = f"{PREFIX} experiment{_quoted(e.name)} started"
        start = e._start.flat()
        parts = [
            f"{_LABELS[k]} {units.mib_rounded(start[k])}" for k in ("gpu", "host_rss") if k in start
        ]
        if "torch_allocated" in start:
            parts.append(f"torch allocated {units.mib_rounded(start['torch_allocated'])}")
        if e._start.gpu_error is not None:
            parts.append(f"GPU n/a: {e._start.gpu_error}")
        line += ": " + ", ".join(parts) if parts else ""
        if e.preload_line is not None:
            line += "\n" + e.preload_line
        return line
    if running is None:
        return f"{PREFIX} no experiment running (start one: %gputop experiment start [NAME])"
    if parsed.command == "keep":
        running.keep(*parsed.names)
        return f"{PREFIX} experiment{_quoted(running.name)} keeps {', '.join(running._kept)}"
    if parsed.command == "status":
        return running.status()
    return running.end(parsed.names).text()
