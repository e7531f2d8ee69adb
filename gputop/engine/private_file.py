"""Files gputop writes, perhaps as root, opened the way sudo and logrotate open theirs.

gputop often runs as root and writes where it is told: the audit log, ``query -f``, the textfile
for node_exporter, a crash report in the temp folder. Another user may have planted something at
that path first: a symbolic link to ``/root/.bashrc``, a FIFO that hangs the open and reads every
record, a file of theirs (or one anyone may write) that would stay in their hands. So:

- the last component is never followed (``O_NOFOLLOW``): a symbolic link is refused;
- the open never blocks (``O_NONBLOCK``, cleared after): a FIFO is refused, not waited on;
- everything else is checked on the opened descriptor, the very file that will be written, not
  on the path (which could be swapped between a check and the open): a regular file with one
  name (a hard link would be another file too), owned by our effective user, writable by no
  other user; and, when we are root, by no group either (an ordinary user's own files are
  often 0664 under the user-private-group umask 002, and its group is theirs alone);
- a new file is created 0600; truncating waits until the checks passed.

Every refusal is :class:`UnsafeFile`, whose ``reason`` completes "cannot write F: …".
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

from gputop.engine.sanitize import clean

MODE_NEW = 0o600  # readable by its owner alone: an audit log holds other users' command lines
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH  # for root
_WRITABLE_BY_ANYONE = stat.S_IWOTH  # for everyone else

# stat's S_IFMT kinds, in words, for "is not a regular file (a FIFO)".
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISLNK, "a symbolic link"),
)


class UnsafeFile(Exception):
    """A file gputop will not write; ``reason`` reads after the path: "is a symbolic link"."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ExistsAlready(UnsafeFile):
    """create_new() found something at the path: pick another name."""


def open_private(path: str | Path, *, append: bool = False, truncate: bool = False) -> int:
    """A write-only descriptor on ``path`` (created 0600), after every check; else UnsafeFile.

    ``append``: each write lands at the end (O_APPEND). ``truncate``: emptied, but only once the
    file proved to be ours (O_TRUNC would empty another user's file before it is refused).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    if append:
        flags |= os.O_APPEND
    try:
        fd = os.open(path, flags, MODE_NEW)
    except OSError as exc:
        raise UnsafeFile(_open_failure(path, exc)) from None
    try:
        check_descriptor(fd)
        os.set_blocking(fd, True)  # a regular file: back to ordinary writes
        if truncate:
            os.ftruncate(fd, 0)
    except UnsafeFile:
        os.close(fd)
        raise
    except OSError as exc:
        os.close(fd)
        raise UnsafeFile(exc.strerror or str(exc)) from None
    return fd


def create_new(path: str | Path) -> int:
    """A write-only descriptor on a file created here and now (O_EXCL), mode 0600.

    For names another user can guess (a temporary file, a crash report in /tmp): anything already
    there, a symbolic link included, is UnsafeFile with errno EEXIST (``already exists``).
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(path, flags, MODE_NEW)
    except OSError as exc:
        if exc.errno == errno.EEXIST:
            raise ExistsAlready(_describe_existing(path)) from None
        raise UnsafeFile(_open_failure(path, exc)) from None


FRESH_NAME_TRIES = 10  # names create_fresh() tries before it gives up


def create_fresh(names: Iterable[str]) -> tuple[str, int]:
    """The first of ``names`` (at most :data:`FRESH_NAME_TRIES`) that :func:`create_new` can
    create, and its descriptor; ExistsAlready when each was taken, UnsafeFile as create_new."""
    for name in islice(names, FRESH_NAME_TRIES):
        try:
            return name, create_new(name)
        except ExistsAlready:
            continue  # planted, or taken a moment ago: the next name
    raise ExistsAlready(f"no fresh temporary name after {FRESH_NAME_TRIES} tries")


def check_descriptor(fd: int) -> None:
    """UnsafeFile unless ``fd`` is one regular file, owned by our euid, writable by us alone
    (by us and our group, when we are not root)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFile(f"is not a regular file ({_kind(info.st_mode)})")
    euid = os.geteuid()
    if info.st_uid != euid:
        me = _user_name(euid) or f"uid {euid}"
        raise UnsafeFile(f"belongs to {_owner(info.st_uid)}, not to {me}")
    if info.st_mode & (_WRITABLE_BY_OTHERS if euid == 0 else _WRITABLE_BY_ANYONE):
        mode = stat.S_IMODE(info.st_mode)
        raise UnsafeFile(f"is writable by group/others (mode {mode:04o})")
    if info.st_nlink > 1:
        raise UnsafeFile(
            f"has {info.st_nlink} hard links (writing it would change another name's file too)"
        )


def _open_failure(path: str | Path, exc: OSError) -> str:
    """The reason an open failed, naming what is there when that is the cause."""
    # ELOOP: the last component is a link (O_NOFOLLOW); EISDIR: a directory opened to write;
    # ENXIO: a FIFO with no reader (O_NONBLOCK) or a socket.
    if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
        with contextlib.suppress(OSError):
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                return "is a symbolic link"
            if not stat.S_ISREG(mode):
                return f"is not a regular file ({_kind(mode)})"
    return exc.strerror or str(exc)


def _describe_existing(path: str | Path) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "already exists"
    if stat.S_ISLNK(mode):
        return "already exists (a symbolic link)"
    return "already exists" if stat.S_ISREG(mode) else f"already exists ({_kind(mode)})"


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _user_name(uid: int) -> str | None:
    try:
        return clean(pwd.getpwuid(uid).pw_name)  # another user chose it: no control characters
    except KeyError:
        return None


def _owner(uid: int) -> str:
    """'user nobody (uid 65534)', or 'uid 4242' when no user has that uid."""
    name = _user_name(uid)
    return f"uid {uid}" if name is None else f"user {name} (uid {uid})"
