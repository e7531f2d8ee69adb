"""Giving memory back in a notebook: ``%gputop reclaim``, an experiment's end, the CUDA preload.

:func:`release` frees what Python and IPython keep without being asked: objects in reference
cycles (``gc.collect()``), the frames of the last exception (IPython keeps the traceback in
``sys.last_traceback``/``last_value``/``last_exc``, its traceback formatter and the last
execution result: every local of every frame the exception passed through stays alive, a failed
training step's activations included), and PyTorch's cache (``torch.cuda.empty_cache()``).
:func:`measure` reads what this process holds now; :func:`reclaim` is measure, release, measure.
:func:`preload` creates PyTorch's CUDA context up front, so that the first tracked cell (or an
experiment) is not charged for it.

Nothing here imports IPython or torch: the shell is handed in, torch is read from sys.modules
(only :func:`preload` with ``import_torch=True`` imports it, because the user asked).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
import time
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

from gputop import api, host_memory, torch_memory, units
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.sanitize import clean
from gputop.engine.source import Source
from gputop.torch_memory import DeviceNow

PREFIX = "[gputop]"

# Code flags of generator-like functions: their frame belongs to a generator object.
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x100 | 0x200  # GENERATOR, COROUTINE, ITERABLE_, ASYNC_GENERATOR
_OPTIMIZED = 0x1  # a function's frame (its locals are not a namespace's dict)


@dataclass(slots=True, kw_only=True)
class MemoryNow:
    """What this process holds now. None (or empty) where there is no such reading."""

    gpu_by_device_bytes: dict[int, int] | None  # NVML index -> this process's bytes (NVML)
    gpu_error: str | None  # why there is no GPU reading (one line); None when read or not asked
    host_rss_bytes: int | None
    torch: dict[int, DeviceNow] = field(default_factory=dict)  # CUDA index -> counters
    taken_at_mono: float = 0.0

    @property
    def gpu_bytes(self) -> int | None:
        """This process on all GPUs (NVML)."""
        return None if self.gpu_by_device_bytes is None else sum(self.gpu_by_device_bytes.values())

    @property
    def torch_allocated_bytes(self) -> int | None:
        """Tensors on all devices; None when torch is not in use."""
        return sum(t.allocated_bytes for t in self.torch.values()) if self.torch else None

    @property
    def torch_reserved_bytes(self) -> int | None:
        """The allocator's memory on all devices; None when torch is not in use."""
        return sum(t.reserved_bytes for t in self.torch.values()) if self.torch else None

    def flat(self) -> dict[str, int]:
        """Every reading by name: ``gpu`` (NVML, all GPUs), ``gpu{i}`` (NVML index i),
        ``host_rss``, ``torch_allocated``, ``torch_reserved`` (all devices), ``cuda{d}_allocated``
        and ``cuda{d}_reserved`` (torch device d). Absent readings are left out."""
        out: dict[str, int] = {}
        if self.gpu_by_device_bytes is not None:
            out["gpu"] = sum(self.gpu_by_device_bytes.values())
            for i, used in sorted(self.gpu_by_device_bytes.items()):
                out[f"gpu{i}"] = used
        if self.host_rss_bytes is not None:
            out["host_rss"] = self.host_rss_bytes
        if self.torch:
            out["torch_allocated"] = sum(t.allocated_bytes for t in self.torch.values())
            out["torch_reserved"] = sum(t.reserved_bytes for t in self.torch.values())
            for d, t in sorted(self.torch.items()):
                out[f"cuda{d}_allocated"] = t.allocated_bytes
                out[f"cuda{d}_reserved"] = t.reserved_bytes
        return out


def _one_line(exc: BaseException) -> str:
    """The exception's first line, cleaned (its text may be the driver's)."""
    text = str(exc).strip().splitlines()
    return clean(text[0]) if text and text[0] else type(exc).__name__


def torch_now(cuda: Any) -> dict[int, DeviceNow]:
    """The allocator's counters on every device it holds memory on, and the current device."""
    try:
        return torch_memory.now(cuda, torch_memory.devices_in_use(cuda))
    except Exception:  # noqa: BLE001 - a broken torch: no torch figures rather than a failure
        return {}


def measure(
    source: Source | None, *, gpu: bool = True, timeout_s: float = DEFAULT_TIMEOUT_S
) -> MemoryNow:
    """This process now: its GPU memory per GPU (NVML, within ``timeout_s``; ``gpu=False``: not
    read), host RSS, and torch's allocator per device when torch is in use. Never raises for a
    failed driver read: ``gpu_error`` says why (one line)."""
    by_device: dict[int, int] | None = None
    error = None
    if gpu:
        try:
            mine = api.read_pids(source, (os.getpid(),), timeout_s)
            by_device = dict(mine.by_gpu_bytes)
        except Exception as e:  # noqa: BLE001 - no GPU reading, said in one line
            error = _one_line(e)
    cuda = torch_memory.torch_cuda()
    return MemoryNow(
        gpu_by_device_bytes=by_device,
        gpu_error=error,
        host_rss_bytes=host_memory.rss_bytes(),
        torch={} if cuda is None else torch_now(cuda),
        taken_at_mono=time.monotonic(),
    )


@dataclass(slots=True, kw_only=True)
class Released:
    """What :func:`release` did."""

    collected: int  # objects gc.collect() found unreachable
    frames_cleared: int  # frames of the last exception whose locals were dropped
    holders: tuple[str, ...]  # what held that exception ("sys.last_traceback", ...)
    torch_emptied: bool  # torch.cuda.empty_cache() was called

    def text(self) -> str:
        """``gc.collect() found 12 objects, cleared 3 frames of the last exception, ...``."""
        parts = [f"gc.collect() found {self.collected} objects"]
        if self.holders:
            n = self.frames_cleared
            parts.append(f"cleared {n} frame{'' if n == 1 else 's'} of the last exception")
        parts.append("torch cache emptied" if self.torch_emptied else "torch not in use")
        return ", ".join(parts)


def _exceptions(exc: BaseException | None) -> list[BaseException]:
    """``exc`` and every exception chained to it (cause, context, a group's members)."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen[id(e)] = e
        todo += [e.__cause__, e.__context__]
        todo += list(getattr(e, "exceptions", None) or ())  # an ExceptionGroup's members
    return list(seen.values())


def _suspended_generator_frame(frame: FrameType) -> bool:
    """The frame of a generator or coroutine that is still alive (suspended).

    Before Python 3.13, ``frame.clear()`` on such a frame closes its generator: the kernel's own
    coroutines must never be closed that way, so such frames are left alone.
    """
    if sys.version_info >= (3, 13) or not frame.f_code.co_flags & _GENERATOR_FLAGS:
        return False
    for owner in gc.get_referrers(frame):
        for attr in ("gi_frame", "cr_frame", "ag_frame"):
            if getattr(owner, attr, None) is frame:
                return True
    return False


def _clear_traceback(tb: TracebackType | None, cleared: set[int]) -> None:
    """Drop the locals of every frame in ``tb`` (executing frames are left alone)."""
    while tb is not None:
        frame = tb.tb_frame
        if id(frame) not in cleared and not _suspended_generator_frame(frame):
            try:
                frame.clear()
            except RuntimeError:  # an executing frame (this very call's callers)
                pass
            else:
                cleared.add(id(frame))
                if frame.f_code.co_flags & _OPTIMIZED:
                    # Before Python 3.13 a traceback formatter's read of f_locals left a dict
                    # with the values in the frame, which clear() keeps: reading it again now
                    # syncs it with the cleared locals, dropping them.
                    frame.f_locals  # noqa: B018 - read for its effect
        tb = tb.tb_next


def _shell_exceptions(shell: Any) -> tuple[list[tuple[str, BaseException]], list[TracebackType]]:
    """The exceptions and tracebacks an IPython shell keeps, through its public attributes."""
    excs: list[tuple[str, BaseException]] = []
    tbs: list[TracebackType] = []
    result = getattr(shell, "last_execution_result", None)
    for attr in ("error_in_exec", "error_before_exec"):
        e = getattr(result, attr, None)
        if isinstance(e, BaseException):
            excs.append((f"shell.last_execution_result.{attr}", e))
    formatter = getattr(shell, "InteractiveTB", None)
    tb = getattr(formatter, "tb", None)  # set by structured_traceback, dropped only by %debug
    if isinstance(tb, TracebackType):
        tbs.append(tb)
    syntax = getattr(getattr(shell, "SyntaxTB", None), "last_syntax_error", None)
    if isinstance(syntax, BaseException):
        excs.append(("shell.SyntaxTB.last_syntax_error", syntax))
    return excs, tbs


def _forget_shell(shell: Any) -> None:
    """Make the shell let go of the last exception's traceback (public attributes only)."""
    formatter = getattr(shell, "InteractiveTB", None)
    if formatter is None:
        return
    if isinstance(getattr(formatter, "tb", None), TracebackType):
        formatter.tb = None
    pdb = getattr(formatter, "pdb", None)  # a past %debug session's debugger keeps its stack
    if pdb is not None and hasattr(pdb, "forget"):
        with contextlib.suppress(Exception):  # a debugger of another kind: leave it
            pdb.forget()


def _clear_last_exception(shell: Any | None) -> tuple[int, tuple[str, ...]]:
    """Clear the last exception's frames and drop its references; (frames cleared, holders).

    A function of its own so that no local of it keeps a traceback alive afterwards.
    """
    holders: list[str] = []
    excs: list[tuple[str, BaseException]] = []
    tbs: list[TracebackType] = []
    for attr in ("last_exc", "last_value"):
        e = getattr(sys, attr, None)
        if isinstance(e, BaseException):
            excs.append((f"sys.{attr}", e))
    last_tb = getattr(sys, "last_traceback", None)
    if isinstance(last_tb, TracebackType):
        tbs.append(last_tb)
        holders.append("sys.last_traceback")
    if shell is not None:
        shell_excs, shell_tbs = _shell_exceptions(shell)
        excs += shell_excs
        tbs += shell_tbs
        if shell_tbs:
            holders.append("shell.InteractiveTB.tb")
    cleared: set[int] = set()
    for name, exc in excs:
        holders.append(name)
        for chained in _exceptions(exc):
            _clear_traceback(chained.__traceback__, cleared)
            chained.__traceback__ = None  # the traceback objects themselves go too
    for tb in tbs:
        _clear_traceback(tb, cleared)
    for attr in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, attr):
            delattr(sys, attr)
    if shell is not None:
        _forget_shell(shell)
    return len(cleared), tuple(dict.fromkeys(holders))


def release(shell: Any | None) -> Released:
    """Give back what is only kept alive by Python, IPython and torch's cache.

    1. The last exception's frames: every frame of ``sys.last_traceback`` (``last_value``,
       ``last_exc``, and the exceptions chained to them) and of the shell's holders
       (``last_execution_result``, ``InteractiveTB.tb``) has its locals dropped
       (``traceback.clear_frames``), and those references are dropped: ``%tb`` and ``%debug``
       have nothing to show afterwards.
    2. ``gc.collect()``.
    3. ``torch.cuda.empty_cache()`` when torch is in use (never imported here).
    """
    frames, holders = _clear_last_exception(shell)
    collected = gc.collect()
    cuda = torch_memory.torch_cuda()
    if cuda is not None:
        cuda.empty_cache()
    return Released(
        collected=collected,
        frames_cleared=frames,
        holders=holders,
        torch_emptied=cuda is not None,
    )


def _pair(name: str, before: int | None, after: int | None) -> str | None:
    if before is None or after is None:
        return None
    change = units.mib_signed(after - before)
    return f"{name} {units.mib_rounded(before)} -> {units.mib_rounded(after)} ({change})"


@dataclass(slots=True, kw_only=True)
class Reclaimed:
    """What :func:`reclaim` gave back: the readings before and after :func:`release`."""

    before: MemoryNow
    after: MemoryNow
    released: Released

    @property
    def collected(self) -> int:
        return self.released.collected

    def line(self) -> str:
        """What ``%gputop reclaim`` prints."""
        b, a = self.before, self.after
        parts = [f"{PREFIX} reclaim: {self.released.text()}"]
        torch = [
            _pair("torch reserved", b.torch_reserved_bytes, a.torch_reserved_bytes),
            _pair("allocated", b.torch_allocated_bytes, a.torch_allocated_bytes),
        ]
        if torch[0] is not None:
            parts.append(", ".join(t for t in torch if t is not None))
        gpu = _pair("GPU (NVML)", b.gpu_bytes, a.gpu_bytes)
        if gpu is not None:
            parts.append(gpu)
        elif a.gpu_error is not None:
            parts.append(f"GPU n/a: {a.gpu_error}")
        rss = _pair("RSS", b.host_rss_bytes, a.host_rss_bytes)
        if rss is not None:
            parts.append(rss)
        return " | ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """Flat data (bytes): ``{reading}_before_bytes``, ``{reading}_after_bytes`` and
        ``{reading}_reclaimed_bytes`` (before - after) for each of :meth:`MemoryNow.flat`'s
        readings, plus ``objects_collected``, ``frames_cleared`` and ``torch_cache_emptied``."""
        out: dict[str, Any] = {
            "objects_collected": self.released.collected,
            "frames_cleared": self.released.frames_cleared,
            "torch_cache_emptied": self.released.torch_emptied,
        }
        before, after = self.before.flat(), self.after.flat()
        for key in before.keys() | after.keys():
            b, a = before.get(key), after.get(key)
            out[f"{key}_before_bytes"] = b
            out[f"{key}_after_bytes"] = a
            out[f"{key}_reclaimed_bytes"] = None if b is None or a is None else b - a
        return out


def reclaim(
    shell: Any | None,
    source: Source | None,
    *,
    gpu: bool = True,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Reclaimed:
    """Measure, :func:`release`, measure again: what came back (``.line()`` prints it)."""
    before = measure(source, gpu=gpu, timeout_s=timeout_s)
    released = release(shell)
    after = measure(source, gpu=gpu, timeout_s=timeout_s)
    return Reclaimed(before=before, after=after, released=released)


def preload(*, import_torch: bool = False) -> str:
    """Create PyTorch's CUDA context on its current device now; one line saying what happened.

    So that the first tracked cell (or an experiment) is not charged the context's few hundred
    MiB: ``torch.cuda.init()`` then a one-element tensor on the device (what ipyexperiments
    does), which loads the CUDA kernels too. torch is used only when already imported, unless
    ``import_torch`` (``%gputop preload --import-torch``). No CUDA: says so, does nothing.
    """
    torch = sys.modules.get("torch")
    if torch is None and import_torch:
        try:
            torch = importlib.import_module("torch")
        except Exception as e:  # noqa: BLE001 - not installed, broken: one line
            return f"{PREFIX} preload: cannot import torch: {_one_line(e)}"
    if torch is None:
        return (
            f"{PREFIX} preload: torch is not imported, nothing to do"
            " (import it first, or %gputop preload --import-torch)"
        )
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available():
            return f"{PREFIX} preload: torch has no CUDA here, nothing to do"
        if hasattr(cuda, "is_initialized") and cuda.is_initialized():
            device = int(cuda.current_device())
            return f"{PREFIX} preload: the CUDA context on cuda:{device} was already there"
        t0 = time.monotonic()
        cuda.init()
        device = int(cuda.current_device())
        torch.ones(1, device=f"cuda:{device}")
        took_s = time.monotonic() - t0
    except Exception as e:  # noqa: BLE001 - a CUDA error: one line, never a traceback
        return f"{PREFIX} preload: CUDA failed: {_one_line(e)}"
    return f"{PREFIX} preload: CUDA context created on cuda:{device} in {took_s:.2f} s"
