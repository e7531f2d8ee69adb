"""What the host OS says about a PID, through psutil.

A PID that vanished between the driver's list and this read, or that we may not read, is a normal
result (``visible=False`` or a ``note``), never an exception. CPU % needs two readings of the same
process, so :class:`ProcReader` keeps a small, bounded cache of ``psutil.Process`` objects.

One process's /proc files are read and parsed in :mod:`gputop.engine.proc_files`; one-off
lookups (parents, children, environment) are in :mod:`gputop.engine.proc_lookup`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import psutil

from gputop.engine import proc_files
from gputop.engine.changes import same
from gputop.engine.containers import ContainerNames, container_of
from gputop.engine.model import Blocked, Container, ProcInfo
from gputop.engine.proc_files import (
    CLOCK_TICKS,
    PAGE_BYTES,
    STATUS,
    Stat,
    absent,
    denied_note,
    info_from_dict,
    info_from_proc,
    psutil_cpu_percent,
    read_stat,
)
from gputop.engine.sanitize import clean

# No "ppid": psutil checks for a reused PID in ppid() by building another Process, and the reader
# has the parent PID from /proc/PID/stat already.
_ATTRS = ["name", "username", "uids", "cmdline", "status", "create_time", "memory_info"]

NOT_VISIBLE_NOTE = (
    "PID not visible here: it has exited, or it runs in another PID namespace "
    "(gputop inside a container sees host PIDs from the driver)"
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


# How long a process's command line, name, user and uid are reused before they are read again.
# They rarely change while the process lives; exec() changes the name in /proc/PID/stat, which
# is read every time and forces a full reading at once.
FULL_READ_EVERY_S = 5.0
# Periodic full readings per read_many call (one a tick): 5,000 GPU processes are refreshed in
# turn, each within about 500 ticks, not 1,000 a second; up to 50 processes still every 5 s.
# What they refresh (command line, user, container) seldom changes but by exec(), which
# changes the name in /proc/PID/stat, read at once (per-tick budgets: gputop.engine.changes).
REFRESHES_PER_CALL = 10
# Processes read from /proc/PID/stat per read_many call; more are read in turn.
STATS_PER_CALL = 1000
# ... and of those idle at their last reading (no CPU time since the one before): an idle
# inference worker's CPU %, state and RSS are the ones most likely to stand (every 20 s at 5,000).
IDLE_STATS_PER_CALL = 250
# New processes read in full per read_many call. Past this, a new process gets a light reading:
# the owner of /proc/PID (its effective uid) stands for its user, as /proc/PID/status (the real
# uid) costs as much again; its full reading comes on a later call (5,000 new GPU processes on
# the first frame).
NEW_FULL_PER_CALL = 500
# New processes read at all per read_many call; the others are pending (:func:`pending`) until a
# later call, so the first tick on 5,000 GPU processes does not read them all.
NEW_PER_CALL = 1000
PENDING_NOTE = "not read yet: gputop reads at most 1,000 new processes a tick"


# State D (uninterruptible sleep) at one reading is normal: a disk read takes milliseconds. A
# process is called blocked (ProcInfo.blocked) when readings at least this far apart saw it in D
# and it did not run in between (its context switches, /proc/PID/status, unchanged): one kernel
# call that has not returned. The dashboard's next tick tells; a one-shot view looks again
# (gputop.engine.verdicts.confirm_blocked).
BLOCKED_AFTER_S = 0.5
# Kernel stack frames of a blocked process kept: those in NVIDIA's modules, at most this many.
DRIVER_FRAMES = 8


def context_switches(pid: int) -> int | None:
    """Times the process (its main thread) was switched out, voluntarily or not, from
    /proc/PID/status; None when unreadable. Unchanged between two readings: it did not run."""
    data = proc_files.read_file(f"/proc/{pid}/status", 8192)
    total = 0
    found = 0
    for key in (b"\nvoluntary_ctxt_switches:", b"\nnonvoluntary_ctxt_switches:"):
        at = data.find(key)
        if at < 0:
            continue
        try:
            total += int(data[at + len(key) :].split(None, 1)[0])
        except (ValueError, IndexError):
            return None
        found += 1
    return total if found else None


def wchan(pid: int) -> str | None:
    """The kernel function the process sleeps in (/proc/PID/wchan); None when not readable (the
    kernel writes "0" to those who may not know)."""
    raw = proc_files.read_file(f"/proc/{pid}/wchan", 256).strip()
    if not raw or raw == b"0":
        return None
    return clean(raw.decode("ascii", "replace"))


def driver_frames(pid: int) -> tuple[tuple[str, ...], bool]:
    """The frames of /proc/PID/stack in NVIDIA's modules (``nvidia``, ``nvidia_uvm``...), as
    "function [module]", innermost first; and whether the stack could be read (root only)."""
    raw = proc_files.read_file(f"/proc/{pid}/stack", 16384, allow_error=True)
    if raw is None:
        return (), False
    frames: list[str] = []
    for line in raw.decode("ascii", "replace").splitlines():
        # "[<0>] uvm_spin_loop+0x5a/0x90 [nvidia_uvm]"
        frame = line.partition("] ")[2] if line.startswith("[<") else line
        function, _, rest = frame.partition("+")
        module = rest.partition(" ")[2].strip()
        if "nvidia" in module.lower() or "uvm" in function.lower():
            frames.append(clean(f"{function} {module}".strip()))
            if len(frames) == DRIVER_FRAMES:
                break
    return tuple(frames), True


def blocked_facts(pid: int, since_mono: float) -> Blocked:
    """What the kernel says of a blocked process's wait (wchan, NVIDIA frames when readable)."""
    frames, stack_read = driver_frames(pid)
    return Blocked(
        since_mono=since_mono, wchan=wchan(pid), driver_frames=frames, stack_read=stack_read
    )


@dataclass(slots=True)
class _Turns:
    """read_many's last PID list, grouped by turn, so that a call for the same list looks only
    at the PIDs due: a PID is due when ``(pid + call) % turns == 0`` (``idle_turns`` for one
    idle at its last reading), or always while it has no standing answer."""

    pids: tuple[int, ...]  # the PIDs the call was given, in order
    out: dict[int, ProcInfo]  # the last answers
    turns: int
    idle_turns: int
    busy: list[list[int]]  # PIDs by pid % turns
    idle: list[list[int]]  # PIDs by pid % idle_turns
    always: set[int]  # PIDs read every call: not visible, pending, or gone

    @classmethod
    def of(
        cls,
        pids: tuple[int, ...],
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

    def due(self, calls: int, at_pid: dict[int, _Known]) -> dict[int, None]:
        """The PIDs to look at in call number ``calls``, in order (a dict as an ordered set)."""
        due = dict.fromkeys(self.always)
        for bucket, idle in (
            (self.busy[-calls % self.turns], False),
            (self.idle[-calls % self.idle_turns], True),
        ):
            for pid in bucket:
                known = at_pid.get(pid)
                shown = known.shown if known is not None else None
                if shown is None or (shown.cpu_percent == 0.0) is idle:
                    due[pid] = None
        return due


def _due(pid: int, calls: int, shown: ProcInfo, turns: int, idle_turns: int) -> bool:
    """Whether a process with a standing answer is read in call number ``calls``: in turn by
    PID, idle ones (no CPU time at their last reading) less often."""
    return (pid + calls) % (idle_turns if shown.cpu_percent == 0.0 else turns) == 0


@dataclass(slots=True)
class _Known:
    """A process the reader has read before, and what it keeps of it between readings."""

    key: tuple[int, float]  # (pid, psutil create time)
    proc: psutil.Process | None  # None until a psutil reading is asked for (read from /proc)
    stat: Stat | None = None  # the last /proc/PID/stat reading: the CPU baseline
    stat_at: float = 0.0  # clock time of that reading
    info: ProcInfo | None = None  # the last full reading (psutil)
    full_at: float = 0.0  # clock time of that reading
    shown: ProcInfo | None = None  # the last answer given for it
    shown_from: ProcInfo | None = None  # the reading `shown` was made from
    raw: bytes | None = None  # /proc/PID/stat as `stat` was parsed from
    light: bool = False  # info is a light reading: the full one is still owed
    d_since: float | None = None  # clock time of the first reading of its present D wait
    d_switches: int | None = None  # its context switches at that reading (None: unreadable)
    blocked: Blocked | None = None  # that wait, once it counts (BLOCKED_AFTER_S)


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
        IDLE_STATS_PER_CALL)`` calls (20 at 5,000). Given the same PIDs in the same order as the
        last call, only the PIDs whose turn it is are looked at, and ``changed`` names those
        whose answer differs from the last call's (None after a call that looked at every PID).
        The budgets are the rules of gputop.engine.changes' per-tick work.
        """
        with self._lock:
            self._refreshes_left = REFRESHES_PER_CALL
            self._new_left = NEW_FULL_PER_CALL
            self._unread_left = NEW_PER_CALL
            self._boot_time = None
            calls = self._calls = self._calls + 1
            try:
                asked = tuple(pids)
                last = self._turns
                if last is not None and last.pids == asked:
                    return self._read_turns_locked(last, calls)
                return self._read_every_locked(asked, calls)
            finally:
                self._refreshes_left = self._new_left = self._unread_left = None

    def _read_every_locked(self, pids: tuple[int, ...], calls: int) -> dict[int, ProcInfo]:
        """read_many for a new list of PIDs: each is looked at (its answer stands when it is
        not its turn); the others are forgotten."""
        self._turns = None
        self.changed = None
        out: dict[int, ProcInfo] = {}
        keep: set[tuple[int, float]] = set()
        # Past STATS_PER_CALL processes, each is read every `turns` calls, in turn by PID;
        # in between its last reading stands (its CPU % then spans those calls).
        turns = -(-len(pids) // STATS_PER_CALL)
        idle_turns = -(-len(pids) // IDLE_STATS_PER_CALL)
        at_pid = self._at_pid if idle_turns > 1 else {}
        for pid in pids:
            known = at_pid.get(pid)
            shown = known.shown if known is not None else None
            if (
                known is not None
                and shown is not None
                and not _due(pid, calls, shown, turns, idle_turns)
            ):
                out[pid] = shown
                keep.add(known.key)
                continue
            out[pid], key = self._read_locked(pid)
            if key is not None:
                keep.add(key)
        for key in [k for k in self._cache if k not in keep]:
            self._forget_locked(key)
        # What was asked for is kept whatever its size: evicting some of it would only make the
        # next call read them again in full (bounded by the driver's list).
        self._evict_locked(floor=len(keep))
        if idle_turns > 1:
            self._turns = _Turns.of(pids, out, turns, idle_turns, self._at_pid)
        return out

    def _read_turns_locked(self, turns: _Turns, calls: int) -> dict[int, ProcInfo]:
        """read_many for the same PIDs as the last call: only the PIDs whose turn it is (and
        those with no standing answer) are looked at, not every PID."""
        at_pid, last = self._at_pid, turns.out
        out = dict(last)
        changed: set[int] = set()
        for pid in turns.due(calls, at_pid):
            before = at_pid.get(pid)
            info, key = self._read_locked(pid)
            if not same(info, last[pid]):
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
        """One process's answer and the key it is known by (None: not a process read here)."""
        known = self._at_pid.get(pid)
        if known is None and not fresh and self._past_new_allowance(pid):
            return pending(pid), None
        # read_file and parse_stat are looked up in proc_files, as proc_files' own reads do:
        # one place to watch (or count) every /proc/PID/stat read.
        raw: bytes | None = (
            proc_files.read_file(f"/proc/{pid}/stat", 4096) if known is not None else b""
        )
        if known is not None and raw and raw == known.raw and not fresh:
            standing = self._standing(known)
            if standing is not None:
                return standing, known.key
        stat = proc_files.parse_stat(raw) if raw else None
        if known is None or stat is None or known.stat is None or stat.start != known.stat.start:
            new = None if fresh else self._new_from_proc(pid)
            found = new if new is not None else self._identify(pid, stat)
            if isinstance(found, ProcInfo):
                return found, None
            known, stat = found
            raw = None  # that stat is another reading than `raw`
        known.raw = raw
        now = self._clock()
        info = self._reading(known, stat, now, fresh)
        if info is None:
            return not_visible(pid), None
        if stat is None:  # no /proc/PID/stat (not Linux): psutil's own CPU counters
            return replace(info, cpu_percent=psutil_cpu_percent(known.proc)), known.key
        return self._answer(known, info, stat, now), known.key

    def _past_new_allowance(self, pid: int) -> bool:
        """Past the call's allowance of new processes (used up where a new process is read:
        _count_new); another namespace's PID (absent here) is answered as ever."""
        return self._unread_left is not None and self._unread_left <= 0 and not absent(pid)

    def _standing(self, known: _Known) -> ProcInfo | None:
        """The last answer again, for the very same /proc/PID/stat as last time (no CPU time
        used, same state, parent and RSS) of an idle process not due a full reading; else None."""
        now = self._clock()
        shown = known.shown
        if (
            shown is not None
            and known.shown_from is known.info
            and shown.cpu_percent == 0.0
            and not known.light
            # a D wait not yet counted: a later reading may count it
            and (known.d_since is None or known.blocked is not None)
            and (
                now - known.full_at < self.full_every_s
                # due, but this call's periodic full readings are spent (at thousands of
                # processes, nearly all are due: each is read in full every ~500 s)
                or (self._refreshes_left is not None and self._refreshes_left <= 0)
            )
        ):
            known.stat_at = now
            return shown
        return None

    def _reading(
        self, known: _Known, stat: Stat | None, now: float, fresh: bool
    ) -> ProcInfo | None:
        """The process's full reading: the kept one, or made anew where due (None: gone)."""
        last, info = known.stat, known.info
        if fresh or info is None or stat is None:
            return self._full_locked(known, stat, now)  # psutil
        if (
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
            return self._reread_locked(known, stat, now)  # /proc
        return info

    def _answer(self, known: _Known, info: ProcInfo, stat: Stat, now: float) -> ProcInfo:
        """The answer from the full reading and this stat: CPU % since the last stat; the last
        answer again when equal (the reader's own object)."""
        last = known.stat
        cpu = None  # the first reading of a process says nothing about its CPU use
        if last is not None:
            elapsed = now - known.stat_at
            used = (stat.cpu_ticks - last.cpu_ticks) / CLOCK_TICKS
            cpu = used / elapsed * 100 if elapsed > 0 else 0.0
        known.stat, known.stat_at = stat, now
        zombie = stat.state == b"Z"
        status = STATUS.get(stat.state, info.status)
        rss = info.host_rss_bytes if zombie else stat.rss_pages * PAGE_BYTES
        blocked = _blocked(known, stat.state, now)
        shown = known.shown
        if (
            shown is not None
            and known.shown_from is info  # no full reading since
            and shown.cpu_percent == cpu
            and shown.host_rss_bytes == rss
            and shown.ppid == stat.ppid
            and shown.status == status
            and shown.blocked is blocked
        ):
            return shown  # unchanged (an idle worker)
        shown = ProcInfo(
            pid=known.key[0],
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
            blocked=blocked,
        )
        known.shown, known.shown_from = shown, info
        return shown

    def _identify(self, pid: int, stat: Stat | None) -> tuple[_Known, Stat | None] | ProcInfo:
        """The known process now at ``pid`` (a new one if its identity changed) and its stat,
        or why there is none."""
        if absent(pid) or not psutil.pid_exists(pid):
            # A PID from another namespace: no psutil.Process, which would read /proc and
            # raise, every tick, for every such process.
            return not_visible(pid)
        if stat is None:  # read before the Process, so a PID reused in between shows
            stat = read_stat(pid)
        try:
            proc = psutil.Process(pid)
            key = (pid, proc.create_time())
        except (psutil.NoSuchProcess, ValueError):
            return not_visible(pid)
        except psutil.AccessDenied:
            return ProcInfo(pid=pid, note=denied_note(["the process"]))
        known = self._cache.get(key)
        if known is None:
            known = self._cache[key] = _Known(key, proc)
            self._count_new()
            self._may_read_new()  # a full reading follows: it uses up the call's allowance
            psutil_cpu_percent(proc)  # psutil's baseline, used only where /proc/PID/stat is missing
        elif known.proc is None:
            known.proc = proc
        self._at_pid[pid] = known
        return known, stat

    def _new_from_proc(self, pid: int) -> tuple[_Known, Stat] | None:
        """A process new to the reader, read from /proc alone: in full while this call's
        allowance lasts, else light (None: not here, or no /proc/PID/stat)."""
        stat = read_stat(pid)
        if stat is None:
            return None
        if self._boot_time is None:
            self._boot_time = psutil.boot_time()
        # psutil's create time, the same float: a psutil reading later finds the same key.
        key = (pid, float(stat.start) / CLOCK_TICKS + self._boot_time)
        known = self._cache.get(key)
        if known is None:
            full = self._may_read_new()
            box = self._container(pid) if full else None
            info = info_from_proc(pid, key[1], stat, full=full, container=box)
            if info is None:
                return None
            self.full_reads += full
            known = self._cache[key] = _Known(key, None, info=info, light=not full)
            self._count_new()
            known.full_at = self._clock()
        self._at_pid[pid] = known
        return known, stat

    def _reread_locked(self, known: _Known, stat: Stat, now: float) -> ProcInfo | None:
        """A full reading from /proc (None: the process has gone)."""
        pid = known.key[0]
        info = info_from_proc(pid, known.key[1], stat, full=True, container=self._container(pid))
        if info is None:
            self._forget_locked(known.key)
            return None
        self.full_reads += 1
        if info == known.info:
            # Unchanged (nearly always): the same object tells the sampler the row is as well.
            info = known.info
        known.info, known.full_at, known.light = info, now, False
        return info

    def _full_locked(self, known: _Known, stat: Stat | None, now: float) -> ProcInfo | None:
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
        info = info_from_dict(known.key[0], d, None)
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


def _blocked(known: _Known, state: bytes, now: float) -> Blocked | None:
    """The process's D wait once it counts (BLOCKED_AFTER_S), kept on ``known`` between
    readings; None while it is not in D, or not for long enough yet."""
    if state != b"D":
        known.d_since = known.d_switches = known.blocked = None
        return None
    pid = known.key[0]
    switches = context_switches(pid)
    if known.d_since is None or switches != known.d_switches:
        # A new wait: the first reading in D, or it ran since the last one.
        known.d_since, known.d_switches, known.blocked = now, switches, None
        return None
    if known.blocked is None and now - known.d_since >= BLOCKED_AFTER_S:
        known.blocked = blocked_facts(pid, known.d_since)
    return known.blocked
