"""--audit-log: a planted link, FIFO, folder or foreign file is refused, and no signal goes out
unrecorded; each record carries the command the user was shown and the one seen at send time."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop.engine.kill import Killer, ProcIdentity, Signal, target_facts
from gputop.errors import UsageError
from tests.engine.spawn import TREE, Spawner, status_of
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

READY_SLEEP = "import time; print('ready', flush=True); time.sleep(120)"

# Runs with its argv, then on SIGUSR1 exec()s itself with another: same PID, same start time.
CHANGES_ARGV = """
import os, signal, sys, time
AFTER = "print('changed', flush=True); import time; time.sleep(120)"
signal.signal(signal.SIGUSR1, lambda *_: os.execv(
    sys.executable, [sys.executable, "-S", "-c", AFTER, "--after-exec"]))
print("ready", flush=True)
while True:
    time.sleep(1)
"""


@pytest.fixture
def folder() -> Iterator[Path]:
    with their_folder() as path:
        yield path


def _identity(pid: int) -> ProcIdentity:
    return ProcIdentity(pid=pid, create_time=psutil.Process(pid).create_time())


def _alive(pid: int) -> bool:
    time.sleep(0.3)  # a signal sent would have had its effect by now
    return status_of(pid) not in (None, "zombie")


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_a_planted_log_is_refused_at_start(plant: Plant, folder: Path) -> None:
    victim = victim_file(folder)
    path = folder / "g.jsonl"
    plant.make(path, victim)
    reader = FifoReader(path) if plant.name == "fifo" else None
    before = path.lstat()
    try:
        outcome = returns_within(5, lambda: Killer(audit_log=path))
        if reader is not None:
            assert reader.taken() == b""
    finally:
        if reader is not None:
            reader.close()
    assert isinstance(outcome, UsageError), outcome
    assert str(outcome) == f"cannot write audit log {path}: {plant.reason}"
    assert unchanged(path, before)
    assert victim.read_text() == VICTIM_TEXT


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_a_log_planted_after_start_refuses_the_signal(
    plant: Plant, folder: Path, spawner: Spawner
) -> None:
    victim = victim_file(folder)
    victim_before = victim.stat()
    path = folder / "g.jsonl"
    killer = Killer(audit_log=path)  # a good log at start
    as_user(nobody(), lambda: os.unlink(path))  # the folder is theirs: so is what is in it
    plant.make(path, victim)
    reader = FifoReader(path) if plant.name == "fifo" else None
    proc = spawner.ready(READY_SLEEP)
    try:
        result = returns_within(5, lambda: killer.send(_identity(proc.pid), Signal.TERM))
        if reader is not None:
            assert reader.taken() == b""
    finally:
        if reader is not None:
            reader.close()
    assert _alive(proc.pid), "the signal was sent unrecorded"
    reason = f"TERM not sent to PID {proc.pid}: cannot write the audit log ({path}: {plant.reason})"
    assert getattr(result, "ok", None) is False, result
    assert getattr(result, "message", None) == reason
    assert unchanged(victim, victim_before)
    assert victim.read_text() == VICTIM_TEXT


def test_a_write_that_fails_refuses_the_signal(spawner: Spawner, tmp_path: Path) -> None:
    """A full disk, as a file size limit of 0 makes it (EFBIG), in a forked copy of the test."""
    assert signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN  # Python's own default
    path = tmp_path / "audit.jsonl"
    proc = spawner.ready(READY_SLEEP)
    seen = _identity(proc.pid)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            killer = Killer(audit_log=path)
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
            result = killer.send(seen, Signal.KILL, grace_s=0.5)
            os.write(write_end, json.dumps([result.ok, result.message]).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        ok, message = json.loads(pipe.read())
    os.waitpid(child, 0)
    assert not ok
    assert message == (
        f"KILL not sent to PID {proc.pid}: cannot write the audit log ({path}: File too large)"
    )
    assert _alive(proc.pid)
    assert path.read_bytes() == b""


def test_dev_full_is_refused_at_start() -> None:
    with pytest.raises(UsageError) as info:
        Killer(audit_log="/dev/full")
    assert str(info.value) == (
        "cannot write audit log /dev/full: is not a regular file (a character device)"
    )


def test_a_fresh_log_is_0600_even_under_umask_0(spawner: Spawner, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    old = os.umask(0)
    try:
        killer = Killer(audit_log=path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    proc = spawner.ready(READY_SLEEP)
    assert killer.send(_identity(proc.pid), Signal.KILL, grace_s=10).exited is True
    assert len(path.read_text().splitlines()) == 2
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_record_has_the_command_shown_and_the_one_at_send_time(
    spawner: Spawner, tmp_path: Path
) -> None:
    path = tmp_path / "audit.jsonl"
    proc = spawner.ready(CHANGES_ARGV, "--before-exec")
    shown = target_facts(proc.pid).command  # what the dialog's row showed
    assert "--before-exec" in shown
    seen = _identity(proc.pid)
    os.kill(proc.pid, signal.SIGUSR1)  # between the dialog and the send: a new argv
    assert proc.stdout is not None and proc.stdout.readline().strip() == "changed"
    result = Killer(audit_log=path).send(seen, Signal.TERM, grace_s=10, command_shown=shown)
    assert result.exited is True  # the same process: its start time did not change
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["result"] for r in records] == ["sending", "exited"]
    for record in records:
        assert record["command_shown"] == shown
        assert "--after-exec" in record["command"] and "--before-exec" not in record["command"]


def test_a_refusal_records_the_command_shown(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    Killer(audit_log=path).send(
        ProcIdentity(pid=1, create_time=0.0), Signal.TERM, command_shown="/sbin/init"
    )
    (record,) = (json.loads(line) for line in path.read_text().splitlines())
    assert record["result"].startswith("refused: PID 1")
    assert record["command_shown"] == "/sbin/init"
    Killer(audit_log=path).send(ProcIdentity(pid=1, create_time=0.0), Signal.TERM)
    old_keys = {"time_wall", "pid", "create_time", "user", "command", "signal", "result"}
    second = json.loads(path.read_text().splitlines()[1])
    assert old_keys < set(second) and second["command_shown"] is None  # only a field added


def test_children_were_not_shown(spawner: Spawner, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    parent = spawner.start(TREE)
    kid = spawner.first_line_pid(parent)
    Killer(audit_log=path).send(
        _identity(parent.pid), Signal.KILL, with_children=True, grace_s=10, command_shown="job"
    )
    records = [json.loads(line) for line in path.read_text().splitlines()]
    shown = {(r["pid"], r["command_shown"]) for r in records}
    assert shown == {(kid, None), (parent.pid, "job")}
