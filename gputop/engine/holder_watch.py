"""The holder scan a little at a time: bounded work per tick however many processes the box runs.

A full scan (:func:`gputop.engine.holders.scan_holders`) reads every process's maps and fd links,
about 70 µs a process here: 0.2 s at 2,000 processes, 0.8 s at 10,000. :class:`HolderWatch` keeps
what it learnt of each PID and, each tick, looks again only where something may have changed:

1. PIDs born since the last tick are read in full at once. The kernel's last handed-out PID
   (``/proc/loadavg``) says whether there are any: the few in between are looked up one by one,
   and /proc is listed when they are many or the PID counter wrapped.
2. Every tick, a cheap check of: holders NVML does not list (the stuck ones: rows only this scan
   finds), PIDs NVML lists for the first time, and PIDs first seen less than ``YOUNG_S`` ago (a
   process opens the device files when CUDA starts, seconds after the process did).
3. Everything else is checked round-robin, a slice a tick, each PID once per sweep. A sweep lasts
   ``min_sweep_s`` (5 s), longer on a large box: the last sweep's measured cost divided by
   ``budget`` (a share of one core), at most ``MAX_SWEEP_S``.

A check is one ``stat()`` of ``/proc/PID/fd``: its size is the number of open fds (Linux 6.2 and
later; older kernels count the links instead) and its inode changes when a new process takes the
PID. A process whose check is unchanged since its last full read is not read again, since opening
a device file adds an fd. (One that opens a device, maps it and closes the fd between two checks,
with as many fds as before, is missed until its fd count next changes.)

At start every PID is unread: they are read in full at up to ``catch_up_s`` of CPU a tick (all
of them in the first tick on a box of a thousand processes), PIDs NVML lists first, so the first
frame never waits for a whole scan of a large box. A listed PID not read yet is not in
``HolderScan.checked``: its row shows no device files and no suspect note until it is read.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from gputop.engine.holders import HolderScan, device_prefix, look_at, names_of, note_for

YOUNG_S = 30.0  # how long a newly seen PID is checked every tick
YOUNG_MAX = 512  # at most this many of them (a build storm spawns thousands)
MAX_SWEEP_S = 60.0  # the longest sweep, whatever its cost
_FIRST_COST_S = 8e-6  # a check's cost before one was measured (about 6 µs here)
_PROBE_COST = 5  # looking up one PID costs about this many times its share of a /proc listing
# The first frame waits on the first tick: it reads a third of catch_up_s (30 ms, all of a box of
# about 400 processes here), the later ticks the whole of it.
FIRST_CATCH_UP_SHARE = 0.3


@dataclass(slots=True)
class _Pid:
    key: tuple[int, int] | None = None  # (inode, fd count) of /proc/PID/fd at the last full read
    holds: tuple[str, ...] = ()


class HolderWatch:
    """Finds ``<dev_dir>/nvidia*`` holders incrementally; see the module docstring.

    Not thread-safe: one thread (the sampler's) calls :meth:`tick`.
    """

    def __init__(
        self,
        dev_dir: str = "/dev",
        proc_root: str = "/proc",
        *,
        min_sweep_s: float = 5.0,
        budget: float = 0.002,
        catch_up_s: float = 0.1,
        euid: int | None = None,
    ) -> None:
        self.dev_dir = dev_dir
        self.proc_root = proc_root
        self.min_sweep_s = min_sweep_s
        self.budget = budget
        self.catch_up_s = catch_up_s
        self._euid = os.geteuid() if euid is None else euid
        self._prefix = device_prefix(dev_dir)
        self._sized = _fd_dir_has_size(proc_root)
        self._seen: dict[int, _Pid] = {}
        # Kept as they change, so a tick's work does not grow with the box:
        self._holding: set[int] = set()
        self._denied: set[int] = set()
        self._unread: deque[int] = deque()  # known, never read in full (the start-up backlog)
        self._young: dict[int, float] = {}  # PID -> when first seen, oldest first
        self._listed: frozenset[int] = frozenset()
        self._order: list[int] = []  # this sweep's PIDs, checked in slices
        self._cursor = 0
        self._sweep_cost_s = 0.0  # routine work spent in this sweep so far
        self._sweep_s: float | None = None
        self._last_pid: int | None = None
        self._note: str | None = None
        self._looked = 0
        self._full = 0
        self._ticks = 0
        # The last result's findings, handed out again while unchanged (the same objects tell
        # the sampler's rows that nothing changed, without a look at each).
        self._holders: dict[int, tuple[str, ...]] | None = None  # None: to be made anew
        self._checked: frozenset[int] = frozenset()
        self._checked_for: frozenset[int] | None = None  # the listed PIDs `_checked` is of
        self._unreadable: frozenset[int] = frozenset()

    @property
    def sweep_s(self) -> float:
        """How long a sweep lasts now: every process is checked at least this often."""
        if self._sweep_s is None:
            estimate = len(self._seen) * _FIRST_COST_S / self.budget
            return min(MAX_SWEEP_S, max(self.min_sweep_s, estimate))
        return self._sweep_s

    def tick(self, interval_s: float, listed: Collection[int] = ()) -> HolderScan:
        """Do one tick's share of the scan; ``listed`` are the PIDs NVML lists now."""
        start = time.monotonic()
        self._looked = self._full = 0
        self._ticks += 1
        if self._cursor >= len(self._order):
            self._end_sweep()
            routine = time.perf_counter()
            self._list_proc()
            self._order, self._cursor = list(self._seen), 0
            self._sweep_cost_s += time.perf_counter() - routine
        else:
            self._births()
        # The same PIDs as last tick (nearly always): the same set, and no new ones to look at.
        listed = self._listed if listed == self._listed else frozenset(listed)
        self._catch_up(listed)
        if listed is not self._listed:
            for pid in listed - self._listed:
                if pid not in self._seen:
                    self._born(pid)  # listed before we saw it born
                else:
                    self._check(pid)
        self._listed = listed
        for pid in list(self._holding - listed):
            self._check(pid)
        for pid in self._young_pids(start):
            self._check(pid)
        routine = time.perf_counter()
        share = math.ceil(len(self._order) * interval_s / self.sweep_s)
        end = min(len(self._order), self._cursor + max(1, share))
        self._check_slice(self._order[self._cursor : end])
        self._cursor = end
        self._sweep_cost_s += time.perf_counter() - routine
        return self._result(start, listed)

    def _end_sweep(self) -> None:
        """Size the next sweep from the cost of the one that ended."""
        if self._order:
            cost = self._sweep_cost_s / self.budget
            self._sweep_s = min(MAX_SWEEP_S, max(self.min_sweep_s, cost))
        self._sweep_cost_s = 0.0

    def _list_proc(self) -> None:
        """List /proc: forget the PIDs that went, read the new ones (unread ones at start)."""
        try:
            pids = {int(e.name) for e in os.scandir(self.proc_root) if e.name.isdigit()}
        except OSError as exc:
            self._note = f"cannot read {self.proc_root}: {exc.strerror}"
            return
        self._note = None
        first = not self._seen and self._last_pid is None
        self._last_pid = _last_pid(self.proc_root)
        for pid in self._seen.keys() - pids:
            self._forget(pid)
        for pid in sorted(pids - self._seen.keys()):
            if first:
                self._seen[pid] = _Pid()
                self._unread.append(pid)
            else:
                self._born(pid)

    def _births(self) -> None:
        """Read the PIDs born since the last tick, found from the kernel's last PID."""
        last, prev = _last_pid(self.proc_root), self._last_pid
        if last is not None and last == prev:
            return
        if last is None or prev is None or last < prev:  # unknown, or the counter wrapped
            self._list_proc()
            return
        if (last - prev) * _PROBE_COST > len(self._seen):  # many: one listing is cheaper
            self._list_proc()
            return
        self._last_pid = last
        for pid in range(prev + 1, last + 1):
            if pid not in self._seen and _leads_its_group(self.proc_root, pid):
                self._born(pid)

    def _born(self, pid: int) -> None:
        if pid in self._listed:
            self._checked_for = None  # listed before its birth was seen: checked from now
        self._young[pid] = time.monotonic()
        if len(self._young) > YOUNG_MAX:
            del self._young[next(iter(self._young))]
        self._seen[pid] = _Pid()
        self._order.append(pid)  # this sweep checks it too, after its young days
        self._read(pid)

    def _catch_up(self, listed: frozenset[int]) -> None:
        """Read unread PIDs (the start-up backlog) for up to ``catch_up_s``, listed ones first:
        until the watch has read a listed PID, enrich cannot tell whether it holds a device."""
        if not self._unread:
            return
        share = FIRST_CATCH_UP_SHARE if self._ticks == 1 else 1.0
        stop = time.perf_counter() + self.catch_up_s * share
        seen = self._seen
        for pids in (listed, self._popped()):
            for pid in pids:
                rec = seen.get(pid)
                if rec is not None and rec.key is None:
                    self._read(pid)
                    if time.perf_counter() >= stop:  # after one read at least: it always moves
                        return

    def _popped(self) -> Iterator[int]:
        """The backlog's PIDs, each taken off it as it is handed out."""
        while self._unread:
            yield self._unread.popleft()

    def _young_pids(self, now: float) -> list[int]:
        while self._young:
            pid, born = next(iter(self._young.items()))
            if now - born < YOUNG_S and pid in self._seen:
                break
            del self._young[pid]
        return list(self._young)

    def _check_slice(self, pids: list[int]) -> None:
        """:meth:`_check` for many PIDs: the sweep's inner loop, most of the watch's cost."""
        if not self._sized:
            for pid in pids:
                if pid in self._seen:
                    self._check(pid)
            return
        seen, stat, root = self._seen, os.stat, self.proc_root
        changed: list[tuple[int, tuple[int, int] | None]] = []
        for pid in pids:
            rec = seen.get(pid)
            if rec is None or rec.key is None:
                continue
            try:
                st = stat(f"{root}/{pid}/fd")
            except FileNotFoundError:
                changed.append((pid, None))
                continue
            except OSError:
                changed.append((pid, (-1, -1)))
                continue
            if (st.st_ino, st.st_size) != rec.key:
                changed.append((pid, (st.st_ino, st.st_size)))
        self._looked += len(pids)
        for pid, key in changed:
            if key is None:
                self._forget(pid)
            elif key != seen[pid].key:
                self._read(pid, key)

    def _check(self, pid: int) -> None:
        """Look at ``pid`` again if its fds changed since its last full read."""
        rec = self._seen[pid]
        if rec.key is None:
            return  # still in the start-up backlog
        self._looked += 1
        key = self._fd_key(pid)
        if key is None:
            self._forget(pid)
        elif key != rec.key:
            self._read(pid, key)

    def _read(self, pid: int, key: tuple[int, int] | None = None) -> None:
        """Read one PID in full (maps and fd links)."""
        if key is None:
            self._looked += 1
            key = self._fd_key(pid)
            if key is None:
                self._forget(pid)
                return
        self._full += 1
        seen = look_at(os.path.join(self.proc_root, str(pid)), self._prefix)
        if seen.gone:
            self._forget(pid)
            return
        rec = self._seen[pid]
        holds = names_of(seen.found)
        if holds != rec.holds:
            self._holders = None
        # The key was taken before the read: fds opened meanwhile change it for the next check.
        rec.key, rec.holds = key, holds
        _put(self._holding, pid, bool(rec.holds))
        _put(self._denied, pid, seen.denied)

    def _fd_key(self, pid: int) -> tuple[int, int] | None:
        """(inode, fd count) of /proc/PID/fd, or None when the process has gone."""
        path = f"{self.proc_root}/{pid}/fd"
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        except OSError:
            return (-1, -1)
        if self._sized:
            return (st.st_ino, st.st_size)
        try:
            return (st.st_ino, len(os.listdir(path)))
        except FileNotFoundError:
            return None
        except OSError:
            return (st.st_ino, -1)

    def _forget(self, pid: int) -> None:
        if pid in self._holding:
            self._holders = None
        if pid in self._listed:
            self._checked_for = None
        self._seen.pop(pid, None)
        self._young.pop(pid, None)
        self._holding.discard(pid)
        self._denied.discard(pid)

    def _result(self, start: float, listed: frozenset[int]) -> HolderScan:
        holders = self._holders
        if holders is None:
            holders = self._holders = {pid: self._seen[pid].holds for pid in self._holding}
        unreadable = self._unreadable
        if unreadable != self._denied:
            unreadable = self._unreadable = frozenset(self._denied)
        if self._unread:  # the start-up backlog: PIDs known but not read yet
            checked = frozenset(pid for pid in listed if (rec := self._seen.get(pid)) and rec.key)
            self._checked_for = None
        elif listed is self._checked_for:  # no listed PID came, or went from /proc, since
            checked = self._checked
        else:  # every known PID has been read
            checked = listed - (listed - self._seen.keys())
            self._checked_for = listed
        if checked == self._checked:
            checked = self._checked
        self._checked = checked
        return HolderScan(
            holders=holders,
            note=self._note or note_for(len(unreadable), self._euid),
            scanned=len(self._seen),
            denied=len(unreadable),
            unreadable=unreadable,
            taken_at_mono=start,
            duration_s=time.monotonic() - start,
            dev_dir=self.dev_dir,
            proc_root=self.proc_root,
            checked=checked,
            sweep_s=self.sweep_s,
            looked=self._looked,
            full_looks=self._full,
        )


def _put(pids: set[int], pid: int, member: bool) -> None:
    if member:
        pids.add(pid)
    else:
        pids.discard(pid)


def _fd_dir_has_size(proc_root: str) -> bool:
    """True when stat() of /proc/PID/fd gives the fd count (Linux 6.2+): ours is never 0."""
    try:
        return os.stat(os.path.join(proc_root, "self", "fd")).st_size > 0
    except OSError:
        return False


def _last_pid(proc_root: str) -> int | None:
    """The last PID the kernel handed out (a process or a thread), from /proc/loadavg."""
    try:
        with open(os.path.join(proc_root, "loadavg"), "rb") as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def _leads_its_group(proc_root: str, pid: int) -> bool:
    """True for a process (its thread group's leader), False for a thread or a gone PID."""
    # /proc lists processes only, but /proc/TID of any thread can be opened too.
    with contextlib.suppress(OSError, ValueError):
        with open(os.path.join(proc_root, str(pid), "status"), "rb") as f:
            head = f.read(1024)
        start = head.index(b"\nTgid:") + 6
        return int(head[start : head.index(b"\n", start)]) == pid
    return False
