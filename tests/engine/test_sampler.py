"""Sampler on FakeSource: survives raising and hung sources, stops quickly, enriches snapshots."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.engine.model import ProcState, Snapshot
from gputop.engine.sampler import Sampler
from tests.engine.spawn import HOLD, Spawner, wait_until
from tests.fakes import FakeSource, GiB, make_gpu, make_snapshot

INTERVAL_S = 0.05
WAIT_S = 10.0  # generous: the box is shared; only an absent snapshot fails


class Sink:
    """Collects snapshots from the sampler thread."""

    def __init__(self) -> None:
        self.q: queue.Queue[Snapshot] = queue.Queue()
        self.threads: set[str] = set()

    def __call__(self, snap: Snapshot) -> None:
        self.threads.add(threading.current_thread().name)
        self.q.put(snap)

    def next(self) -> Snapshot:
        return self.q.get(timeout=WAIT_S)

    def next_matching(self, fresh: bool) -> Snapshot:
        while True:
            snap = self.next()
            if (snap.stale_s is None) == fresh:
                return snap


@pytest.fixture
def source() -> Iterator[FakeSource]:
    src = FakeSource()
    try:
        yield src
    finally:
        src.hang.clear()
        src.release.set()  # let a hung reader thread finish


@pytest.fixture
def sink() -> Sink:
    return Sink()


@pytest.fixture
def sampler(source: FakeSource, sink: Sink, tmp_path: Path) -> Iterator[Sampler]:
    s = Sampler(source, on_snapshot=sink, interval_s=INTERVAL_S, dev_dir=str(tmp_path))
    s.start()
    try:
        yield s
    finally:
        s.stop()


def test_snapshots_are_enriched_and_recorded(sampler: Sampler, sink: Sink) -> None:
    snap = sink.next()
    assert snap.stale_s is None
    assert [(r.pid, r.gpu_indices) for r in snap.processes] == [(4242, (0, 1))]
    # 20 GiB used, 18 GiB listed on each fake GPU: 2 GiB beyond the 1.6 GiB allowance.
    assert snap.unattributed_memory_bytes == ((0, 2 * GiB), (1, 2 * GiB))
    assert sink.threads == {"gputop-sampler"}
    second = sink.next()
    assert second.seq > snap.seq
    assert len(sampler.history) >= 2
    assert sampler.latest is not None


def test_survives_a_raising_source(sampler: Sampler, source: FakeSource, sink: Sink) -> None:
    first = sink.next_matching(fresh=True)
    source.raise_next = RuntimeError("driver exploded")
    assert wait_until(lambda: sampler.errors >= 1, WAIT_S)
    assert sampler.last_error == "RuntimeError: driver exploded"
    later = sink.next_matching(fresh=True)
    assert later.seq > first.seq + 1  # the failed call was skipped, sampling went on


def test_hung_source_gives_stale_snapshots_on_time(
    sampler: Sampler, source: FakeSource, sink: Sink
) -> None:
    good = sink.next_matching(fresh=True)
    source.hang.set()
    stale = [sink.next_matching(fresh=False) for _ in range(4)]
    calls_while_hung = source.calls
    ages = [s.stale_s for s in stale]
    assert all(s.seq >= good.seq for s in stale)
    assert all(a is not None for a in ages)
    assert ages == sorted(ages)  # type: ignore[type-var]
    more = [sink.next() for _ in range(3)]  # still on schedule while the call hangs
    assert all(s.stale_s is not None for s in more)
    assert source.calls == calls_while_hung  # one hung call, no pile-up behind it
    source.hang.clear()
    source.release.set()
    recovered = sink.next_matching(fresh=True)
    assert recovered.seq > good.seq


def test_stop_is_quick_even_while_hung(source: FakeSource, sink: Sink, tmp_path: Path) -> None:
    s = Sampler(source, on_snapshot=sink, interval_s=INTERVAL_S, dev_dir=str(tmp_path))
    s.start()
    sink.next()
    source.hang.set()
    sink.next_matching(fresh=False)
    started = time.monotonic()
    s.stop(timeout=1.0)
    assert time.monotonic() - started < 3.0
    assert not s._thread.is_alive()


def test_pause_stops_reading(sampler: Sampler, source: FakeSource, sink: Sink) -> None:
    sink.next()
    sampler.paused = True
    time.sleep(INTERVAL_S * 4)
    calls = source.calls
    time.sleep(INTERVAL_S * 6)
    assert source.calls == calls
    sampler.paused = False
    assert wait_until(lambda: source.calls > calls, WAIT_S)


def test_interval_is_validated(sampler: Sampler) -> None:
    sampler.interval_s = 0.2
    assert sampler.interval_s == 0.2
    with pytest.raises(ValueError, match="greater than 0"):
        sampler.interval_s = 0


def test_a_raising_consumer_does_not_stop_sampling(source: FakeSource, tmp_path: Path) -> None:
    seen: list[int] = []

    def consumer(snap: Snapshot) -> None:
        seen.append(snap.seq)
        if len(seen) == 1:
            raise ValueError("consumer bug")

    s = Sampler(source, on_snapshot=consumer, interval_s=INTERVAL_S, dev_dir=str(tmp_path))
    s.start()
    try:
        assert wait_until(lambda: len(seen) >= 3, WAIT_S)
        assert s.errors >= 1
    finally:
        s.stop()


def test_holder_scan_on_demand(spawner: Spawner, dev_dir: Path) -> None:
    source = FakeSource([make_snapshot(gpus=(make_gpu(0, processes=()),))])
    sink = Sink()
    s = Sampler(
        source,
        on_snapshot=sink,
        interval_s=INTERVAL_S,
        holder_interval_s=3600,
        dev_dir=str(dev_dir),
    )
    s.start()
    try:
        first = sink.next()
        holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
        assert holder.pid not in {r.pid for r in first.processes}
        scan = s.scan_holders_now()
        assert holder.pid in scan.holders
        while True:
            snap = sink.next()
            rows = {r.pid: r for r in snap.processes}
            if holder.pid in rows:
                break
        assert rows[holder.pid].states == (ProcState.HOLDER,)
    finally:
        s.stop()
