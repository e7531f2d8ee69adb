"""A PID the driver still lists after it exited (its memory held by a worker that kept the
device files open, as seen on a real H200): shown as exited, not as another namespace's,
when gputop sees every host PID; and the test that tells the two apart."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gputop.commands.doctor import diagnose
from gputop.engine import enrich as enrich_module
from gputop.engine import pidns
from gputop.engine.enrich import EXITED_NOTE, RowMemo, enrich
from gputop.engine.holders import scan_holders
from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcState, Snapshot
from gputop.engine.procs import ProcReader
from tests.engine.spawn import HOLD, Spawner
from tests.fakes import GiB, make_gpu, make_snapshot


def _exited_pid() -> int:
    """The PID of a real process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-S", "-c", "pass"])
    proc.wait(timeout=30)
    return proc.pid


def _listing(*pids: int, simulated: bool = False) -> Snapshot:
    procs = tuple(
        GpuProcess(pid=p, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=GiB)
        for p in pids
    )
    snap = make_snapshot(gpus=(make_gpu(0, processes=procs, memory_used_bytes=len(pids) * GiB),))
    return replace(snap, system=replace(snap.system, simulated=simulated))


def _row(snapshot: Snapshot, pid: int) -> ProcessRow:
    return next(r for r in snapshot.processes if r.pid == pid)


@pytest.fixture
def sees_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: True)


@pytest.mark.usefixtures("sees_all")
def test_a_listed_pid_that_exited_is_shown_exited_with_who_keeps_its_memory(
    spawner: Spawner, dev_dir: Path
) -> None:
    gone = _exited_pid()
    worker = spawner.ready(HOLD, str(dev_dir / "nvidia0"))  # kept the device files open
    snap = enrich(_listing(gone), holders=scan_holders(str(dev_dir)))
    row = _row(snap, gone)
    assert row.states == (ProcState.EXITED,)
    assert not row.stuck  # nothing left to signal: the worker is the stuck one
    assert row.used_memory_bytes == GiB
    assert row.info.note is not None
    assert row.info.note.startswith(EXITED_NOTE)
    assert f"freed when {worker.pid} " in row.info.note
    assert _row(snap, worker.pid).stuck
    # No advice to run gputop on the host: it is there.
    assert snap.hidden_pids_note is None
    text = diagnose(snap).text
    assert "Exited, yet still listed by the driver" in text
    assert f"PID {gone}  [exited]" in text
    assert f"freed when {worker.pid} " in text


@pytest.mark.usefixtures("sees_all")
def test_an_exited_row_is_the_same_object_while_nothing_changed(
    spawner: Spawner, dev_dir: Path
) -> None:
    gone = _exited_pid()
    snap = _listing(gone)
    memo, reader = RowMemo(), ProcReader()  # as the sampler keeps them

    def tick() -> ProcessRow:
        holders = scan_holders(str(dev_dir))
        return _row(enrich(snap, holders=holders, memo=memo, reader=reader), gone)

    first = tick()
    assert tick() is first
    assert first.info.note == EXITED_NOTE  # no holder: no one named
    worker = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    later = tick()
    assert later is not first
    assert later.info.note is not None
    assert str(worker.pid) in later.info.note


def test_without_seeing_every_host_pid_it_may_be_another_namespace_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gone = _exited_pid()
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: False)
    assert _row(enrich(_listing(gone)), gone).states == (ProcState.NAMESPACE,)
    # The demo's stand-in PIDs stand for another namespace's, wherever gputop runs.
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: True)
    assert _row(enrich(_listing(gone, simulated=True)), gone).states == (ProcState.NAMESPACE,)


def _fake_proc(tmp_path: Path, mountinfo: str) -> tuple[str, int]:
    """A /proc with self/ns/pid and self/mountinfo; the inode its ns/pid has."""
    ns = tmp_path / "self" / "ns"
    ns.mkdir(parents=True)
    (ns / "pid").write_text("")
    (tmp_path / "self" / "mountinfo").write_text(mountinfo)
    return str(tmp_path), os.stat(ns / "pid").st_ino


PROC_LINE = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc {}\n"
ROOT_LINE = "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,hidepid=2\n"


def test_sees_driver_pids_in_the_first_pid_namespace_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, ino = _fake_proc(tmp_path, ROOT_LINE + PROC_LINE.format("rw"))
    monkeypatch.setattr(pidns, "INIT_PID_NS_INO", ino)
    assert pidns.sees_driver_pids(root)
    monkeypatch.setattr(pidns, "INIT_PID_NS_INO", ino + 1)  # a container's own namespace
    assert not pidns.sees_driver_pids(root)
    assert not pidns.sees_driver_pids(str(tmp_path / "missing"))


@pytest.mark.parametrize(
    ("options", "hidden"),
    [
        ("rw", False),
        ("rw,hidepid=0", False),
        ("rw,hidepid=2", True),
        ("rw,hidepid=invisible", True),
    ],
)
def test_hidepid_hides_other_users_pids_from_non_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: str, hidden: bool
) -> None:
    root, ino = _fake_proc(tmp_path, ROOT_LINE + PROC_LINE.format(options))
    monkeypatch.setattr(pidns, "INIT_PID_NS_INO", ino)
    assert pidns.hides_pids(root) is hidden
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert pidns.sees_driver_pids(root) is not hidden
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # root sees every PID regardless
    assert pidns.sees_driver_pids(root)


def test_this_box_answers_without_error() -> None:
    """On the machine running the tests: an answer, and the one its /proc implies."""
    try:
        first = os.stat("/proc/self/ns/pid").st_ino == pidns.INIT_PID_NS_INO
    except OSError:
        first = False
    assert pidns.sees_driver_pids() is (first and (os.geteuid() == 0 or not pidns.hides_pids()))
