"""What the host OS says about a PID, through psutil.

A PID that vanished between the driver's list and this read, or that we may not read, is a normal
result (``visible=False`` or a ``note``), never an exception. CPU % needs two readings of the same
process, so :class:`ProcReader` keeps a small, bounded cache of ``psutil.Process`` objects.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import psutil

from gputop.engine.model import ProcInfo
from gputop.engine.sanitize import clean, clean_optional
from gputop.errors import UsageError

# Environment variables that decide which GPUs a process sees or how it uses them.
GPU_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "GPU_", "ROCR_", "HIP_", "TORCH_", "OMP_NUM")

# No "ppid": psutil checks for a reused PID in ppid() by building another Process, and the reader
# has the parent PID from /proc/PID/stat already.
_ATTRS = ["name", "username", "uids", "cmdline", "status", "create_time", "memory_info"]
_MAX_CHAIN = 64  # parent chains longer than this are a loop or a fork bomb; stop there

NOT_VISIBLE_NOTE = (
    "PID not visible here: it has exited, or it runs in another PID namespace "
    "(gputop inside a container sees host PIDs from the driver)"
)


def _denied_note(missing: list[str]) -> str:
    return "not permitted to read " + ", ".join(missing) + " (another user's process; run as root)"


def _info_from_dict(pid: int, d: dict[str, Any], cpu_percent: float | None) -> ProcInfo:
    """Build a ProcInfo from psutil's as_dict() output (None where access was denied).

    The process's own strings (name, argv, user name) are cleaned here, where they enter the
    model: another user wrote them, and every view prints them as they are.
    """
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
        user=clean_optional(d.get("username")),
        uid=uids.real if uids is not None else None,
        name=clean_optional(d.get("name")),
        cmdline=tuple(map(clean, cmdline)) if cmdline else (),
        status=str(status) if status is not None else None,
        ppid=d.get("ppid"),
        cpu_percent=cpu_percent,
        host_rss_bytes=mem.rss if mem is not None else None,
        note=note,
    )


@functools.lru_cache(maxsize=1024)
def not_visible(pid: int, name: str | None = None) -> ProcInfo:
    """A PID this namespace cannot see; ``name`` is the driver's for it (already clean), if any.

    Remembered: a box with processes in another PID namespace asks for the same ones each tick.
    """
    return ProcInfo(pid=pid, visible=False, name=name, note=NOT_VISIBLE_NOTE)


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


# /proc/PID/stat's state letter -> psutil's status name (proc(5)).
_STATUS = {
    b"R": psutil.STATUS_RUNNING,
    b"S": psutil.STATUS_SLEEPING,
    b"D": psutil.STATUS_DISK_SLEEP,
    b"T": psutil.STATUS_STOPPED,
    b"t": psutil.STATUS_TRACING_STOP,
    b"Z": psutil.STATUS_ZOMBIE,
    b"X": psutil.STATUS_DEAD,
    b"x": psutil.STATUS_DEAD,
    b"K": "wake-kill",
    b"W": psutil.STATUS_WAKING,
    b"P": psutil.STATUS_PARKED,
    b"I": psutil.STATUS_IDLE,
}
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
# How long a process's command line, name, user and uid are reused before they are read again.
# They rarely change while the process lives; exec() changes the name in /proc/PID/stat, which
# is read every time and forces a full reading at once.
FULL_READ_EVERY_S = 5.0
# Periodic full readings per read_many call (one a tick): 5,000 GPU processes are refreshed in
# turn, each within about 50 ticks, instead of 1,000 psutil readings a second.
REFRESHES_PER_CALL = 100
# Processes read from /proc/PID/stat per read_many call; more are read in turn (issue 17).
STATS_PER_CALL = 1000


@dataclass(frozen=True, slots=True)
class _Stat:
    """The fields of /proc/PID/stat the reader uses."""

    start: bytes  # start time in clock ticks since boot: with the PID, the process identity
    comm: bytes
    state: bytes
    ppid: int
    cpu_ticks: int  # user + system time
    rss_pages: int


def _stat(pid: int) -> _Stat | None:
    """/proc/PID/stat, parsed; None when it cannot be read (gone, not permitted, no /proc)."""
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
    head, _, tail = data.rpartition(b")")  # the name in parentheses may hold anything
    fields = tail.split()
    try:
        # fields 3, 4, 14, 15, 22 and 24 of proc(5)
        return _Stat(
            start=fields[19],
            comm=head.partition(b"(")[2],
            state=fields[0],
            ppid=int(fields[1]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            rss_pages=int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


@dataclass(slots=True)
class _Known:
    """A process the reader has read before, and what it keeps of it between readings."""

    key: tuple[int, float]  # (pid, psutil create time)
    proc: psutil.Process
    stat: _Stat | None = None  # the last /proc/PID/stat reading: the CPU baseline
    stat_at: float = 0.0  # clock time of that reading
    info: ProcInfo | None = None  # the last full reading (psutil)
    full_at: float = 0.0  # clock time of that reading
    shown: ProcInfo | None = None  # the last answer given for it


class ProcReader:
    """Reads ProcInfo with real CPU %, keeping what it knows of each process between readings.

    Keyed by (pid, create_time) so a reused PID never inherits another process's CPU counters.
    A known process is read again from /proc/PID/stat alone (state, parent, CPU time, RSS) while
    its start time and name there are unchanged; its command line, user and uid come from a full
    psutil reading at most ``full_every_s`` old. Bounded: ``read_many`` drops processes it was
    not asked about; ``read`` evicts the oldest entries past ``max_cached``. Thread-safe.
    """

    def __init__(
        self,
        max_cached: int = 4096,
        *,
        full_every_s: float = FULL_READ_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_cached = max_cached
        self.full_every_s = full_every_s
        self._clock = clock
        self._cache: dict[tuple[int, float], _Known] = {}
        self._at_pid: dict[int, _Known] = {}  # the newest known process at each PID
        self._lock = threading.Lock()
        self.full_reads = 0  # psutil readings made (the rest came from /proc/PID/stat alone)
        self._refreshes_left: int | None = None  # read_many's allowance of periodic full reads
        self._calls = 0  # read_many calls so far: whose turn it is to be read

    def __len__(self) -> int:
        return len(self._cache)

    def read(self, pid: int, *, fresh: bool = False) -> ProcInfo:
        """One process; cpu_percent is None on the first reading of a process.

        ``fresh``: a full reading now, whatever its age (for decisions such as a signal).
        """
        with self._lock:
            info, _ = self._read_locked(pid, fresh)
            self._evict_locked()
            return info

    def read_many(self, pids: list[int] | tuple[int, ...] | set[int]) -> dict[int, ProcInfo]:
        """Several processes; forgets every cached process not in ``pids``.

        At most ``REFRESHES_PER_CALL`` known processes get their periodic full reading per
        call (new ones always do): with thousands of GPU processes the command lines and users
        are refreshed in turn, not all within ``full_every_s``. Past ``STATS_PER_CALL``
        processes, known ones are read in turn too, each at least every
        ``ceil(len(pids) / STATS_PER_CALL)`` calls (5 at 5,000 processes).
        """
        with self._lock:
            out: dict[int, ProcInfo] = {}
            keep: set[tuple[int, float]] = set()
            self._refreshes_left = REFRESHES_PER_CALL
            # Past STATS_PER_CALL processes, each is read every `turns` calls, in turn by PID;
            # in between its last reading stands (its CPU % then spans those calls).
            turns = -(-len(pids) // STATS_PER_CALL)
            self._calls += 1
            try:
                for pid in pids:
                    known = self._at_pid.get(pid) if turns > 1 else None
                    if (
                        known is not None
                        and known.shown is not None
                        and (pid + self._calls) % turns
                    ):
                        out[pid] = known.shown
                        keep.add(known.key)
                        continue
                    out[pid], key = self._read_locked(pid)
                    if key is not None:
                        keep.add(key)
            finally:
                self._refreshes_left = None
            for key in [k for k in self._cache if k not in keep]:
                self._forget_locked(key)
            # What was asked for is kept whatever its size: evicting some of it would only
            # make the next call read them again in full (bounded by the driver's list).
            self._evict_locked(floor=len(keep))
            return out

    def _read_locked(
        self, pid: int, fresh: bool = False
    ) -> tuple[ProcInfo, tuple[int, float] | None]:
        known = self._at_pid.get(pid)
        stat = _stat(pid) if known is not None else None
        if known is None or stat is None or known.stat is None or stat.start != known.stat.start:
            found = self._identify(pid, stat)
            if isinstance(found, ProcInfo):
                return found, None
            known, stat = found
        now = self._clock()
        last, info = known.stat, known.info
        if (
            fresh
            or info is None
            or stat is None
            or last is None
            or stat.comm != last.comm  # exec(): another program in the same process
            or (stat.state == b"Z") != (last.state == b"Z")  # a zombie has no argv or memory
            or (now - known.full_at >= self.full_every_s and self._may_refresh())
        ):
            info = self._full_locked(known, stat, now)
            if info is None:
                return not_visible(pid), None
        if stat is None:  # no /proc/PID/stat (not Linux): psutil's own CPU counters
            return replace(info, cpu_percent=_cpu_percent(known.proc)), known.key
        cpu = None  # the first reading of a process says nothing about its CPU use
        if last is not None:
            elapsed = now - known.stat_at
            used = (stat.cpu_ticks - last.cpu_ticks) / _CLOCK_TICKS
            cpu = used / elapsed * 100 if elapsed > 0 else 0.0
        known.stat, known.stat_at = stat, now
        zombie = stat.state == b"Z"
        info = ProcInfo(
            pid=pid,
            create_time=info.create_time,
            user=info.user,
            uid=info.uid,
            name=info.name,
            cmdline=info.cmdline,
            status=_STATUS.get(stat.state, info.status),
            ppid=stat.ppid,
            cpu_percent=cpu,
            host_rss_bytes=info.host_rss_bytes if zombie else stat.rss_pages * _PAGE_BYTES,
            note=info.note,
        )
        known.shown = info
        return info, known.key

    def _identify(self, pid: int, stat: _Stat | None) -> tuple[_Known, _Stat | None] | ProcInfo:
        """The known process now at ``pid`` (a new one if its identity changed) and its stat,
        or why there is none."""
        if _absent(pid) or not psutil.pid_exists(pid):
            # A PID from another namespace: no psutil.Process, which would read /proc and
            # raise, every tick, for every such process.
            return not_visible(pid)
        if stat is None:  # read before the Process, so a PID reused in between shows
            stat = _stat(pid)
        try:
            proc = psutil.Process(pid)
            key = (pid, proc.create_time())
        except (psutil.NoSuchProcess, ValueError):
            return not_visible(pid)
        except psutil.AccessDenied:
            return ProcInfo(pid=pid, note=_denied_note(["the process"]))
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = _Known(key, proc)
            _cpu_percent(proc)  # psutil's baseline, used only where /proc/PID/stat is missing
        self._at_pid[pid] = known
        return known, stat

    def _full_locked(self, known: _Known, stat: _Stat | None, now: float) -> ProcInfo | None:
        """Read everything through psutil (None: the process has gone)."""
        try:
            with known.proc.oneshot():
                d = known.proc.as_dict(attrs=_ATTRS, ad_value=None)
                d["ppid"] = stat.ppid if stat is not None else known.proc.ppid()
        except psutil.NoSuchProcess:
            self._forget_locked(known.key)
            return None
        self.full_reads += 1
        known.info, known.full_at = _info_from_dict(known.key[0], d, None), now
        return known.info

    def _forget_locked(self, key: tuple[int, float]) -> None:
        self._cache.pop(key, None)
        known = self._at_pid.get(key[0])
        if known is not None and known.key == key:
            del self._at_pid[key[0]]

    def _may_refresh(self) -> bool:
        """Whether a periodic full reading fits in this call's allowance (uses one up)."""
        if self._refreshes_left is None:
            return True
        if self._refreshes_left <= 0:
            return False
        self._refreshes_left -= 1
        return True

    def _evict_locked(self, floor: int = 0) -> None:
        limit = max(self.max_cached, floor)
        if len(self._cache) <= limit:
            return
        for key in [k for k, known in self._cache.items() if not known.proc.is_running()]:
            self._forget_locked(key)
        while len(self._cache) > limit:
            self._forget_locked(next(iter(self._cache)))  # dicts keep insertion order: oldest first


def _cpu_percent(proc: psutil.Process) -> float | None:
    try:
        return proc.cpu_percent(interval=None)
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None


_DEFAULT_READER = ProcReader(max_cached=1024)


def read_proc(pid: int, *, fresh: bool = False) -> ProcInfo:
    """What the OS tells about ``pid``; never raises for a vanished or foreign PID.

    Uses a shared ProcReader, so a second call for the same process gives a real CPU %. Its
    command line, user and uid may be a few seconds old unless ``fresh``.
    """
    return _DEFAULT_READER.read(pid, fresh=fresh)


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
    """The environment of ``pid``, names and values cleaned (:mod:`gputop.engine.sanitize`).

    Raises UsageError with a readable reason if it can't be read.
    """
    try:
        proc = psutil.Process(pid)
        return {clean(k): clean(v) for k, v in proc.environ().items()}
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


def session(pid: int) -> int | None:
    """The session id of ``pid``, or None when it has vanished."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def is_namespace_init(pid: int) -> bool:
    """True when ``pid`` is PID 1 of the PID namespace it runs in: ours, or a container's init
    seen from the host (the last number of NSpid in /proc/PID/status). False when unreadable."""
    if pid == 1:
        return True
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return line.split()[-1] == b"1"
    except OSError:
        pass
    return False
