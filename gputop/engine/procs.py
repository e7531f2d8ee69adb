"""What the host OS says about a PID, through psutil.

A PID that vanished between the driver's list and this read, or that we may not read, is a normal
result (``visible=False`` or a ``note``), never an exception. CPU % needs two readings of the same
process, so :class:`ProcReader` keeps a small, bounded cache of ``psutil.Process`` objects.
"""

from __future__ import annotations

import functools
import os
import pwd
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import Any, Literal, overload

import psutil

from gputop.engine.containers import ContainerNames, container_of
from gputop.engine.model import Container, ProcInfo
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


def pending(pid: int) -> ProcInfo:
    """A process not read yet (past ``NEW_PER_CALL`` new ones in one call)."""
    return ProcInfo(pid=pid, note=PENDING_NOTE)


def is_pending(info: ProcInfo) -> bool:
    """Whether ``info`` is a :func:`pending` placeholder."""
    return info.visible and info.create_time is None and info.note == PENDING_NOTE


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
# turn, each within about 500 ticks, not 1,000 a second; up to 50 processes still every 5 s.
# What they refresh (command line, user, container) seldom changes but by exec(), which
# changes the name in /proc/PID/stat, read at once (issue 17).
REFRESHES_PER_CALL = 10
# Processes read from /proc/PID/stat per read_many call; more are read in turn (issue 17).
STATS_PER_CALL = 1000
# ... and of those idle at their last reading (no CPU time since the one before): an idle
# inference worker's CPU %, state and RSS are the ones most likely to stand (every 20 s at 5,000).
IDLE_STATS_PER_CALL = 250
# New processes read in full per read_many call. Past this, a new process gets a light reading:
# the owner of /proc/PID (its effective uid) stands for its user, as /proc/PID/status (the real
# uid) costs as much again; its full reading comes on a later call (issue 17: 5,000 new GPU
# processes on the first frame).
NEW_FULL_PER_CALL = 500
# New processes read at all per read_many call; the others are pending (:func:`pending`) until a
# later call, so the first tick on 5,000 GPU processes does not read them all (issue 17).
NEW_PER_CALL = 1000
PENDING_NOTE = "not read yet: gputop reads at most 1,000 new processes a tick"


@dataclass(frozen=True, slots=True)
class _Stat:
    """The fields of /proc/PID/stat the reader uses."""

    start: bytes  # start time in clock ticks since boot: with the PID, the process identity
    comm: bytes
    state: bytes
    ppid: int
    cpu_ticks: int  # user + system time
    rss_pages: int


@overload
def _read_file(path: str, size: int = ..., *, allow_error: Literal[False] = ...) -> bytes: ...
@overload
def _read_file(path: str, size: int = ..., *, allow_error: Literal[True]) -> bytes | None: ...
def _read_file(path: str, size: int = 1 << 17, *, allow_error: bool = False) -> bytes | None:
    """Up to ``size`` bytes of a /proc file in one read: os.read, not open(), which costs twice
    as much on a file this small. When unreadable: b"", or None with ``allow_error``."""
    failed = None if allow_error else b""
    try:
        fd = os.open(path, os.O_RDONLY)
    except (OSError, ValueError):
        return failed
    try:
        return os.read(fd, size)
    except OSError:
        return failed
    finally:
        os.close(fd)


def _stat(pid: int) -> _Stat | None:
    """/proc/PID/stat, parsed; None when it cannot be read (gone, not permitted, no /proc)."""
    return _parse_stat(_read_file(f"/proc/{pid}/stat", 4096))


def _parse_stat(data: bytes) -> _Stat | None:
    if not data:
        return None
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
class _Turns:
    """read_many's last PID list, grouped by turn, so that a call for the same list looks only
    at the PIDs due: a PID is due when ``(pid + call) % turns == 0`` (``idle_turns`` for one
    idle at its last reading), or always while it has no standing answer."""

    pids: list[int]  # the list object the call was given (the sampler passes the same again)
    out: dict[int, ProcInfo]  # the last answers
    turns: int
    idle_turns: int
    busy: list[list[int]]  # PIDs by pid % turns
    idle: list[list[int]]  # PIDs by pid % idle_turns
    always: set[int]  # PIDs read every call: not visible, pending, or gone

    @classmethod
    def of(
        cls,
        pids: list[int],
        out: dict[int, ProcInfo],
        turns: int,
        idle_turns: int,
        at_pid: dict[int, _Known],
    ) -> _Turns:
        busy: list[list[int]] = [[] for _ in range(turns)]
        idle: list[list[int]] = [[] for _ in range(idle_turns)]
        always: set[int] = set()
        for pid in pids:
            busy[pid % turns].append(pid)
            idle[pid % idle_turns].append(pid)
            known = at_pid.get(pid)
            if known is None or known.shown is None:
                always.add(pid)
        return cls(pids, out, turns, idle_turns, busy, idle, always)


@dataclass(slots=True)
class _Known:
    """A process the reader has read before, and what it keeps of it between readings."""

    key: tuple[int, float]  # (pid, psutil create time)
    proc: psutil.Process | None  # None until a psutil reading is asked for (read from /proc)
    stat: _Stat | None = None  # the last /proc/PID/stat reading: the CPU baseline
    stat_at: float = 0.0  # clock time of that reading
    info: ProcInfo | None = None  # the last full reading (psutil)
    full_at: float = 0.0  # clock time of that reading
    shown: ProcInfo | None = None  # the last answer given for it
    shown_from: ProcInfo | None = None  # the reading `shown` was made from
    raw: bytes | None = None  # /proc/PID/stat as `stat` was parsed from
    light: bool = False  # info is a light reading: the full one is still owed


class ProcReader:
    """Reads ProcInfo with real CPU %, keeping what it knows of each process between readings.

    Keyed by (pid, create_time) so a reused PID never inherits another process's CPU counters.
    A known process is read again from /proc/PID/stat alone (state, parent, CPU time, RSS) while
    its start time and name there are unchanged; its command line, user and uid come from a full
    reading at most ``full_every_s`` old. On Linux a full reading is /proc/PID/stat, status and
    cmdline (about 50 µs; psutil takes 0.3 ms); psutil reads where there is no /proc/PID/stat,
    and for ``fresh`` readings. Bounded: ``read_many`` drops processes it was not asked about;
    ``read`` evicts the oldest entries past ``max_cached``. Thread-safe.
    """

    def __init__(
        self,
        max_cached: int = 4096,
        *,
        full_every_s: float = FULL_READ_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        containers: ContainerNames | None = None,
    ) -> None:
        self.max_cached = max_cached
        self._names = containers if containers is not None else ContainerNames()
        self.full_every_s = full_every_s
        self._clock = clock
        self._cache: dict[tuple[int, float], _Known] = {}
        self._at_pid: dict[int, _Known] = {}  # the newest known process at each PID
        self._lock = threading.Lock()
        self.full_reads = 0  # psutil readings made (the rest came from /proc/PID/stat alone)
        self._refreshes_left: int | None = None  # read_many's allowance of periodic full reads
        self._new_left: int | None = None  # read_many's allowance of full reads of new ones
        self._unread_left: int | None = None  # read_many's allowance of new processes read
        self._boot_time: float | None = None  # psutil's boot time, read once per read_many
        self._calls = 0  # read_many calls so far: whose turn it is to be read
        # PIDs whose answer is another object than the last read_many call's (None: not known,
        # the call read them all); the sampler rebuilds only their rows.
        self.changed: set[int] | None = None
        self._turns: _Turns | None = None  # the last call's PIDs, by turn (see _Turns)

    def __len__(self) -> int:
        return len(self._cache)

    def read(self, pid: int, *, fresh: bool = False) -> ProcInfo:
        """One process; cpu_percent is None on the first reading of a process.

        ``fresh``: a full reading now, whatever its age (for decisions such as a signal).
        """
        with self._lock:
            self._turns = None  # it may evict a process read_many keeps
            info, _ = self._read_locked(pid, fresh)
            self._evict_locked()
            return info

    def read_many(self, pids: Collection[int]) -> dict[int, ProcInfo]:
        """Several processes; forgets every cached process not in ``pids``.

        At most ``REFRESHES_PER_CALL`` known processes get their periodic full reading per
        call: with thousands of GPU processes the command lines and users are refreshed in
        turn, not all within ``full_every_s``. At most ``NEW_FULL_PER_CALL`` new processes are
        read in full; the others get a light reading (no real uid or access notes yet; the owner
        of /proc/PID stands for the user) and their full reading on a later call, before any
        periodic one. Past ``NEW_PER_CALL`` new processes, the rest are :func:`pending` until a
        later call (``pids`` in the order they should be read: the caller's most important
        first). Past ``STATS_PER_CALL`` processes, known ones are read in turn too, each at least
        every ``ceil(len(pids) / STATS_PER_CALL)`` calls (5 at 5,000 processes); past
        ``IDLE_STATS_PER_CALL``, those idle at their last reading every ``ceil(len(pids) /
        IDLE_STATS_PER_CALL)`` calls (20 at 5,000). Given the very list object of the last call
        again (not changed in place: the sampler's own, while no process came or went), only the
        PIDs whose turn it is are looked at, and ``changed`` names those whose answer is a new
        object (None after a call that looked at every PID).
        """
        with self._lock:
            self._refreshes_left = REFRESHES_PER_CALL
            self._new_left = NEW_FULL_PER_CALL
            self._unread_left = NEW_PER_CALL
            self._boot_time = None
            calls = self._calls = self._calls + 1
            last = self._turns
            if last is not None and last.pids is pids:
                try:
                    return self._read_turns_locked(last, calls)
                finally:
                    self._refreshes_left = self._new_left = self._unread_left = None
            self._turns = None
            self.changed = None
            out: dict[int, ProcInfo] = {}
            keep: set[tuple[int, float]] = set()
            # Past STATS_PER_CALL processes, each is read every `turns` calls, in turn by PID;
            # in between its last reading stands (its CPU % then spans those calls).
            turns = -(-len(pids) // STATS_PER_CALL)
            idle_turns = -(-len(pids) // IDLE_STATS_PER_CALL)
            at_pid = self._at_pid if idle_turns > 1 else {}
            try:
                for pid in pids:
                    known = at_pid.get(pid)
                    if known is not None:
                        shown = known.shown
                        if shown is not None and (pid + calls) % (
                            idle_turns if shown.cpu_percent == 0.0 else turns
                        ):
                            out[pid] = shown
                            keep.add(known.key)
                            continue
                    out[pid], key = self._read_locked(pid)
                    if key is not None:
                        keep.add(key)
            finally:
                self._refreshes_left = self._new_left = self._unread_left = None
            for key in [k for k in self._cache if k not in keep]:
                self._forget_locked(key)
            # What was asked for is kept whatever its size: evicting some of it would only
            # make the next call read them again in full (bounded by the driver's list).
            self._evict_locked(floor=len(keep))
            if idle_turns > 1 and isinstance(pids, list):
                self._turns = _Turns.of(pids, out, turns, idle_turns, self._at_pid)
            return out

    def _read_turns_locked(self, turns: _Turns, calls: int) -> dict[int, ProcInfo]:
        """read_many for the very PID list of the last call: only the PIDs whose turn it is
        (and those with no standing answer) are looked at, not every PID (issue 17)."""
        at_pid, last = self._at_pid, turns.out
        due = dict.fromkeys(turns.always)
        for bucket, idle in (
            (turns.busy[-calls % turns.turns], False),
            (turns.idle[-calls % turns.idle_turns], True),
        ):
            for pid in bucket:
                known = at_pid.get(pid)
                shown = known.shown if known is not None else None
                if shown is None or (shown.cpu_percent == 0.0) is idle:
                    due[pid] = None
        out = dict(last)
        changed: set[int] = set()
        for pid in due:
            before = at_pid.get(pid)
            info, key = self._read_locked(pid)
            if info is not last[pid]:
                changed.add(pid)
                out[pid] = info
            if before is not None and (key is None or key != before.key):
                self._forget_locked(before.key)  # gone, or the PID now names another process
            known = at_pid.get(pid)
            if known is None or known.shown is None:
                turns.always.add(pid)
            else:
                turns.always.discard(pid)
        turns.out = out
        self.changed = changed
        return out

    def _read_locked(
        self, pid: int, fresh: bool = False
    ) -> tuple[ProcInfo, tuple[int, float] | None]:
        known = self._at_pid.get(pid)
        # Past the call's allowance of new processes; another namespace's PID (absent here) is
        # answered as ever. The allowance is used up where a new process is read (_count_new).
        if (
            known is None
            and not fresh
            and self._unread_left is not None
            and self._unread_left <= 0
            and not _absent(pid)
        ):
            return pending(pid), None
        raw: bytes | None = _read_file(f"/proc/{pid}/stat", 4096) if known is not None else b""
        if known is not None and raw and raw == known.raw and not fresh:
            # The very same /proc/PID/stat as last time: no CPU time used, same state, parent
            # and RSS. An idle process's answer stands as it was, unless it is due a full one.
            now = self._clock()
            shown = known.shown
            if (
                shown is not None
                and known.shown_from is known.info
                and shown.cpu_percent == 0.0
                and not known.light
                and (
                    now - known.full_at < self.full_every_s
                    # due, but this call's periodic full readings are spent (at thousands of
                    # processes, nearly all are due: each is read in full every ~500 s)
                    or (self._refreshes_left is not None and self._refreshes_left <= 0)
                )
            ):
                known.stat_at = now
                return shown, known.key
        stat = _parse_stat(raw) if raw else None
        if known is None or stat is None or known.stat is None or stat.start != known.stat.start:
            new = None if fresh else self._new_from_proc(pid)
            found = new if new is not None else self._identify(pid, stat)
            if isinstance(found, ProcInfo):
                return found, None
            known, stat = found
            raw = None  # that stat is another reading than `raw`
        known.raw = raw
        now = self._clock()
        last, info = known.stat, known.info
        if fresh or info is None or stat is None:
            info = self._full_locked(known, stat, now)  # psutil
            if info is None:
                return not_visible(pid), None
        elif (
            (
                last is not None
                and (
                    stat.comm != last.comm  # exec(): another program in the same process
                    or (stat.state == b"Z") != (last.state == b"Z")  # a zombie: no argv, memory
                )
            )
            or (known.light and self._may_read_new())
            or (now - known.full_at >= self.full_every_s and self._may_refresh())
        ):
            info = self._reread_locked(known, stat, now)  # /proc
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
        status = _STATUS.get(stat.state, info.status)
        rss = info.host_rss_bytes if zombie else stat.rss_pages * _PAGE_BYTES
        shown = known.shown
        if (
            shown is not None
            and known.shown_from is info  # no full reading since
            and shown.cpu_percent == cpu
            and shown.host_rss_bytes == rss
            and shown.ppid == stat.ppid
            and shown.status == status
        ):
            # Unchanged (an idle worker): the same object tells the sampler its row is as well.
            return shown, known.key
        shown = ProcInfo(
            pid=pid,
            create_time=info.create_time,
            user=info.user,
            uid=info.uid,
            name=info.name,
            cmdline=info.cmdline,
            container=info.container,
            status=status,
            ppid=stat.ppid,
            cpu_percent=cpu,
            host_rss_bytes=rss,
            note=info.note,
        )
        known.shown, known.shown_from = shown, info
        return shown, known.key

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
            self._count_new()
            self._may_read_new()  # a full reading follows: it uses up the call's allowance
            _cpu_percent(proc)  # psutil's baseline, used only where /proc/PID/stat is missing
        elif known.proc is None:
            known.proc = proc
        self._at_pid[pid] = known
        return known, stat

    def _new_from_proc(self, pid: int) -> tuple[_Known, _Stat] | None:
        """A process new to the reader, read from /proc alone: in full while this call's
        allowance lasts, else light (None: not here, or no /proc/PID/stat)."""
        stat = _stat(pid)
        if stat is None:
            return None
        if self._boot_time is None:
            self._boot_time = psutil.boot_time()
        # psutil's create time, the same float: a psutil reading later finds the same key.
        key = (pid, float(stat.start) / _CLOCK_TICKS + self._boot_time)
        known = self._cache.get(key)
        if known is None:
            full = self._may_read_new()
            box = self._container(pid) if full else None
            info = _info_from_proc(pid, key[1], stat, full=full, container=box)
            if info is None:
                return None
            self.full_reads += full
            known = self._cache[key] = _Known(key, None, info=info, light=not full)
            self._count_new()
            known.full_at = self._clock()
        self._at_pid[pid] = known
        return known, stat

    def _reread_locked(self, known: _Known, stat: _Stat, now: float) -> ProcInfo | None:
        """A full reading from /proc (None: the process has gone)."""
        pid = known.key[0]
        info = _info_from_proc(pid, known.key[1], stat, full=True, container=self._container(pid))
        if info is None:
            self._forget_locked(known.key)
            return None
        self.full_reads += 1
        if info == known.info:
            # Unchanged (nearly always): the same object tells the sampler the row is as well.
            info = known.info
        known.info, known.full_at, known.light = info, now, False
        return info

    def _full_locked(self, known: _Known, stat: _Stat | None, now: float) -> ProcInfo | None:
        """Read everything through psutil (None: the process has gone)."""
        if known.proc is None:  # read from /proc so far
            try:
                proc = psutil.Process(known.key[0])
                same = proc.create_time() == known.key[1]
            except (psutil.Error, ValueError):
                same = False
            if not same:  # gone, or the PID was reused in between: read it as new next time
                self._forget_locked(known.key)
                return None
            known.proc = proc
        try:
            with known.proc.oneshot():
                d = known.proc.as_dict(attrs=_ATTRS, ad_value=None)
                d["ppid"] = stat.ppid if stat is not None else known.proc.ppid()
        except psutil.NoSuchProcess:
            self._forget_locked(known.key)
            return None
        self.full_reads += 1
        info = _info_from_dict(known.key[0], d, None)
        known.info = replace(info, container=self._container(known.key[0]))
        known.full_at, known.light = now, False
        return known.info

    def _container(self, pid: int) -> Container | None:
        """The container ``pid`` runs in, named where the runtime's files say (full readings)."""
        found = container_of(pid)
        return self._names.name(found) if found is not None else None

    def _forget_locked(self, key: tuple[int, float]) -> None:
        self._cache.pop(key, None)
        known = self._at_pid.get(key[0])
        if known is not None and known.key == key:
            del self._at_pid[key[0]]

    def _count_new(self) -> None:
        """A new process was read: one less of read_many's allowance (NEW_PER_CALL)."""
        if self._unread_left is not None:
            self._unread_left -= 1

    def _may_read_new(self) -> bool:
        """Whether a new (or light-read) process may be read in full now (uses one up)."""
        if self._new_left is None:
            return True
        if self._new_left <= 0:
            return False
        self._new_left -= 1
        return True

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
        for key in [
            k for k, known in self._cache.items() if known.proc and not known.proc.is_running()
        ]:
            self._forget_locked(key)
        while len(self._cache) > limit:
            self._forget_locked(next(iter(self._cache)))  # dicts keep insertion order: oldest first


def _info_from_proc(
    pid: int, create_time: float, stat: _Stat, *, full: bool, container: Container | None = None
) -> ProcInfo | None:
    """What psutil would read, from /proc/PID/status (``full``: the real uid) or the owner of
    /proc/PID (light: the effective uid) and cmdline; None when the process has gone.

    The strings are cleaned here, as in :func:`_info_from_dict`.
    """
    if full:
        uid = _real_uid(_read_file(f"/proc/{pid}/status", 4096))
    else:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            uid = None
    if uid is None:
        return None
    raw = _read_file(f"/proc/{pid}/cmdline", allow_error=True)
    argv = tuple(clean(a.decode("utf-8", "surrogateescape")) for a in _argv(raw or b""))
    comm = clean(stat.comm.decode("utf-8", "surrogateescape"))
    # A zombie has no argv; that is not a permission problem.
    denied = raw is None and stat.state != b"Z"
    return ProcInfo(
        pid=pid,
        create_time=create_time,
        user=_user_name(uid),
        uid=uid,
        name=_long_name(comm, argv),
        cmdline=argv,
        status=_STATUS.get(stat.state),
        ppid=stat.ppid,
        host_rss_bytes=stat.rss_pages * _PAGE_BYTES,
        note=_denied_note(["cmdline"]) if denied else None,
        container=container,
    )


def _real_uid(status: bytes) -> int | None:
    """The real uid from /proc/PID/status ("Uid:\treal\teffective\tsaved\tfs")."""
    at = status.find(b"\nUid:")
    if at < 0:
        return None
    try:
        return int(status[at + 5 :].split(None, 1)[0])
    except (ValueError, IndexError):
        return None


def _argv(raw: bytes) -> list[bytes]:
    """/proc/PID/cmdline's arguments, split as psutil splits them (the same argv either way)."""
    if not raw:
        return []
    # A process that rewrote its title (setproctitle) may separate with spaces, not NULs.
    sep = b"\0" if raw.endswith(b"\0") else b" "
    if raw.endswith(sep):
        raw = raw[:-1]
    argv = raw.split(sep)
    if sep == b"\0" and len(argv) == 1 and b" " in raw:
        argv = raw.split(b" ")
    return argv


def _long_name(comm: str, argv: tuple[str, ...]) -> str:
    """psutil's name: the kernel truncates it to 15 characters; argv[0] may have it whole."""
    if len(comm) >= 15 and argv:
        whole = os.path.basename(argv[0])
        if whole.startswith(comm):
            return whole
    return comm


PASSWD = "/etc/passwd"
USER_NAME_TTL_S = 300.0  # names served by NSS (LDAP, sssd) change without /etc/passwd
_PASSWD_CHECK_S = 1.0  # /etc/passwd is looked at once a second at most, not once a process


class _UserNames:
    """uid -> name, remembered until /etc/passwd changes or USER_NAME_TTL_S passes.

    Not for ever: a user removed and their uid given to a new one must not keep the old name on
    root's screen, where the kill dialog names the owner. Thread-safe enough: a race looks a
    name up twice.
    """

    def __init__(self) -> None:
        self._names: dict[int, tuple[str, int, float]] = {}  # uid -> (name, stamp, until)
        self._stamp = 0
        self._stamp_until = 0.0

    def __call__(self, uid: int) -> str:
        now = time.monotonic()
        stamp = self._passwd_stamp(now)
        known = self._names.get(uid)
        if known is not None and known[1] == stamp and now < known[2]:
            return known[0]
        try:
            name = clean(pwd.getpwuid(uid).pw_name)
        except KeyError:
            name = str(uid)
        if len(self._names) >= 4096:  # bounded: uids come and go on a shared box
            self._names.clear()
        self._names[uid] = (name, stamp, now + USER_NAME_TTL_S)
        return name

    def _passwd_stamp(self, now: float) -> int:
        if now >= self._stamp_until:
            try:
                info = os.stat(PASSWD)
                self._stamp = hash((info.st_mtime_ns, info.st_ino, info.st_size))
            except OSError:
                self._stamp = 0
            self._stamp_until = now + _PASSWD_CHECK_S
        return self._stamp


_user_name = _UserNames()


def _cpu_percent(proc: psutil.Process | None) -> float | None:
    if proc is None:
        return None
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
