"""procs: psutil enrichment of real processes; vanished PIDs are results, not errors."""

from __future__ import annotations

import os
import pwd
import subprocess
from dataclasses import replace

import psutil
import pytest

from gputop.engine.proc_lookup import (
    children,
    environment,
    gpu_environment,
    parent_chain,
    read_proc,
)
from gputop.engine.procs import ProcReader
from gputop.engine.sanitize import clean
from gputop.errors import GputopError
from tests.engine.spawn import PY, ZOMBIE_PARENT, Spawner, status_of, wait_until
from tests.users import added_user


def _gone_pid() -> int:
    """The PID of a process that has exited and been reaped."""
    proc = subprocess.Popen([*PY, "pass"])
    proc.wait()
    return proc.pid


def test_read_own_process() -> None:
    info = read_proc(os.getpid())
    assert info.visible
    assert info.uid == os.getuid()
    assert info.user == pwd.getpwuid(os.getuid()).pw_name
    assert info.ppid == os.getppid()
    assert info.create_time is not None
    assert info.host_rss_bytes is not None
    assert info.host_rss_bytes > 0
    assert "pytest" in info.command or "python" in info.command
    assert info.note is None


def test_vanished_pid_is_a_result() -> None:
    info = read_proc(_gone_pid())
    assert not info.visible
    assert info.note is not None
    assert "namespace" in info.note
    assert info.cmdline == ()


def test_zombie_has_status_and_no_permission_note(spawner: Spawner) -> None:
    zombie = spawner.first_line_pid(spawner.start(ZOMBIE_PARENT))
    assert wait_until(lambda: status_of(zombie) == "zombie")
    info = read_proc(zombie)
    assert info.visible
    assert info.status == "zombie"
    assert info.note is None


def test_parent_chain_and_children(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    chain = parent_chain(proc.pid)
    assert chain[0].pid == os.getpid()
    assert chain[1].pid == os.getppid()
    assert proc.pid in [c.pid for c in children(os.getpid())]
    assert children(_gone_pid()) == []


def test_environment_of_a_child(spawner: Spawner) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "3,1", "NCCL_DEBUG": "INFO", "UNRELATED": "x"}
    proc = subprocess.Popen(
        [*PY, "import sys, time; print('ready', flush=True); time.sleep(120)"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    spawner.popens.append(proc)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    assert environment(proc.pid)["CUDA_VISIBLE_DEVICES"] == "3,1"
    gpu = gpu_environment(proc.pid)
    assert gpu["CUDA_VISIBLE_DEVICES"] == "3,1"
    assert gpu["NCCL_DEBUG"] == "INFO"
    assert "UNRELATED" not in gpu


def test_environment_of_vanished_pid_is_a_readable_error() -> None:
    pid = _gone_pid()
    with pytest.raises(GputopError, match=f"PID {pid} is not running"):
        environment(pid)


def test_reader_gives_cpu_percent_on_second_read(spawner: Spawner) -> None:
    busy = spawner.start("while True: pass")
    reader = ProcReader()
    assert reader.read(busy.pid).cpu_percent is None  # one reading says nothing about CPU
    assert wait_until(lambda: (reader.read(busy.pid).cpu_percent or 0.0) > 1.0)


def test_reader_cache_is_bounded(spawner: Spawner) -> None:
    procs = [spawner.start("import time; time.sleep(120)") for _ in range(3)]
    reader = ProcReader(max_cached=2)
    for p in procs:
        reader.read(p.pid)
    assert len(reader) == 2
    infos = reader.read_many([procs[0].pid, os.getpid()])
    assert set(infos) == {procs[0].pid, os.getpid()}
    assert len(reader) == 2  # the others were dropped
    gone = _gone_pid()
    assert not reader.read_many([gone])[gone].visible
    assert len(reader) == 0


def test_second_read_reuses_the_cached_process() -> None:
    reader = ProcReader()
    first = reader.read(os.getpid())
    again = reader.read(os.getpid())
    assert first.create_time == again.create_time
    assert again.cpu_percent is not None
    assert len(reader) == 1


# A process name with ") " in it: /proc/PID/stat must be parsed from the last parenthesis.
ODD_NAME = """
import ctypes, time
ctypes.CDLL(None).prctl(15, b"x) y z (1", 0, 0, 0)  # PR_SET_NAME
print("ready", flush=True)
time.sleep(120)
"""


def _count_new_processes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The PIDs of every psutil.Process built from now on (psutil's own included)."""
    built: list[int] = []

    class Counting(psutil.Process):
        def __init__(self, pid: int | None = None) -> None:
            built.append(pid or 0)
            super().__init__(pid)

    monkeypatch.setattr(psutil, "Process", Counting)
    return built


def test_reader_reads_a_cached_process_without_a_new_psutil_process(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    proc = spawner.ready(ODD_NAME)
    reader = ProcReader()
    first = reader.read_many([proc.pid])[proc.pid]
    built = _count_new_processes(monkeypatch)
    again = reader.read_many([proc.pid])[proc.pid]
    assert built == []
    assert again.name == first.name == "x) y z (1"
    assert again.ppid == first.ppid == os.getpid()
    assert again.create_time == first.create_time
    assert again.cpu_percent is not None and first.cpu_percent is None
    assert (again.user, again.uid, again.cmdline, again.note) == (
        first.user,
        first.uid,
        first.cmdline,
        first.note,
    )


def test_reader_builds_no_process_for_a_pid_that_is_not_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    foreign = 5_000_001  # above the kernel's PID_MAX_LIMIT: never a PID in this namespace
    built = _count_new_processes(monkeypatch)
    info = ProcReader().read(foreign)
    assert not info.visible
    assert info.note is not None and "namespace" in info.note
    assert built == []


def test_reader_follows_a_process_to_zombie_and_gone(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    reader = ProcReader()
    assert reader.read_many([proc.pid])[proc.pid].status != "zombie"
    proc.kill()  # not reaped yet: a zombie with the same PID and start time
    assert wait_until(lambda: reader.read_many([proc.pid])[proc.pid].status == "zombie")
    assert len(reader) == 1
    proc.wait()
    gone = reader.read_many([proc.pid])[proc.pid]
    assert not gone.visible
    assert gone.note is not None and "namespace" in gone.note
    assert len(reader) == 0
    assert not reader.read(proc.pid).visible  # read() too: a result, not an exception


def test_reader_reads_a_reused_pid_as_a_new_process(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    reader = ProcReader()
    reader.read(proc.pid)
    assert reader.read(proc.pid).cpu_percent is not None
    # The kernel hands out a PID again only after wrapping around, so make the reader remember
    # an older process at this PID instead: another create time and another /proc start time.
    known = reader._at_pid[proc.pid]
    key = known.key
    older = (proc.pid, key[1] - 60.0)
    reader._cache[older] = reader._cache.pop(key)
    assert known.stat is not None
    known.key, known.stat = older, replace(known.stat, start=b"1")
    known.raw = b"1 (python3) S ..."  # the older process's /proc/PID/stat
    info = reader.read(proc.pid)
    assert info.visible
    assert info.cpu_percent is None  # nothing carried over from the older process
    assert info.create_time == key[1]
    assert set(reader._cache) == {older, key}
    reader.read_many([proc.pid])
    assert set(reader._cache) == {key}
    assert reader.read(proc.pid).cpu_percent is not None  # and it is cached from now on


# Grows by 64 MiB on SIGUSR1, changes its name on SIGUSR2 (comm only: argv stays), and execs
# `sleep` on SIGHUP.
CHANGES = """
import ctypes, os, shutil, signal, sys, time
held = []
def grow(*_):
    held.append(bytearray(64 * 1024 * 1024))
    print("grown", flush=True)
def rename(*_):
    ctypes.CDLL(None).prctl(15, b"renamed", 0, 0, 0)
    print("renamed", flush=True)
def become_sleep(*_):
    os.execv(shutil.which("sleep"), ["sleep", "119"])
signal.signal(signal.SIGUSR1, grow)
signal.signal(signal.SIGUSR2, rename)
signal.signal(signal.SIGHUP, become_sleep)
print("ready", flush=True)
while True:
    time.sleep(120)
"""


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reader_reads_a_known_process_from_its_stat_and_the_rest_every_few_seconds(
    spawner: Spawner,
) -> None:
    import signal

    proc = spawner.ready(CHANGES)
    assert proc.stdout is not None
    clock = _Clock()
    reader = ProcReader(full_every_s=5.0, clock=clock)
    first = reader.read(proc.pid)
    assert reader.full_reads == 1 and first.cpu_percent is None
    assert first.cmdline[-1] == clean(proc.args[-1])  # a newline is shown as \\n

    # State, memory and CPU come from /proc/PID/stat on every reading, with no full reading.
    os.kill(proc.pid, signal.SIGUSR1)
    assert proc.stdout.readline().strip() == "grown"
    clock.now += 1
    grown = reader.read(proc.pid)
    assert grown.host_rss_bytes is not None and first.host_rss_bytes is not None
    assert grown.host_rss_bytes - first.host_rss_bytes >= 60 * 1024 * 1024
    assert grown.cpu_percent is not None and grown.cpu_percent >= 0.0
    os.kill(proc.pid, signal.SIGSTOP)
    assert wait_until(lambda: status_of(proc.pid) == "stopped")
    clock.now += 1
    assert reader.read(proc.pid).status == "stopped"
    os.kill(proc.pid, signal.SIGCONT)
    assert wait_until(lambda: status_of(proc.pid) != "stopped")
    clock.now += 1
    assert reader.read(proc.pid).status != "stopped"
    assert reader.full_reads == 1
    assert (grown.user, grown.uid, grown.cmdline, grown.create_time) == (
        first.user,
        first.uid,
        first.cmdline,
        first.create_time,
    )

    # A new name (exec or prctl) is a full reading at once; so is a reading 5 s after the last.
    os.kill(proc.pid, signal.SIGUSR2)
    assert proc.stdout.readline().strip() == "renamed"
    clock.now += 1
    assert reader.read(proc.pid).name == "renamed"
    assert reader.full_reads == 2
    clock.now += 4.9
    reader.read(proc.pid)
    assert reader.full_reads == 2
    clock.now += 0.1
    reader.read(proc.pid)
    assert reader.full_reads == 3

    os.kill(proc.pid, signal.SIGHUP)
    # execve() renames the process a moment before the new argv is readable: wait for both.
    assert wait_until(lambda: psutil.Process(proc.pid).name() == "sleep")
    assert wait_until(lambda: psutil.Process(proc.pid).cmdline() == ["sleep", "119"])
    clock.now += 1
    execed = reader.read(proc.pid)
    assert execed.cmdline == ("sleep", "119")
    assert execed.create_time == first.create_time  # the same process, another program
    assert execed.cpu_percent is not None
    assert len(reader) == 1


def test_a_fresh_read_is_a_full_reading_whatever_its_age() -> None:
    clock = _Clock()
    reader = ProcReader(clock=clock)
    reader.read(os.getpid())
    clock.now += 1
    reader.read(os.getpid())
    assert reader.full_reads == 1
    clock.now += 1
    assert reader.read(os.getpid(), fresh=True).uid == os.getuid()
    assert reader.full_reads == 2


def test_a_uid_given_to_a_new_user_shows_the_new_name_not_the_old() -> None:
    """userdel, then useradd with the same uid: the dashboard's rows (read from /proc, the user
    name remembered by uid) must name the new user, not the one remembered from before."""
    uid = 61_234

    def shown_user() -> str | None:
        proc = subprocess.Popen(["/bin/sleep", "60"], user=uid, group=0, extra_groups=[])
        try:
            return ProcReader().read_many([proc.pid])[proc.pid].user
        finally:
            proc.kill()
            proc.wait()

    with added_user("gputop-old", uid=uid):
        assert shown_user() == "gputop-old"
    with added_user("gputop-new", uid=uid):
        # /etc/passwd is looked at once a second at most.
        assert wait_until(lambda: shown_user() == "gputop-new", timeout_s=3), shown_user()
