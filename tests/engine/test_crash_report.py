"""The crash report's name is guessable: a link planted there is never written through."""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.engine.terminal_guard import save_report as _save_report
from tests.planted import VICTIM_TEXT, as_user, nobody, their_folder, unchanged, victim_file


@pytest.fixture
def folder() -> Iterator[Path]:
    with their_folder() as path:
        yield path


def _guessed_names(seconds: int) -> list[str]:
    """The names a report gets in the next ``seconds`` (the same stem gputop builds)."""
    now = time.time()
    return [
        time.strftime("crash-%Y%m%d-%H%M%S", time.localtime(now + s)) + f"-{os.getppid()}.txt"
        for s in range(seconds)
    ]


def test_a_link_at_the_guessed_name_is_not_followed(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`sudo -E gputop`: root's report goes to the user's state folder, where they planted links."""
    victim = victim_file(folder)
    before = victim.stat()
    reports = folder / "gputop"
    as_user(nobody(), lambda: os.mkdir(reports))
    names = _guessed_names(10)

    def plant() -> None:
        for name in names:
            os.symlink(victim, reports / name)

    as_user(nobody(), plant)
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    saved = _save_report("Fatal Python error: Segmentation fault\n")
    assert saved is not None
    path = Path(saved)
    assert path.parent == reports and path.name not in names  # the next free name
    assert not path.is_symlink()
    assert path.read_text() == "Fatal Python error: Segmentation fault\n"
    info = path.stat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (os.geteuid(), 0o600)
    assert unchanged(victim, before) and victim.read_text() == VICTIM_TEXT


def test_a_folder_that_cannot_take_it_falls_back_to_the_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "state"
    blocked.write_text("a file where the state folder should be\n")
    fallback = tmp_path / "tmp"
    fallback.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    saved = _save_report("dump\n")
    assert saved is not None and Path(saved).parent == fallback
    assert Path(saved).read_text() == "dump\n"
