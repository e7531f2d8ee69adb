"""What changed since the last tick (gputop.engine.changes): decided by value, keyed by process.

Each test changes one entry or row and checks that the answer follows the PID (or process
identity) and the values, never whether an object was passed on as it was.
"""

from __future__ import annotations

from dataclasses import replace

from gputop.engine.changes import ListTracker, RowTracker
from gputop.engine.history import History
from gputop.engine.model import GpuProcess, GpuSample, ProcessRow, ProcessType, ProcInfo, ProcState
from tests.fakes import GiB, make_gpu, make_snapshot


def _proc(pid: int, used: int = GiB) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=used)


def _row(pid: int, created: float = 100.0, used: int = GiB) -> ProcessRow:
    return ProcessRow(
        pid=pid,
        info=ProcInfo(pid=pid, create_time=created),
        states=(ProcState.ACTIVE,),
        used_memory_bytes=used,
    )


def _gpus(*lists: tuple[GpuProcess, ...]) -> tuple[GpuSample, ...]:
    return tuple(make_gpu(i, processes=p) for i, p in enumerate(lists))


def test_the_lists_change_by_pid_and_value_not_by_object() -> None:
    tracker = ListTracker()
    a, b, c = _proc(10), _proc(11), _proc(12)
    first = tracker.track(_gpus((a, b), (c,)))
    assert first.whole and first.pids == {10, 11, 12} and first.gpus == {0, 1}
    # Equal entries in new objects: nothing changed.
    same = tracker.track(_gpus((_proc(10), _proc(11)), (_proc(12),)))
    assert not same.whole and same.entries == () and same.gpus == frozenset()
    assert same.follows(first.tick) and not same.follows(0)
    # A new reading of PID 11: that entry, on GPU 0.
    grown = _proc(11, used=5 * GiB)
    moved = tracker.track(_gpus((a, grown), (c,)))
    assert moved.entries == ((b, grown),) and moved.gpus == {0} and moved.pids == {10, 11, 12}
    # PID 11 gone, PID 13 in its place (the length kept): the lists are taken whole.
    other = tracker.track(_gpus((a, _proc(13)), (c,)))
    assert other.whole and other.pids == {10, 12, 13}
    # Two PIDs swapped places; a GPU gone from the snapshot.
    assert tracker.track(_gpus((_proc(13), a), (c,))).whole
    last = tracker.track(_gpus((_proc(13), a)))
    assert last.whole and last.pids == {10, 13}
    assert not tracker.track(_gpus((_proc(13), a))).whole


def test_the_rows_change_by_process_and_value() -> None:
    tracker = RowTracker()
    before = (_row(10), _row(11), _row(12))
    first = tracker.track(before)
    assert first.since == 0 and first.added == before and first.quiet is False
    # Equal rows in new objects: nothing changed.
    copies = tuple(replace(r) for r in before)
    again = tracker.track(copies)
    assert again.follows(first.tick) and again.quiet and again.changed == ()
    # One process's memory moved: that row alone.
    grown = replace(before[1], used_memory_bytes=3 * GiB)
    moved = tracker.track((before[0], grown, before[2]))
    assert moved.quiet and moved.changed == (grown,) and moved.since == again.tick
    # The same PID started again (a reused PID) is another process; a new one comes.
    reborn, new = _row(11, created=200.0), _row(13)
    churn = tracker.track((before[0], reborn, before[2], new))
    assert not churn.quiet
    assert churn.removed == ((11, 100.0),) and set(churn.added) == {reborn, new}
    assert churn.changed == ()
    # A row of a process present before and after, among comings and goings.
    grown_too = replace(before[0], used_memory_bytes=2 * GiB)
    mixed = tracker.track((grown_too, reborn, before[2]))
    assert mixed.changed == (grown_too,) and mixed.removed == ((13, 100.0),)


def test_ticks_are_numbered_process_wide() -> None:
    """Two trackers never hand out the same number: a consumer fed by both takes all."""
    one, two = RowTracker(), RowTracker()
    ticks = {one.track(()).tick, two.track(()).tick, one.track(()).tick, two.track(()).tick}
    assert len(ticks) == 4


def test_history_takes_every_row_when_a_change_does_not_follow_its_last() -> None:
    """A change from a tick History did not see (a skipped snapshot) is not applied: every
    row is noted, so no peak is missed."""
    tracker, history = RowTracker(), History()

    def append(rows: tuple[ProcessRow, ...], *, noted: bool = True) -> None:
        changes = tracker.track(rows)
        if noted:
            history.append(replace(make_snapshot(), processes=rows, changes=changes))

    append((_row(10, used=GiB), _row(11, used=GiB)))
    append((_row(10, used=4 * GiB), _row(11, used=GiB)), noted=False)  # never appended
    # Relative to the tick not seen, PID 10 did not change; History must still see 4 GiB.
    append((_row(10, used=4 * GiB), _row(11, used=2 * GiB)))
    assert history.process_peak_memory_bytes(10, 100.0) == 4 * GiB
    assert history.process_peak_memory_bytes(11, 100.0) == 2 * GiB
    # Chained again: only the changed row moves its peak; a removed process keeps its peak.
    append((_row(10, used=5 * GiB),))
    assert history.process_peak_memory_bytes(10, 100.0) == 5 * GiB
    assert history.process_peak_memory_bytes(11, 100.0) == 2 * GiB
