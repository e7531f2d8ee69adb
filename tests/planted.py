"""What another user leaves where root is about to write: links, FIFOs, folders, their files.

Each thing is planted for real by another user (``nobody``): a forked copy of the test process
drops to that user and makes it, in a folder that user owns (as a home directory or a shared
spool would be). Planting needs root; the tests that use it are skipped otherwise.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

VICTIM_TEXT = "export PATH=/usr/bin\n"  # what root's own file holds; a planted link points at it


def nobody() -> pwd.struct_passwd:
    """The other user, or a skip when there is none or we cannot become it."""
    if os.geteuid() != 0:
        pytest.skip("planting as another user needs root")
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user to plant as")


def as_user(user: pwd.struct_passwd, action: Callable[[], None]) -> None:
    """Run ``action`` as ``user`` in a forked copy of this process; fail with its error."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            os.umask(0o022)
            action()
            status = 0
        except BaseException as exc:  # noqa: BLE001 - reported to the test, never raised in the fork
            os.write(write_end, repr(exc).encode())
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        error = pipe.read().decode()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"planting as {user.pw_name} failed: {error}"


@contextlib.contextmanager
def their_folder() -> Iterator[Path]:
    """A folder owned by ``nobody`` (mode 0755) under /tmp; removed after."""
    user = nobody()
    folder = Path(tempfile.mkdtemp(prefix="gputop-planted-", dir="/tmp"))
    try:
        os.chown(folder, user.pw_uid, user.pw_gid)
        folder.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Plant:
    """One hostile thing at ``path``, and the reason gputop must give for refusing it."""

    name: str
    reason_text: str  # "{nobody}": the other user, as gputop names it
    make: Callable[[Path, Path], None]  # (path, root's own file)

    @property
    def reason(self) -> str:
        user = nobody()
        return self.reason_text.format(nobody=f"user {user.pw_name} (uid {user.pw_uid})")


def _their_file(mode: int) -> Callable[[Path, Path], None]:
    def make(path: Path, victim: Path) -> None:
        def create() -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.write(fd, b"theirs\n")
            os.fchmod(fd, mode)
            os.close(fd)

        as_user(nobody(), create)

    return make


def _root_file(mode: int) -> Callable[[Path, Path], None]:
    def make(path: Path, victim: Path) -> None:
        path.write_text("root's\n")
        path.chmod(mode)

    return make


def _symlink(path: Path, victim: Path) -> None:
    as_user(nobody(), lambda: os.symlink(victim, path))


def _fifo(path: Path, victim: Path) -> None:
    as_user(nobody(), lambda: os.mkfifo(path, 0o666))


def _directory(path: Path, victim: Path) -> None:
    as_user(nobody(), lambda: os.mkdir(path, 0o777))


def _hard_link(path: Path, victim: Path) -> None:
    # Made by root: with fs.protected_hardlinks (the usual default) nobody may not link to a
    # file it does not own. Where a kernel allows it, another user could plant exactly this.
    os.link(victim, path)


PLANTS = [
    Plant("symlink", "is a symbolic link", _symlink),
    Plant("fifo", "is not a regular file (a FIFO)", _fifo),
    Plant("directory", "is not a regular file (a directory)", _directory),
    Plant("their-0600", "belongs to {nobody}, not to root", _their_file(0o600)),
    Plant("their-0644", "belongs to {nobody}, not to root", _their_file(0o644)),
    Plant("root-0666", "is writable by group/others (mode 0666)", _root_file(0o666)),
    Plant("root-0620", "is writable by group/others (mode 0620)", _root_file(0o620)),
    Plant(
        "hard-link",
        "has 2 hard links (writing it would change another name's file too)",
        _hard_link,
    ),
]


def victim_file(folder: Path) -> Path:
    """Root's own file (as /root/.bashrc is), in a folder only root may enter."""
    private = folder / "root-only"
    private.mkdir(mode=0o700)
    victim = private / "bashrc"
    victim.write_text(VICTIM_TEXT)
    victim.chmod(0o644)
    return victim


def unchanged(path: Path, before: os.stat_result) -> bool:
    """The file at ``path`` is the same file, with the same size, times and mode as ``before``."""
    now = path.lstat()
    keys = ("st_ino", "st_size", "st_mtime_ns", "st_mode", "st_uid")
    return all(getattr(now, k) == getattr(before, k) for k in keys)


class FifoReader:
    """Holds the read end of a FIFO open, as the user who planted it would; ``taken()`` is what
    was written into it (nothing, if gputop refused it)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def taken(self) -> bytes:
        try:
            return os.read(self.fd, 65536)
        except BlockingIOError:
            return b""

    def close(self) -> None:
        os.close(self.fd)


def returns_within(seconds: float, call: Callable[[], object]) -> object:
    """``call()``'s result or exception, run in a thread; fails the test if it hangs."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still blocked after {seconds} s"
    return outcome[0]
