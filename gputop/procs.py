"""What the host OS says about a PID, through psutil.

A PID that vanished between the driver's list and this read, or that we may not read, is a normal
result (``visible=False`` or a ``note``), never an exception. CPU % needs two readings of the same
process, so :class:`ProcReader` keeps a small, bounded cache of ``psutil.Process`` objects.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any

import psutil

from gputop.errors import UsageError
from gputop.model import ProcInfo

# Environment variables that decide which GPUs a process sees or how it uses them.
GPU_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "GPU_", "ROCR_", "HIP_", "TORCH_", "OMP_NUM")

_ATTRS = ["name", "username", "uids", "cmdline", "status", "ppid", "create_time", "memory_info"]
# psutil checks for a reused PID in ppid() by building another Process; the reader has just read
# the parent PID from /proc/PID/stat itself.
_ATTRS_BUT_PPID = [a for a in _ATTRS if a != "ppid"]
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


@functools.lru_cache(maxsize=1024)
def _not_visible(pid: int) -> ProcInfo:
    # Remembered: a box with processes in another PID namespace asks for the same ones each tick.
    return ProcInfo(pid=pid, visible=False, note=NOT_VISIBLE_NOTE)


def _absent(pid: int) -> bool:
    """True when surely no process or thread has this PID here (one syscall, no /proc read)."""
    if pid <= 0:
        return False  # 0 and negative PIDs name process groups to kill(): let psutil judge
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: it exists, another user's
        return False
    return False


def _stat(pid: int) -> tuple[bytes, int] | None:
    """(start time, parent PID) from /proc/PID/stat; the start time and PID name the process.

    None when it cannot be read (gone, not permitted, no /proc): the caller asks psutil.
    """
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = data.rpartition(b")")[2].split()  # the name in parentheses may hold anything
    try:
        return fields[19], int(fields[1])  # fields 22 and 4 of proc(5)
    except (IndexError, ValueError):
        return None


class ProcReader:
    """Reads ProcInfo with real CPU %, keeping psutil.Process objects between readings.

    Keyed by (pid, create_time) so a reused PID never inherits another process's CPU counters.
    A cached process is used again while the start time in /proc/PID/stat is the one it had.
    Bounded: ``read_many`` drops processes it was not asked about; ``read`` evicts the oldest
    entries past ``max_cached``. Thread-safe.
    """

    def __init__(self, max_cached: int = 4096) -> None:
        self.max_cached = max_cached
        self._cache: dict[tuple[int, float], psutil.Process] = {}
        # The newest cached process at each PID: its key and /proc start time.
        self._at_pid: dict[int, tuple[tuple[int, float], bytes]] = {}
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
                self._forget_locked(key)
            self._evict_locked()
            return out

    def _read_locked(self, pid: int) -> tuple[ProcInfo, tuple[int, float] | None]:
        known = self._at_pid.get(pid)
        stat = _stat(pid) if known is not None else None
        if known is not None and stat is not None and stat[0] == known[1]:
            # The same process as last time: no new psutil.Process (a /proc read and more).
            key, first = known[0], False
            cached = self._cache[key]
            attrs, ppid = _ATTRS_BUT_PPID, stat[1]
        else:
            if _absent(pid) or not psutil.pid_exists(pid):
                # A PID from another namespace: no psutil.Process, which would read /proc and
                # raise, every tick, for every such process.
                return _not_visible(pid), None
            if stat is None:  # read before the Process, so a PID reused in between shows
                stat = _stat(pid)
            try:
                proc = psutil.Process(pid)
                key = (pid, proc.create_time())
            except (psutil.NoSuchProcess, ValueError):
                return _not_visible(pid), None
            except psutil.AccessDenied:
                return ProcInfo(pid=pid, note=_denied_note(["the process"])), None
            found = self._cache.get(key)
            first = found is None
            cached = self._cache[key] = proc if found is None else found
            if stat is not None:
                self._at_pid[pid] = (key, stat[0])
            attrs, ppid = _ATTRS, None
        try:
            with cached.oneshot():
                d = cached.as_dict(attrs=attrs, ad_value=None)
                cpu = _cpu_percent(cached)
        except psutil.NoSuchProcess:
            self._forget_locked(key)
            return _not_visible(pid), None
        if ppid is not None:
            d["ppid"] = ppid
        return _info_from_dict(pid, d, None if first else cpu), key

    def _forget_locked(self, key: tuple[int, float]) -> None:
        self._cache.pop(key, None)
        known = self._at_pid.get(key[0])
        if known is not None and known[0] == key:
            del self._at_pid[key[0]]

    def _evict_locked(self) -> None:
        if len(self._cache) <= self.max_cached:
            return
        for key in [k for k, p in self._cache.items() if not p.is_running()]:
            self._forget_locked(key)
        while len(self._cache) > self.max_cached:
            self._forget_locked(next(iter(self._cache)))  # dicts keep insertion order: oldest first


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
