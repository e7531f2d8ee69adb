"""kill: pure decide() table, and real signals to spawned processes with refusals."""

from __future__ import annotations

import json
import os
import signal
import stat
from pathlib import Path

import psutil
import pytest

from gputop.engine.kill import Killer, Plan, ProcIdentity, Refusal, Signal, TargetFacts, decide
from gputop.errors import UsageError
from tests.engine.spawn import IGNORE_TERM, PY, TREE, ZOMBIE_PARENT, Spawner, status_of, wait_until

ME, MY_PARENT = 5000, 4999
# Waits until the child runs its own argv (before its exec the fork still shows ours).
READY_SLEEP = "import time; print('ready', flush=True); time.sleep(120)"
T0 = 1_700_000_000.0


def _facts(pid: int = 1234, **kw: object) -> TargetFacts:
    base: dict[str, object] = {
        "exists": True,
        "create_time": T0,
        "uid": 1000,
        "user": "alice",
        "status": "sleeping",
        "ppid": 77,
        "parent_name": "bash",
        "command": "python train.py",
    }
    base.update(kw)
    return TargetFacts(pid=pid, **base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pid", "seen_time", "facts_kw", "euid", "refusal_text"),
    [
        (1, T0, {}, 0, "PID 1 (init) is never signalled"),
        (ME, T0, {}, 0, "gputop itself"),
        (MY_PARENT, T0, {}, 0, "gputop's parent"),
        (0, T0, {}, 0, "not a process ID"),
        (1234, T0, {"exists": False}, 0, "has exited"),
        (1234, T0 - 5, {}, 0, "PID was reused"),
        (1234, None, {}, 0, "start time unknown"),
        (1234, T0, {}, 1001, "belongs to alice; only root"),
        (1234, T0, {"uid": None, "user": None}, 1001, "belongs to an unknown user"),
        (1234, T0, {"status": "zombie"}, 0, "defunct and cannot be killed; signal its parent 77"),
    ],
)
def test_decide_refusals(
    pid: int, seen_time: float | None, facts_kw: dict[str, object], euid: int, refusal_text: str
) -> None:
    result = decide(
        ProcIdentity(pid=pid, create_time=seen_time),
        Signal.TERM,
        _facts(pid, **facts_kw),
        euid=euid,
        own_pid=ME,
        own_ppid=MY_PARENT,
    )
    assert isinstance(result, Refusal)
    assert refusal_text in result.reason
    assert "\n" not in result.reason


@pytest.mark.parametrize(("euid", "uid"), [(0, 1000), (1000, 1000), (0, 0)])
def test_decide_plans(euid: int, uid: int) -> None:
    identity = ProcIdentity(pid=1234, create_time=T0 + 0.001)  # float noise is tolerated
    result = decide(
        identity, Signal.KILL, _facts(uid=uid), euid=euid, own_pid=ME, own_ppid=MY_PARENT
    )
    assert isinstance(result, Plan)
    assert result.targets == (identity,)
    assert result.command == "python train.py"


def test_signal_numbers() -> None:
    assert [s.signum for s in Signal] == [15, 9, 2]


def _identity(pid: int) -> ProcIdentity:
    return ProcIdentity(pid=pid, create_time=psutil.Process(pid).create_time())


def test_term_exits_and_is_reported(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    killer = Killer()
    result = killer.send(_identity(proc.pid), Signal.TERM, grace_s=10)
    assert result.ok
    assert result.exited is True
    assert "it exited" in result.message
    assert status_of(proc.pid) is None  # exited and reaped by the wait
    assert [(e.pid, e.signal, e.result) for e in killer.log] == [
        (proc.pid, Signal.TERM, "sending"),
        (proc.pid, Signal.TERM, "exited"),
    ]


def test_term_ignored_then_kill(spawner: Spawner) -> None:
    proc = spawner.ready(IGNORE_TERM)
    killer = Killer()
    identity = _identity(proc.pid)
    first = killer.send(identity, Signal.TERM, grace_s=0.3)
    assert first.ok
    assert first.exited is False
    assert first.still_running == (proc.pid,)
    assert "still running" in first.message
    second = killer.send(identity, Signal.KILL, grace_s=10)
    assert second.exited is True
    assert status_of(proc.pid) is None


def test_pid_reuse_is_refused(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    seen = ProcIdentity(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time() - 60)
    result = Killer().send(seen, Signal.KILL)
    assert not result.ok
    assert result.refusal is not None
    assert "reused" in result.message
    assert proc.poll() is None  # untouched


def test_other_users_process_refused_without_root(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    owner = psutil.Process(proc.pid).uids().real
    result = Killer(euid=owner + 1).send(_identity(proc.pid), Signal.KILL)
    assert not result.ok
    assert "only root can signal other users' processes" in result.message
    assert proc.poll() is None


def test_root_owned_pid_1_and_self_and_parent_refused() -> None:
    killer = Killer(euid=1000)
    for pid in (1, os.getpid(), os.getppid()):
        decision = killer.decide(_identity(pid), Signal.KILL)
        assert isinstance(decision, Refusal), pid


def test_vanished_pid_refused() -> None:
    proc = psutil.Popen([*PY, "pass"])
    identity = _identity(proc.pid)
    proc.wait()
    decision = Killer().decide(identity, Signal.TERM)
    assert isinstance(decision, Refusal)
    assert "has exited" in decision.reason


def test_defunct_refused_offering_parent(spawner: Spawner) -> None:
    parent = spawner.start(ZOMBIE_PARENT)
    zombie = spawner.first_line_pid(parent)
    assert wait_until(lambda: status_of(zombie) == "zombie")
    result = Killer().send(_identity(zombie), Signal.KILL)
    assert not result.ok
    assert result.refusal is not None
    assert f"signal its parent {parent.pid} (python" in result.message
    assert result.refusal.suggest is not None
    assert result.refusal.suggest.pid == parent.pid


def test_with_children_signals_the_tree(spawner: Spawner) -> None:
    parent = spawner.start(TREE)
    kid = spawner.first_line_pid(parent)
    killer = Killer()
    plan = killer.decide(_identity(parent.pid), Signal.TERM, with_children=True)
    assert isinstance(plan, Plan)
    assert [t.pid for t in plan.targets] == [kid, parent.pid]  # children first
    result = killer.send(_identity(parent.pid), Signal.TERM, with_children=True, grace_s=10)
    assert result.ok
    assert result.exited is True
    assert set(result.signalled) == {kid, parent.pid}
    assert wait_until(lambda: status_of(kid) in (None, "zombie"))


def test_audit_log_file(spawner: Spawner, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    proc = spawner.ready(READY_SLEEP)
    killer = Killer(audit_log=path)
    killer.send(ProcIdentity(pid=1, create_time=0.0), Signal.TERM)
    killer.send(_identity(proc.pid), Signal.KILL, grace_s=10)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(d["pid"], d["signal"], d["result"][:8]) for d in lines] == [
        (1, "TERM", "refused:"),
        (proc.pid, "KILL", "sending"),  # written before the signal
        (proc.pid, "KILL", "exited"),
    ]
    assert "time.sleep(120)" in lines[2]["command"]
    assert lines[2]["uid"] == os.getuid()
    assert len(killer.log) == 3
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds other users' command lines


def test_refusal_records_carry_the_facts_checked(spawner: Spawner, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    proc = spawner.ready(READY_SLEEP)
    seen = _identity(proc.pid)
    Killer(audit_log=path).send(
        ProcIdentity(pid=proc.pid, create_time=(seen.create_time or 0) - 100), Signal.TERM
    )
    Killer(audit_log=path, euid=os.getuid() + 4242).send(seen, Signal.TERM)
    reused, other_user = (json.loads(line) for line in path.read_text().splitlines())
    assert "different process" in reused["result"]
    assert reused["create_time_now"] == pytest.approx(seen.create_time)
    assert reused["create_time"] == pytest.approx((seen.create_time or 0) - 100)
    assert "time.sleep(120)" in reused["command"]
    assert reused["user"] and reused["uid"] == os.getuid()
    assert "only root" in other_user["result"]
    assert other_user["euid"] == os.getuid() + 4242
    assert other_user["uid"] == os.getuid()
    assert status_of(proc.pid) not in (None, "zombie")  # neither refusal sent anything


def test_hostile_command_reaches_the_audit_log_escaped(spawner: Spawner, tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    proc = spawner.ready(READY_SLEEP, "\x1b]0;OWNED\x07", "\u202e\x9b2J")
    Killer(audit_log=path).send(_identity(proc.pid), Signal.KILL, grace_s=10)
    raw = path.read_bytes()
    assert raw.isascii()
    for bad in ("\x1b", "\x07", "\x9b", "\u202e"):
        assert bad not in raw.decode()
    command = json.loads(raw.splitlines()[-1])["command"]
    assert "\\x1b]0;OWNED\\x07" in command
    assert "\\u202e\\x9b2J" in command


def test_no_audit_file_unless_asked(
    tmp_path: Path, spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    proc = spawner.start("import time; time.sleep(120)")
    Killer().send(_identity(proc.pid), Signal.KILL, grace_s=10)
    assert list(tmp_path.iterdir()) == []


def test_unwritable_audit_log_is_one_line_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot write audit log") as info:
        Killer(audit_log=tmp_path / "missing-dir" / "audit.jsonl")
    assert "\n" not in str(info.value)


def test_term_reaches_a_stopped_process(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    os.kill(proc.pid, signal.SIGSTOP)
    assert wait_until(lambda: status_of(proc.pid) == "stopped")
    result = Killer().send(_identity(proc.pid), Signal.TERM, grace_s=10)
    assert result.exited is True
