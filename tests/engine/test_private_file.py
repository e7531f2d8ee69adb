"""open_private / create_new: what another user planted is refused, with the reason, untouched."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.engine.private_file import (
    ExistsAlready,
    UnsafeFile,
    check_descriptor,
    create_new,
    open_private,
)
from tests.planted import (
    PLANTS,
    VICTIM_TEXT,
    FifoReader,
    Plant,
    as_user,
    nobody,
    returns_within,
    their_folder,
    unchanged,
    victim_file,
)


@pytest.fixture
def folder() -> Iterator[Path]:
    with their_folder() as path:
        yield path


def _refused(call: object) -> str:
    assert isinstance(call, UnsafeFile), f"not refused: {call!r}"
    return call.reason


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
@pytest.mark.parametrize("truncate", [False, True], ids=["append", "truncate"])
def test_a_planted_path_is_refused_and_left_as_it_was(
    plant: Plant, truncate: bool, folder: Path
) -> None:
    victim = victim_file(folder)
    path = folder / "g.jsonl"
    plant.make(path, victim)
    reader = FifoReader(path) if plant.name == "fifo" else None  # its planter reads every record
    before, victim_before = path.lstat(), victim.stat()
    try:
        outcome = returns_within(
            5, lambda: open_private(path, append=not truncate, truncate=truncate)
        )
        assert _refused(outcome) == plant.reason
        if reader is not None:
            assert reader.taken() == b""
    finally:
        if reader is not None:
            reader.close()
    assert unchanged(path, before)  # not truncated, not re-moded, not replaced
    assert unchanged(victim, victim_before)
    assert victim.read_text() == VICTIM_TEXT


def test_a_fifo_with_no_reader_is_refused_at_once(folder: Path) -> None:
    path = folder / "g.jsonl"
    next(p for p in PLANTS if p.name == "fifo").make(path, path)
    assert _refused(returns_within(5, lambda: open_private(path))) == (
        "is not a regular file (a FIFO)"
    )


def test_a_socket_and_a_device_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        assert _refused(returns_within(5, lambda: open_private(path))) == (
            "is not a regular file (a socket)"
        )
    assert _refused(returns_within(5, lambda: open_private("/dev/null"))) == (
        "is not a regular file (a character device)"
    )


def test_a_new_file_is_ours_and_0600_even_under_umask_0(tmp_path: Path) -> None:
    path = tmp_path / "new.log"
    old = os.umask(0)
    try:
        fd = open_private(path, append=True)
    finally:
        os.umask(old)
    try:
        os.write(fd, b"one\n")
        assert os.get_blocking(fd)  # O_NONBLOCK was only for the open
    finally:
        os.close(fd)
    info = path.stat()
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert info.st_uid == os.geteuid()
    assert path.read_bytes() == b"one\n"


def test_append_appends_and_truncate_empties_our_own_file(tmp_path: Path) -> None:
    path = tmp_path / "ours.log"
    path.write_text("old\n")
    path.chmod(0o644)  # readable by others is fine; writable is not
    fd = open_private(path, append=True)
    os.write(fd, b"new\n")
    os.close(fd)
    assert path.read_text() == "old\nnew\n"
    fd = open_private(path, truncate=True)
    os.write(fd, b"only\n")
    os.close(fd)
    assert path.read_text() == "only\n"


def test_a_missing_folder_keeps_the_system_reason(tmp_path: Path) -> None:
    assert _refused(returns_within(5, lambda: open_private(tmp_path / "no" / "f"))) == (
        "No such file or directory"
    )


def test_create_new_never_follows_or_reuses(folder: Path) -> None:
    victim = victim_file(folder)
    before = victim.stat()
    path = folder / "crash.txt"
    next(p for p in PLANTS if p.name == "symlink").make(path, victim)
    with pytest.raises(ExistsAlready) as info:
        create_new(path)
    assert info.value.reason == "already exists (a symbolic link)"
    assert unchanged(victim, before)
    fresh = folder / "fresh.txt"
    old = os.umask(0)
    try:
        fd = create_new(fresh)
    finally:
        os.umask(old)
    try:
        check_descriptor(fd)  # a file create_new made passes every check
    finally:
        os.close(fd)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    with pytest.raises(ExistsAlready, match=r"^already exists$"):
        create_new(fresh)


def test_an_ordinary_users_group_writable_file_is_theirs_but_not_roots(folder: Path) -> None:
    """Under the user-private-group umask 002 a user's own files are 0664: theirs to write.

    Root refuses the very same mode (its group may be anyone's); nobody writes it, but still
    refuses a file every user may write (0666).
    """
    user = nobody()
    shared, open_to_all = folder / "mine-0664", folder / "mine-0666"

    def as_them() -> None:
        for path, mode in ((shared, 0o664), (open_to_all, 0o666)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            os.fchmod(fd, mode)
            os.close(fd)
        os.close(open_private(shared, truncate=True))
        refused = _call(lambda: open_private(open_to_all, append=True))
        assert _refused(refused) == "is writable by group/others (mode 0666)"

    as_user(user, as_them)
    os.chown(shared, 0, 0)  # the same file, root's now: its group may be anyone's
    assert _refused(_call(lambda: open_private(shared))) == (
        "is writable by group/others (mode 0664)"
    )


def _call(action: Callable[[], int]) -> object:
    try:
        os.close(action())
    except UnsafeFile as exc:
        return exc
    return None
