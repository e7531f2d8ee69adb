"""`query -f FILE` as root: a planted link, FIFO, folder or foreign file is refused untouched."""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gputop.commands import query
from gputop.errors import UsageError
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource
from tests.planted import (
    PLANTS,
    VICTIM_TEXT,
    FifoReader,
    Plant,
    returns_within,
    their_folder,
    unchanged,
    victim_file,
)

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder() -> Iterator[Path]:
    with their_folder() as path:
        yield path


def _gputop(*argv: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP", "TEXTUAL"))}
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_a_planted_file_is_refused_and_not_truncated(
    plant: Plant, folder: Path, box: Box, run_cli: Cli
) -> None:
    victim = victim_file(folder)
    path = folder / "out.csv"
    plant.make(path, victim)
    reader = FifoReader(path) if plant.name == "fifo" else None
    before, victim_before = path.lstat(), victim.stat()
    try:
        result = returns_within(
            10, lambda: run_cli(box("demo"), "query", "--query-gpu=index", "-f", str(path))
        )
        if reader is not None:
            assert reader.taken() == b""
    finally:
        if reader is not None:
            reader.close()
    assert isinstance(result, Result), result
    assert (result.rc, result.out) == (2, "")
    assert result.err == f"gputop: cannot write {path}: {plant.reason}\n"
    assert unchanged(path, before)  # another user's file is not emptied before its refusal
    assert unchanged(victim, victim_before) and victim.read_text() == VICTIM_TEXT


def test_the_real_cli_refuses_a_symlink(folder: Path) -> None:
    victim = victim_file(folder)
    path = folder / "out.csv"
    next(p for p in PLANTS if p.name == "symlink").make(path, victim)
    result = _gputop("query", "--demo", "--query-gpu=index", "-f", str(path))
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"gputop: cannot write {path}: is a symbolic link\n"
    assert victim.read_text() == VICTIM_TEXT


def test_a_full_disk_is_one_line(tmp_path: Path) -> None:
    """A file that cannot grow (a size limit of 0: EFBIG, as ENOSPC on a full disk), in a forked
    copy of the test: the demo's driver process needs to write files of its own."""
    path = tmp_path / "out.csv"
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            try:
                with query._output(str(path)) as out:
                    out.write("0\n")
            except UsageError as exc:
                os.write(write_end, str(exc).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        error = pipe.read()
    os.waitpid(child, 0)
    assert error == f"cannot write {path}: File too large"


def test_our_own_file_is_emptied_and_rewritten_0600(tmp_path: Path, box: Box, run_cli: Cli) -> None:
    path = tmp_path / "out.csv"
    path.write_text("a much longer line from the last run\n" * 20)
    path.chmod(0o644)
    result = run_cli(
        box("demo"), "query", "--query-gpu=index", "--format=csv,noheader", "-f", str(path)
    )
    assert result.rc == 0, result.err
    assert path.read_text() == "0\n1\n2\n3\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # an existing file keeps its mode
    fresh = tmp_path / "fresh.csv"
    old = os.umask(0)
    try:
        assert run_cli(box("demo"), "query", "--query-gpu=index", "-f", str(fresh)).rc == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
