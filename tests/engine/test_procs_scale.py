"""ProcReader with many GPU processes (issue 17): bounded work per read_many, on real processes."""

from __future__ import annotations

import signal

import psutil
import pytest

from gputop.engine import procs
from gputop.engine.procs import ProcReader
from tests.engine.spawn import Spawner, status_of, wait_until

SLEEP = "import time; time.sleep(120)"


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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
    monkeypatch.setattr(procs, "REFRESHES_PER_CALL", 2)
    pids = [spawner.start(SLEEP).pid for _ in range(5)]
    clock = _Clock()
    reader = ProcReader(full_every_s=5.0, clock=clock)
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
    spawned = [spawner.start(SLEEP) for _ in range(6)]
    pids = [p.pid for p in spawned]
    reader = ProcReader()
    reader.read_many(pids)
    stat_reads: list[int] = []
    real_stat = procs._stat

    def counting(pid: int) -> procs._Stat | None:
        stat_reads.append(pid)
        return real_stat(pid)

    monkeypatch.setattr(procs, "_stat", counting)
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
