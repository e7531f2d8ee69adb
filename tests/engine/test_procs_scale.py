"""ProcReader with many GPU processes (issue 17): bounded work per read_many, on real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from gputop.engine import proc_files, procs
from gputop.engine.model import ProcInfo
from gputop.engine.procs import ProcReader, is_pending
from tests.engine.spawn import Spawner, status_of, wait_until

SLEEP = "import time; time.sleep(120)"
IDLE = "import time; print('ready', flush=True); time.sleep(120)"  # past its start-up


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _paced_reader(
    monkeypatch: pytest.MonkeyPatch, *, refreshes_per_call: int
) -> tuple[ProcReader, _Clock]:
    """A reader on a hand-moved clock, reading in full every 5 s, this many a call at most."""
    monkeypatch.setattr(procs, "REFRESHES_PER_CALL", refreshes_per_call)
    clock = _Clock()
    return ProcReader(full_every_s=5.0, clock=clock), clock


def _count_stat_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the PID of each /proc/PID/stat the reader reads, in order."""
    reads: list[int] = []
    real_read = proc_files.read_file

    def counting(path: str, *args: Any, **kwargs: Any) -> bytes | None:
        if path.endswith("/stat"):
            reads.append(int(path.split("/")[2]))
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(proc_files, "read_file", counting)
    return reads


def test_what_read_many_was_asked_is_kept_past_max_cached(spawner: Spawner) -> None:
    pids = [spawner.start(SLEEP).pid for _ in range(5)]
    reader = ProcReader(max_cached=2)
    reader.read_many(pids)
    assert reader.full_reads == 5
    reader.read_many(pids)
    assert len(reader) == 5
    assert reader.full_reads == 5  # none evicted, so none read in full again


def test_periodic_full_readings_are_spread_over_calls(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids = [spawner.start(SLEEP).pid for _ in range(5)]
    reader, clock = _paced_reader(monkeypatch, refreshes_per_call=2)
    reader.read_many(pids)
    clock.now += 10  # every one is due for its periodic full reading
    counts = []
    for _ in range(3):
        before = reader.full_reads
        reader.read_many(pids)
        counts.append(reader.full_reads - before)
    assert counts == [2, 2, 1]  # two a call until all five are done


def test_past_stats_per_call_each_process_is_read_in_turn(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "STATS_PER_CALL", 2)
    monkeypatch.setattr(procs, "IDLE_STATS_PER_CALL", 2)
    spawned = [spawner.start(SLEEP) for _ in range(6)]
    pids = [p.pid for p in spawned]
    reader = ProcReader()
    reader.read_many(pids)
    stat_reads = _count_stat_reads(monkeypatch)
    stopped = pids[0]
    psutil.Process(stopped).send_signal(signal.SIGSTOP)
    try:
        assert wait_until(lambda: status_of(stopped) == psutil.STATUS_STOPPED)
        seen = [reader.read_many(pids)[stopped].status for _ in range(3)]
    finally:
        psutil.Process(stopped).send_signal(signal.SIGCONT)
    # 6 processes, 2 a call: in 3 calls each was read exactly once, and stood in between.
    assert sorted(stat_reads) == sorted(pids)
    assert seen[-1] == psutil.STATUS_STOPPED
    first = seen.index(psutil.STATUS_STOPPED)
    assert all(status != psutil.STATUS_STOPPED for status in seen[:first])


def test_a_process_using_cpu_is_read_more_often_than_idle_ones(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 6 processes: those idle at their last reading in turn every 3 calls, the others every 2.
    monkeypatch.setattr(procs, "STATS_PER_CALL", 3)
    monkeypatch.setattr(procs, "IDLE_STATS_PER_CALL", 2)
    busy = spawner.start("while True: pass").pid
    idle = [spawner.ready(IDLE) for _ in range(5)]
    pids = [busy] + [p.pid for p in idle]
    reader = ProcReader()
    for _ in range(6):  # every one read at least twice since it settled: its CPU % is known
        reader.read_many(pids)
        time.sleep(0.1)
    reads = _count_stat_reads(monkeypatch)
    cpu = []
    for _ in range(6):
        time.sleep(0.1)
        cpu.append(reader.read_many(pids)[busy].cpu_percent)
    assert reads.count(busy) == 3 and all(reads.count(p.pid) == 2 for p in idle)
    assert all(c is not None and c > 20 for c in cpu)


def test_up_to_stats_per_call_every_process_is_read_every_call(spawner: Spawner) -> None:
    spawned = [spawner.start(SLEEP) for _ in range(3)]
    pids = [p.pid for p in spawned]
    reader = ProcReader()
    reader.read_many(pids)
    psutil.Process(pids[1]).send_signal(signal.SIGSTOP)
    try:
        assert wait_until(lambda: status_of(pids[1]) == psutil.STATUS_STOPPED)
        assert reader.read_many(pids)[pids[1]].status == psutil.STATUS_STOPPED
    finally:
        psutil.Process(pids[1]).send_signal(signal.SIGCONT)


def test_past_new_full_per_call_new_processes_get_a_light_reading_then_a_full_one(
    spawner: Spawner,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setattr(procs, "NEW_FULL_PER_CALL", 2)
    # One runs under a name longer than the kernel's 15 characters (psutil takes argv[0]'s).
    program = tmp_path / "a-program-named-longer-than-15"
    program.symlink_to(sys.executable)
    named = subprocess.Popen([str(program), "-c", SLEEP, "x y"], stdin=subprocess.DEVNULL)
    request.addfinalizer(lambda: (named.kill(), named.wait()))
    pids = [named.pid] + [spawner.start(SLEEP).pid for _ in range(4)]
    assert wait_until(lambda: all(status_of(pid) == "sleeping" for pid in pids))
    reader = ProcReader()
    light = reader.read_many(pids)
    assert reader.full_reads == 2  # the others are on screen at once, from /proc alone
    full = {pid: ProcReader().read(pid) for pid in pids}  # what psutil says of each
    for pid in pids:
        got, want = light[pid], full[pid]
        # The same identity (so the same row key and history), user, command and parent.
        assert (got.create_time, got.user, got.uid, got.name, got.cmdline, got.ppid) == (
            want.create_time,
            want.user,
            want.uid,
            want.name,
            want.cmdline,
            want.ppid,
        )
        assert got.visible and got.host_rss_bytes and got.status == "sleeping"
    counts = []
    for _ in range(3):
        before = reader.full_reads
        reader.read_many(pids)
        counts.append(reader.full_reads - before)
    assert light[named.pid].name == program.name
    assert counts == [2, 1, 0]  # the owed full readings, within the same allowance a call
    assert len(reader) == 5  # the light entries became the full ones: no duplicates kept


def test_a_light_read_process_gone_before_its_full_reading_is_not_shown(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "NEW_FULL_PER_CALL", 0)
    proc = spawner.start(SLEEP)
    reader = ProcReader()
    first = reader.read_many([proc.pid])[proc.pid]
    assert reader.full_reads == 0
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Its light entry is not upgraded: the PID is gone (or, were it reused, another process).
    monkeypatch.setattr(procs, "NEW_FULL_PER_CALL", 5)
    again = reader.read_many([proc.pid])[proc.pid]
    assert first.visible and not again.visible
    assert len(reader) == 0


def test_past_new_per_call_new_processes_are_pending_until_a_later_call(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "NEW_PER_CALL", 2)
    pids = [spawner.start(SLEEP).pid for _ in range(5)]
    reader = ProcReader()
    first = reader.read_many(pids)
    # Read in the order asked: the caller puts what is on screen first.
    assert [is_pending(first[pid]) for pid in pids] == [False, False, True, True, True]
    assert first[pids[2]].visible and first[pids[2]].create_time is None
    second = reader.read_many(pids)
    assert [is_pending(second[pid]) for pid in pids] == [False, False, False, False, True]
    third = reader.read_many(pids)
    assert not any(is_pending(info) for info in third.values())
    assert third[pids[4]].create_time == psutil.Process(pids[4]).create_time()
    # A PID of another namespace (none here) uses up no allowance and is never pending.
    gone = spawner.start(SLEEP)
    gone.kill()
    gone.wait()
    monkeypatch.setattr(procs, "NEW_PER_CALL", 0)
    last = reader.read_many([gone.pid, *pids])
    assert not last[gone.pid].visible and not is_pending(last[gone.pid])
    assert not any(is_pending(last[pid]) for pid in pids)  # known ones are read as before


def test_an_idle_process_keeps_its_reading_and_a_changed_one_gets_a_new_one(
    spawner: Spawner,
) -> None:
    # Issue 17: at thousands of idle workers, an unchanged /proc/PID/stat gives back the very
    # same ProcInfo, so the sampler can keep the whole row; any change shows at once.
    idle, busy = spawner.ready(IDLE), spawner.start("while True: pass")
    reader = ProcReader()
    reader.read_many([idle.pid, busy.pid])
    time.sleep(0.1)  # ten clock ticks: the busy one's CPU time moves
    second = reader.read_many([idle.pid, busy.pid])
    assert second[idle.pid].cpu_percent == 0.0
    time.sleep(0.1)
    third = reader.read_many([idle.pid, busy.pid])
    assert third[idle.pid] is second[idle.pid]
    assert third[busy.pid] is not second[busy.pid]
    psutil.Process(idle.pid).send_signal(signal.SIGSTOP)
    try:
        assert wait_until(lambda: status_of(idle.pid) == psutil.STATUS_STOPPED)
        stopped = reader.read_many([idle.pid, busy.pid])[idle.pid]
        assert stopped is not third[idle.pid]
        assert stopped.status == psutil.STATUS_STOPPED
    finally:
        psutil.Process(idle.pid).send_signal(signal.SIGCONT)


def test_an_idle_process_still_gets_its_periodic_full_reading(spawner: Spawner) -> None:
    idle = spawner.ready(IDLE)
    clock = _Clock()
    reader = ProcReader(full_every_s=5.0, clock=clock)
    reader.read_many([idle.pid])
    clock.now += 1
    kept = reader.read_many([idle.pid])[idle.pid]
    clock.now += 1
    assert reader.read_many([idle.pid])[idle.pid] is kept
    before = reader.full_reads
    clock.now += 10
    reader.read_many([idle.pid])
    assert reader.full_reads == before + 1  # its command line and user are read again


def _three_read_twice(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch, *, refreshes_per_call: int
) -> tuple[list[int], ProcReader, _Clock, dict[int, ProcInfo]]:
    """Three idle processes read twice, a second apart: (PIDs, reader, clock, second answer)."""
    pids = [spawner.ready(IDLE).pid for _ in range(3)]
    reader, clock = _paced_reader(monkeypatch, refreshes_per_call=refreshes_per_call)
    reader.read_many(pids)
    clock.now += 1
    return pids, reader, clock, reader.read_many(pids)


def test_idle_processes_past_the_calls_full_readings_keep_their_reading(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At thousands of processes nearly all are due their periodic full reading; those past the
    # call's allowance are answered as they were, not read again field by field.
    pids, reader, clock, before = _three_read_twice(spawner, monkeypatch, refreshes_per_call=1)
    clock.now += 10  # all three due
    full = reader.full_reads
    parsed: list[bytes] = []
    real_parse = proc_files.parse_stat
    monkeypatch.setattr(
        proc_files, "parse_stat", lambda data: parsed.append(data) or real_parse(data)
    )
    after = reader.read_many(pids)
    assert reader.full_reads == full + 1
    # The one read in full found everything as it was: its answer stands too, so its row does.
    assert all(after[pid] is before[pid] for pid in pids)
    assert len(parsed) == 1  # only the one read in full: the others' stat was as it was


def test_a_periodic_full_reading_that_finds_a_change_gives_a_new_answer(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    pids, reader, clock, before = _three_read_twice(spawner, monkeypatch, refreshes_per_call=3)
    # The account was renamed: what a full reading reads (the user) changed, /proc/PID/stat not.
    monkeypatch.setattr(proc_files, "_user_name", lambda uid: "renamed")
    clock.now += 10
    after = reader.read_many(pids)
    assert [after[pid].user for pid in pids] == ["renamed"] * 3
    assert not any(after[pid] is before[pid] for pid in pids)
    assert [after[pid].cmdline for pid in pids] == [before[pid].cmdline for pid in pids]
