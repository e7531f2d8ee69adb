"""What the host OS says about a PID, through psutil.

A PID that vanished between the driver's list and this read, or that we may not read, is a normal
result (``visible=False`` or a ``note``), never an exception. CPU % needs two readings of the same
process, so :class:`ProcReader` keeps a small, bounded cache of ``psutil.Process`` objects.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import psutil

from gputop.errors import UsageError
from gputop.model import ProcInfo

# Environment variables that decide which GPUs a process sees or how it uses them.
GPU_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "GPU_", "ROCR_", "HIP_", "TORCH_", "OMP_NUM")

_ATTRS = ["name", "username", "uids", "cmdline", "status", "ppid", "create_time", "memory_info"]
_MAX_CHAIN = 64  # parent chains longer than this are a loop or a fork bomb; stop there

NOT_VISIBLE_NOTE = (
    "PID not visible here: it has exited, or it runs in another PID namespace "
    "(gputop inside a container sees host PIDs from the driver)"
)


def _denied_note(missing: list[str]) -> str:
    return "not permitted to read " + ", ".join(missing) + " (another user's process; run as root)"


def _info_from_dict(pid: int, d: dict[str, Any], cpu_percent: float | None) -> ProcInfo:
    """Build a ProcInfo from psutil's as_dict() output (None where access was denied)."""
    missing = [k for k in ("username", "cmdline", "memory_info") if d.get(k) is None]
    uids = d.get("uids")
    mem = d.get("memory_info")
    status = d.get("status")
    cmdline = d.get("cmdline")
    # A zombie has no argv or memory; that is not a permission problem.
    note = _denied_note(missing) if missing and status != psutil.STATUS_ZOMBIE else None
    return ProcInfo(
        pid=pid,
        create_time=d.get("create_time"),
        user=d.get("username"),
        uid=uids.real if uids is not None else None,
        name=d.get("name"),
        cmdline=tuple(cmdline) if cmdline else (),
        status=str(status) if status is not None else None,
        ppid=d.get("ppid"),
        cpu_percent=cpu_percent,
        host_rss_bytes=mem.rss if mem is not None else None,
        note=note,
    )


def _not_visible(pid: int) -> ProcInfo:
    return ProcInfo(pid=pid, visible=False, note=NOT_VISIBLE_NOTE)


class ProcReader:
    """Reads ProcInfo with real CPU %, keeping psutil.Process objects between readings.

    Keyed by (pid, create_time) so a reused PID never inherits another process's CPU counters.
    Bounded: ``read_many`` drops processes it was not asked about; ``read`` evicts the oldest
    entries past ``max_cached``. Thread-safe.
    """

    def __init__(self, max_cached: int = 4096) -> None:
        self.max_cached = max_cached
        self._cache: dict[tuple[int, float], psutil.Process] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def read(self, pid: int) -> ProcInfo:
        """One process; cpu_percent is None on the first reading of a process."""
        with self._lock:
            info, _ = self._read_locked(pid)
            self._evict_locked()
            return info

    def read_many(self, pids: list[int] | tuple[int, ...] | set[int]) -> dict[int, ProcInfo]:
        """Several processes; forgets every cached process not in ``pids``."""
        with self._lock:
            out: dict[int, ProcInfo] = {}
            keep: set[tuple[int, float]] = set()
            for pid in pids:
                out[pid], key = self._read_locked(pid)
                if key is not None:
                    keep.add(key)
            for key in [k for k in self._cache if k not in keep]:
                del self._cache[key]
            self._evict_locked()
            return out

    def _read_locked(self, pid: int) -> tuple[ProcInfo, tuple[int, float] | None]:
        if not psutil.pid_exists(pid):
            # One cheap syscall: building a Process for a PID from another namespace raised
            # after reading /proc, every tick, for every such process.
            return _not_visible(pid), None
        try:
            proc = psutil.Process(pid)
            key = (pid, proc.create_time())
        except (psutil.NoSuchProcess, ValueError):
            return _not_visible(pid), None
        except psutil.AccessDenied:
            return ProcInfo(pid=pid, note=_denied_note(["the process"])), None
        cached = self._cache.get(key)
        first = cached is None
        if cached is None:
            cached = self._cache[key] = proc
        try:
            with cached.oneshot():
                d = cached.as_dict(attrs=_ATTRS, ad_value=None)
                cpu = _cpu_percent(cached)
        except psutil.NoSuchProcess:
            self._cache.pop(key, None)
            return _not_visible(pid), None
        return _info_from_dict(pid, d, None if first else cpu), key

    def _evict_locked(self) -> None:
        if len(self._cache) <= self.max_cached:
            return
        for key in [k for k, p in self._cache.items() if not p.is_running()]:
            del self._cache[key]
        while len(self._cache) > self.max_cached:
            del self._cache[next(iter(self._cache))]  # dicts keep insertion order: oldest first


def _cpu_percent(proc: psutil.Process) -> float | None:
    try:
        return proc.cpu_percent(interval=None)
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None


_DEFAULT_READER = ProcReader(max_cached=1024)


def read_proc(pid: int) -> ProcInfo:
    """What the OS tells about ``pid``; never raises for a vanished or foreign PID.

    Uses a shared ProcReader, so a second call for the same process gives a real CPU %.
    """
    return _DEFAULT_READER.read(pid)


def parent_chain(pid: int) -> list[ProcInfo]:
    """The ancestors of ``pid``: its parent first, up to PID 1 (or the first unreadable one)."""
    chain: list[ProcInfo] = []
    seen = {pid}
    current = read_proc(pid)
    while current.ppid and current.ppid not in seen and len(chain) < _MAX_CHAIN:
        seen.add(current.ppid)
        current = read_proc(current.ppid)
        chain.append(current)
        if not current.visible:
            break
    return chain


def children(pid: int, *, recursive: bool = False) -> list[ProcInfo]:
    """The children of ``pid`` (all descendants when ``recursive``); [] if it has vanished."""
    try:
        kids = psutil.Process(pid).children(recursive=recursive)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    return [read_proc(k.pid) for k in kids]


def environment(pid: int) -> dict[str, str]:
    """The environment of ``pid``; raises UsageError with a readable reason if it can't be read."""
    try:
        proc = psutil.Process(pid)
        return dict(proc.environ())
    except psutil.ZombieProcess:
        raise UsageError(f"PID {pid} is defunct: a zombie has no environment left") from None
    except psutil.NoSuchProcess:
        raise UsageError(f"PID {pid} is not running (or not visible here)") from None
    except psutil.AccessDenied:
        owner = read_proc(pid).user or "another user"
        raise UsageError(
            f"not permitted to read the environment of PID {pid} (owned by {owner}); run as root"
        ) from None


def gpu_environment(pid: int) -> dict[str, str]:
    """The GPU-related part of ``environment(pid)``: CUDA_VISIBLE_DEVICES, NVIDIA_*, NCCL_*..."""
    return {k: v for k, v in environment(pid).items() if k.startswith(GPU_ENV_PREFIXES)}


def process_group(pid: int) -> int | None:
    """The process group id of ``pid``, or None when it has vanished."""
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def pid_exists(pid: int) -> bool:
    """True when ``pid`` names a process (zombies included) in this PID namespace."""
    return psutil.pid_exists(pid)
