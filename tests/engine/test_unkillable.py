"""A process in uninterruptible sleep (state D) holding a GPU: unkillable, from real processes.

The D process is real: a parent holding the simulated box's device file calls posix_spawn(),
whose child (glibc: CLONE_VFORK) blocks opening a FIFO before it can exec, so the parent waits
in the kernel's vfork wait, which /proc shows as D, until the test opens the FIFO for writing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from gputop.commands.doctor import diagnose, fix_command
from gputop.commands.json_out import render_json
from gputop.engine import procs
from gputop.engine.enrich import enrich
from gputop.engine.holders import scan_holders
from gputop.engine.model import (
    Blocked,
    GpuProcess,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
)
from gputop.engine.procs import BLOCKED_AFTER_S, ProcReader, driver_frames
from gputop.engine.verdicts import ProcFacts, classify, confirm_blocked
from tests.engine.spawn import Spawner, wait_until
from tests.fakes import make_gpu, make_snapshot

# Holds argv[1], then posix_spawn()s a child that first opens the FIFO argv[2]: the parent
# waits in state D until someone opens the FIFO for writing. The child does not keep the device
# file (closed before the open): only the parent holds it.
VFORK_HOLDER = """
import os, sys
f = open(sys.argv[1], "rb")
print("ready", flush=True)
actions = [(os.POSIX_SPAWN_CLOSE, f.fileno()),
           (os.POSIX_SPAWN_OPEN, 0, sys.argv[2], os.O_RDONLY, 0)]
child = os.posix_spawn(sys.executable, [sys.executable, "-S", "-c", "pass"], os.environ,
                       file_actions=actions)
os.waitpid(child, 0)
print("released", flush=True)
import time; time.sleep(120)
"""


def state_letter(pid: int) -> str | None:
    """The state field of /proc/PID/stat (None once it has gone)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return data.rpartition(b")")[2].split()[0].decode()


@dataclass
class InD:
    """A real process in state D holding ``device``; ``release()`` lets it go on."""

    pid: int
    device: Path
    fifo: Path
    released: bool = False

    def release(self) -> None:
        if self.released:
            return
        # The child waits in open(O_RDONLY): a writer's open returns at once and wakes it. The
        # parent is in D from the clone on, so the child may not have reached its open yet: a
        # writer's non-blocking open then fails (ENXIO, no reader) and is tried again.
        deadline = time.monotonic() + 10
        while True:
            try:
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        self.released = True


@pytest.fixture
def in_d(spawner: Spawner, dev_dir: Path, tmp_path: Path) -> Iterator[InD]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    parent = spawner.ready(VFORK_HOLDER, str(dev_dir / "nvidia0"), str(fifo))
    proc = InD(pid=parent.pid, device=dev_dir / "nvidia0", fifo=fifo)
    try:
        assert wait_until(lambda: state_letter(parent.pid) == "D"), state_letter(parent.pid)
        for child in psutil.Process(parent.pid).children():
            spawner.adopt(child.pid)  # killed at teardown should its FIFO never open
        # D is set just before it leaves the CPU; off it, the kernel tells where it waits.
        wait_until(lambda: procs.wchan(parent.pid) is not None, 2.0)
        yield proc
    finally:
        proc.release()  # else the child would wait on the FIFO for ever


def _driver(*listed: int) -> Snapshot:
    """One GPU whose memory is what the listed PIDs use."""
    procs_ = tuple(
        GpuProcess(pid=p, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=1 << 30)
        for p in listed
    )
    gpu = make_gpu(0, processes=procs_, memory_used_bytes=len(listed) << 30, minor_number=0)
    return make_snapshot(gpus=(gpu,))


def _row(snapshot: Snapshot, pid: int) -> ProcessRow:
    return next(r for r in snapshot.processes if r.pid == pid)


def test_d_is_called_unkillable_only_once_it_lasts(in_d: InD) -> None:
    now = [100.0]
    reader = ProcReader(clock=lambda: now[0])
    first = reader.read(in_d.pid)
    assert first.status == psutil.STATUS_DISK_SLEEP
    assert first.blocked is None  # one reading in D: a disk read looks the same
    now[0] += BLOCKED_AFTER_S / 2
    assert reader.read(in_d.pid).blocked is None  # not long enough yet
    now[0] += BLOCKED_AFTER_S
    blocked = reader.read(in_d.pid).blocked
    assert blocked is not None
    assert blocked.since_mono == 100.0  # the wait's first reading
    if os.geteuid() == 0:
        assert blocked.wchan  # the vfork wait: kernel_clone (or the like)
        assert blocked.stack_read and blocked.driver_frames == ()  # no NVIDIA frame in it
    in_d.release()
    assert wait_until(lambda: state_letter(in_d.pid) != "D")
    now[0] += 1
    assert reader.read(in_d.pid).blocked is None


def test_a_process_that_ran_in_between_starts_a_new_wait(
    in_d: InD, monkeypatch: pytest.MonkeyPatch
) -> None:
    # D at each reading but switched out in between: several short waits (disk reads), not one.
    switches = iter(range(100))
    monkeypatch.setattr(procs, "context_switches", lambda pid: next(switches))
    now = [0.0]
    reader = ProcReader(clock=lambda: now[0])
    for _ in range(4):
        assert reader.read(in_d.pid).blocked is None
        now[0] += BLOCKED_AFTER_S * 2


def test_engine_doctor_and_json_call_it_unkillable(in_d: InD, dev_dir: Path) -> None:
    holders = scan_holders(str(dev_dir))
    waited: list[float] = []

    def sleep(seconds: float) -> None:
        waited.append(seconds)
        time.sleep(seconds)

    snapshot = confirm_blocked(lambda: enrich(_driver(), holders=holders), sleep=sleep)
    assert waited == [BLOCKED_AFTER_S]  # looked again once before calling it unkillable
    row = _row(snapshot, in_d.pid)
    assert row.states[0] is ProcState.UNKILLABLE
    assert ProcState.HOLDER in row.states
    assert row.stuck
    assert row.parent_note is not None and "state D" in row.parent_note
    assert "kill will not help" in row.parent_note
    assert "nvidia-smi --gpu-reset -i 0" in row.parent_note

    d = diagnose(snapshot, holders)
    assert d.exit_code == 1
    assert row in d.stuck_processes
    assert f"PID {in_d.pid}  [unkillable+holder]" in d.text
    assert "Unkillable: in a kernel call that has not returned, state D (1):" in d.text
    assert "nvidia-smi --gpu-reset -i 0" in d.text
    assert "reboot" in d.text
    assert f"kill -TERM {in_d.pid}" not in d.text and f"kill -KILL {in_d.pid}" not in d.text
    assert "fix: " not in d.text  # no kill command for it anywhere
    assert "kill" not in fix_command(row).partition("#")[0]
    assert "STUCK: 1 stuck process (1 unkillable: kill will not help)" in d.text

    data = json.loads(render_json(snapshot))
    (entry,) = [p for p in data["processes"] if p["pid"] == in_d.pid]
    assert entry["states"][0] == "unkillable" and entry["state"] == "unkillable"
    assert entry["stuck"] is True
    assert entry["info"]["blocked"]["since_mono"] is not None

    # Released: an ordinary holder again, with a kill command.
    in_d.release()
    assert wait_until(lambda: state_letter(in_d.pid) != "D")
    after = enrich(_driver(), holders=scan_holders(str(dev_dir)))
    assert _row(after, in_d.pid).states == (ProcState.HOLDER,)
    assert f"fix: kill -TERM {in_d.pid}" in diagnose(after).text


def test_a_listed_process_in_d_is_unkillable_too(in_d: InD) -> None:
    snapshot = confirm_blocked(lambda: enrich(_driver(in_d.pid)))
    row = _row(snapshot, in_d.pid)
    assert row.states == (ProcState.UNKILLABLE, ProcState.ACTIVE)


def test_no_second_look_without_a_process_in_d(dev_dir: Path) -> None:
    calls: list[float] = []
    confirm_blocked(lambda: enrich(_driver(os.getpid())), sleep=calls.append)
    assert calls == []


@pytest.mark.parametrize(
    ("blocked", "listed", "holds", "expected"),
    [
        (True, False, True, (ProcState.UNKILLABLE, ProcState.HOLDER)),
        (True, True, False, (ProcState.UNKILLABLE, ProcState.ACTIVE)),
        (False, False, True, (ProcState.HOLDER,)),
        # In D, but holding no GPU and listed by no driver: not a GPU process at all.
        (True, False, False, ()),
    ],
)
def test_classify(
    blocked: bool, listed: bool, holds: bool, expected: tuple[ProcState, ...]
) -> None:
    facts = ProcFacts(
        listed=listed,
        visible=True,
        status=psutil.STATUS_DISK_SLEEP,
        holds_device=holds,
        orphaned=False,
        blocked=blocked,
    )
    assert classify(facts) == expected


def test_stack_frames_of_nvidia_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    stack = (
        b"[<0>] uvm_spin_loop+0x5a/0x90 [nvidia_uvm]\n"
        b"[<0>] os_acquire_mutex+0x10/0x40 [nvidia]\n"
        b"[<0>] do_syscall_64+0x71/0x280\n"
    )
    monkeypatch.setattr(procs.proc_files, "read_file", lambda *a, **k: stack)
    assert driver_frames(1) == (("uvm_spin_loop [nvidia_uvm]", "os_acquire_mutex [nvidia]"), True)
    monkeypatch.setattr(procs.proc_files, "read_file", lambda *a, **k: None)
    assert driver_frames(1) == ((), False)


def test_fix_command_never_kills_an_unkillable_row() -> None:
    info = ProcInfo(pid=42, status=psutil.STATUS_DISK_SLEEP, blocked=Blocked(since_mono=0.0))
    for states in [
        (ProcState.UNKILLABLE, ProcState.HOLDER),
        (ProcState.UNKILLABLE, ProcState.ORPHAN, ProcState.HOLDER),
        (ProcState.UNKILLABLE, ProcState.STOPPED),
    ]:
        command = fix_command(ProcessRow(pid=42, info=info, states=states))
        assert command.startswith("#"), command
