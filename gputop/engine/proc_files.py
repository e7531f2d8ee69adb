"""One process's /proc files, read and parsed into a :class:`~gputop.engine.model.ProcInfo`.

/proc/PID/stat, status and cmdline, or psutil's reading where there is no /proc: what
:class:`gputop.engine.procs.ProcReader` reads of a process, and keeps between readings. A file
that cannot be read (the process has gone, or is another user's) is a normal result, never an
exception. The process's own strings are cleaned here, where they enter the model.
"""

from __future__ import annotations

import os
import pwd
import time
from dataclasses import dataclass
from typing import Any, Literal, overload

import psutil

from gputop.engine.model import Container, ProcInfo
from gputop.engine.sanitize import clean, clean_optional


def denied_note(missing: list[str]) -> str:
    return "not permitted to read " + ", ".join(missing) + " (another user's process; run as root)"


def info_from_dict(pid: int, d: dict[str, Any], cpu_percent: float | None) -> ProcInfo:
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
    note = denied_note(missing) if missing and status != psutil.STATUS_ZOMBIE else None
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


def absent(pid: int) -> bool:
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
STATUS = {
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
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


@dataclass(frozen=True, slots=True)
class Stat:
    """The fields of /proc/PID/stat the reader uses."""

    start: bytes  # start time in clock ticks since boot: with the PID, the process identity
    comm: bytes
    state: bytes
    ppid: int
    cpu_ticks: int  # user + system time
    rss_pages: int


@overload
def read_file(path: str, size: int = ..., *, allow_error: Literal[False] = ...) -> bytes: ...
@overload
def read_file(path: str, size: int = ..., *, allow_error: Literal[True]) -> bytes | None: ...
def read_file(path: str, size: int = 1 << 17, *, allow_error: bool = False) -> bytes | None:
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


def read_stat(pid: int) -> Stat | None:
    """/proc/PID/stat, parsed; None when it cannot be read (gone, not permitted, no /proc)."""
    return parse_stat(read_file(f"/proc/{pid}/stat", 4096))


def parse_stat(data: bytes) -> Stat | None:
    if not data:
        return None
    head, _, tail = data.rpartition(b")")  # the name in parentheses may hold anything
    fields = tail.split()
    try:
        # fields 3, 4, 14, 15, 22 and 24 of proc(5)
        return Stat(
            start=fields[19],
            comm=head.partition(b"(")[2],
            state=fields[0],
            ppid=int(fields[1]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            rss_pages=int(fields[21]),
        )
    except (IndexError, ValueError):
        return None


def info_from_proc(
    pid: int, create_time: float, stat: Stat, *, full: bool, container: Container | None = None
) -> ProcInfo | None:
    """What psutil would read, from /proc/PID/status (``full``: the real uid) or the owner of
    /proc/PID (light: the effective uid) and cmdline; None when the process has gone.

    The strings are cleaned here, as in :func:`info_from_dict`.
    """
    if full:
        uid = _real_uid(read_file(f"/proc/{pid}/status", 4096))
    else:
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            uid = None
    if uid is None:
        return None
    raw = read_file(f"/proc/{pid}/cmdline", allow_error=True)
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
        status=STATUS.get(stat.state),
        ppid=stat.ppid,
        host_rss_bytes=stat.rss_pages * PAGE_BYTES,
        note=denied_note(["cmdline"]) if denied else None,
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


def psutil_cpu_percent(proc: psutil.Process | None) -> float | None:
    if proc is None:
        return None
    try:
        return proc.cpu_percent(interval=None)
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None
