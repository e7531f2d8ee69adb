"""Orphans: workers adopted by init or a subreaper, on real processes, and the pure rule."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import psutil
import pytest

from gputop.engine.enrich import enrich, is_orphaned, reparented
from gputop.engine.holders import scan_holders
from gputop.engine.model import ProcessRow, ProcInfo, ProcState
from gputop.engine.proc_lookup import is_namespace_init, session
from tests.engine.spawn import (
    DAEMON,
    JOB_OWN_GROUP,
    JOB_OWN_SESSION,
    JOB_REAPERS_GROUP,
    LAUNCHER,
    ORPHAN_MAKER,
    PIPELINE,
    REAPER,
    Spawner,
    ppid_of,
    status_of,
    wait_until,
)
from tests.fakes import make_gpu, make_snapshot

H, ORP = ProcState.HOLDER, ProcState.ORPHAN
UNSEEN = 2**22 + 17  # above the largest possible pid_max: never a PID here
UNSHARE = ("unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child")


def _row(dev_dir: Path, pid: int) -> ProcessRow:
    """The row of ``pid`` after a holder scan of ``dev_dir`` (the driver lists nothing)."""
    snap = enrich(
        make_snapshot(gpus=(make_gpu(0, memory_used_bytes=0),)), holders=scan_holders(str(dev_dir))
    )
    rows = {r.pid: r for r in snap.processes}
    assert pid in rows, f"no row for {pid}: {sorted(rows)}"
    return rows[pid]


def _adopted(pid: int, former_parent: int) -> bool:
    return wait_until(lambda: ppid_of(pid) not in (None, former_parent))


def test_worker_whose_rank_died_is_an_orphan_while_its_launcher_lives(
    spawner: Spawner, dev_dir: Path
) -> None:
    launcher = spawner.start(LAUNCHER, str(dev_dir / "nvidia0"), new_session=True)
    rank, worker = spawner.first_line_pids(launcher)
    before = _row(dev_dir, worker)
    assert before.states == (H,)  # a child of a live parent in its own group
    assert before.parent_note is None
    os.kill(rank, signal.SIGKILL)
    assert _adopted(worker, rank)
    assert launcher.poll() is None  # the launcher, the job's group leader, lives on
    row = _row(dev_dir, worker)
    assert row.states == (ORP, H)
    assert row.stuck
    assert row.parent_note is not None
    assert row.parent_note.startswith(f"its parent exited; adopted by {ppid_of(worker)} (")
    assert f"while its job leader {launcher.pid} (python" in row.parent_note
    assert row.parent_note.endswith(") lives")


def test_orphan_whose_job_leader_has_gone(spawner: Spawner, dev_dir: Path) -> None:
    leader = spawner.start(ORPHAN_MAKER, str(dev_dir / "nvidia0"), new_session=True)
    worker = spawner.first_line_pid(leader)
    leader.wait(timeout=30)  # the job leader, the worker's parent, exits and is reaped
    assert _adopted(worker, leader.pid)
    row = _row(dev_dir, worker)
    assert row.states == (ORP, H)
    assert row.parent_note is not None
    assert row.parent_note.endswith(f"; its job leader {leader.pid} has exited too")


def test_worker_adopted_by_a_subreaper_is_an_orphan(spawner: Spawner, dev_dir: Path) -> None:
    reaper = spawner.start(
        REAPER, str(dev_dir / "nvidia0"), JOB_OWN_SESSION, "subreaper", new_session=True
    )
    rank, worker = spawner.first_line_pids(reaper)
    os.kill(rank, signal.SIGKILL)
    assert _adopted(worker, rank)
    assert ppid_of(worker) == reaper.pid != 1
    row = _row(dev_dir, worker)
    assert row.states == (ORP, H)
    assert row.parent_note is not None
    assert row.parent_note.startswith(f"its parent exited; adopted by {reaper.pid} (python")


def _in_pid_namespace(spawner: Spawner, dev_dir: Path, job: str) -> tuple[int, int, int]:
    """Start REAPER as PID 1 of a new PID namespace running ``job``: (init, first, second)."""
    if shutil.which("unshare") is None or subprocess.call([*UNSHARE, "true"]) != 0:
        pytest.skip("no unprivileged PID namespaces here")
    ns = spawner.start(REAPER, str(dev_dir / "nvidia0"), job, "init", prefix=UNSHARE)
    first, second = spawner.first_line_pids(ns)
    assert wait_until(lambda: bool(psutil.Process(ns.pid).children()))
    init = psutil.Process(ns.pid).children()[0].pid  # unshare's child: the namespace's init
    spawner.adopt(init)
    assert is_namespace_init(init)
    return init, first, second


def test_orphan_adopted_by_a_containers_init_in_its_own_session(
    spawner: Spawner, dev_dir: Path
) -> None:
    """tini as PID 1 of a PID namespace adopts the worker without leaving the session."""
    init, rank, worker = _in_pid_namespace(spawner, dev_dir, JOB_OWN_GROUP)
    assert _row(dev_dir, worker).states == (H,)
    os.kill(rank, signal.SIGKILL)
    assert _adopted(worker, rank)
    assert ppid_of(worker) == init
    assert os.getsid(init) == os.getsid(worker)  # only the namespace-init rule finds it
    assert _row(dev_dir, worker).states == (ORP, H)


def test_child_of_a_containers_init_in_its_group_is_not_an_orphan(
    spawner: Spawner, dev_dir: Path
) -> None:
    """A container's `sh -c 'python train.py'`: PID 1 forked it, in its own group."""
    init, parent, worker = _in_pid_namespace(spawner, dev_dir, JOB_REAPERS_GROUP)
    assert parent == init and os.getpgid(worker) == os.getpgid(init)
    assert _row(dev_dir, worker).states == (H,)


@pytest.mark.parametrize(
    ("new_session", "first"),
    [
        (True, "lives"),  # the shell is the session leader
        (True, "exit-first"),  # `cat file | python train.py` once cat is done
        (False, "lives"),  # a shell that is not: `bash` in bash, `set -m`
        (False, "exit-first"),
    ],
)
def test_pipeline_member_of_a_job_control_shell_is_not_an_orphan(
    spawner: Spawner, dev_dir: Path, new_session: bool, first: str
) -> None:
    shell = spawner.start(
        PIPELINE,
        str(dev_dir / "nvidia0"),
        first,
        new_session=new_session,
        own_group=not new_session,
    )
    leader, member = spawner.first_line_pids(shell)
    assert os.getpgid(member) == leader != os.getpgid(shell.pid)  # outside its parent's group
    assert (os.getsid(shell.pid) == shell.pid) is new_session
    assert (status_of(leader) is None) is (first == "exit-first")
    assert ppid_of(member) == shell.pid
    assert _row(dev_dir, member).states == (H,)


def test_daemon_leading_its_own_group_is_not_an_orphan(spawner: Spawner, dev_dir: Path) -> None:
    starter = spawner.start(DAEMON, str(dev_dir / "nvidia0"))
    daemon = spawner.first_line_pid(starter)
    starter.wait(timeout=30)
    assert _adopted(daemon, starter.pid)
    assert os.getpgid(daemon) == daemon
    assert _row(dev_dir, daemon).states == (H,)


def test_a_vanished_process_is_not_an_orphan() -> None:
    gone = ProcInfo(pid=UNSEEN, ppid=1, name="python")
    assert is_orphaned(gone) == (False, None)
    parent_gone = ProcInfo(pid=os.getpid(), ppid=UNSEEN, name="python")
    assert is_orphaned(parent_gone) == (False, None)


def test_session_and_namespace_init_of_real_pids() -> None:
    assert session(os.getpid()) == os.getsid(0)
    assert session(UNSEEN) is None
    assert is_namespace_init(1)
    assert not is_namespace_init(os.getpid())
    assert not is_namespace_init(UNSEEN)


# pid 50; its group (job) and session, its parent's PID, group and session, and whether the
# parent is a PID namespace's init (None: that must not be asked, it costs a /proc read)
@pytest.mark.parametrize(
    ("pgid", "sid", "ppid", "parent_pgid", "parent_sid", "parent_is_init", "expected"),
    [
        (50, 30, 40, 40, 30, None, False),  # it leads its group: a job of its own (a daemon)
        (40, 30, 40, 40, 30, None, False),  # its parent forked it, in its group
        (40, 30, 41, 40, 30, None, False),  # adopted by its job's own launcher: not seen
        (1, 1, 1, 1, 1, None, False),  # a container's `sh -c` as PID 1, and its child
        (40, 30, 1, 1, 1, None, True),  # init adopted it (init's session is not its own)
        (40, 30, 900, 900, 900, None, True),  # a subreaper in another session adopted it
        (40, 30, 30, 30, 30, False, False),  # its job-control shell, the session leader
        (40, 30, 35, 35, 30, False, False),  # a job-control shell, not the session leader
        (40, 1, 1, 1, 1, None, True),  # a container's init (tini) adopted it, seen inside
        (40, 30, 35, 35, 30, True, True),  # the same seen from the host (tini is 35 there)
        (40, 30, 0, 0, 0, None, False),  # its parent is outside this PID namespace
    ],
)
def test_reparented_table(
    pgid: int,
    sid: int,
    ppid: int,
    parent_pgid: int,
    parent_sid: int,
    parent_is_init: bool | None,
    expected: bool,
) -> None:
    def is_init() -> bool:
        assert parent_is_init is not None, "read /proc/PPID/status where it decides nothing"
        return parent_is_init

    got = reparented(
        pid=50,
        pgid=pgid,
        sid=sid,
        ppid=ppid,
        parent_pgid=parent_pgid,
        parent_sid=parent_sid,
        parent_is_init=is_init,
    )
    assert got is expected
