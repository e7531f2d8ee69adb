"""The quick checks a quiet tick rests on: the same PIDs in the same places (issue 17).

They compare only the entries that were made anew, so each test changes one entry in place and
checks that the answer follows the PID (or process identity), not the object.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputop.engine.model import (
    GpuProcess,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
    same_pids,
    same_places,
)
from gputop.engine.sampler import Sampler
from tests.fakes import FakeSource, GiB, make_gpu, make_snapshot


def _proc(pid: int, used: int = GiB) -> GpuProcess:
    return GpuProcess(pid=pid, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=used)


def _row(pid: int, created: float = 100.0, used: int = GiB) -> ProcessRow:
    return ProcessRow(
        pid=pid,
        info=ProcInfo(pid=pid, create_time=created),
        states=(ProcState.ACTIVE,),
        used_memory_bytes=used,
    )


def test_same_pids_follows_the_pids_not_the_objects() -> None:
    old = [_proc(10), _proc(11), _proc(12)]
    assert same_pids(old, old)
    assert same_pids(old, list(old))
    # A new reading of the same process (new object, new memory) is the same place.
    assert same_pids(old, [old[0], _proc(11, used=2 * GiB), old[2]])
    # Another PID in one place, the length kept: not the same.
    assert not same_pids(old, [old[0], _proc(99), old[2]])
    # Two PIDs swapped places: not the same.
    assert not same_pids(old, [old[1], old[0], old[2]])
    assert not same_pids(old, old[:2])
    assert same_pids([], [])


def test_same_places_gives_the_rows_made_anew_before_and_now() -> None:
    before = [_row(10), _row(11), _row(12)]
    changed = replace(before[1], used_memory_bytes=3 * GiB)
    now = [before[0], changed, before[2]]
    assert same_places(before, now) == ([before[1]], [changed])
    assert same_places(before, list(before)) == ([], [])


def test_same_places_is_none_when_a_process_differs() -> None:
    before = [_row(10), _row(11), _row(12)]
    # The same PID, started again (a reused PID): another process.
    assert same_places(before, [before[0], _row(11, created=200.0), before[2]]) is None
    assert same_places(before, [before[0], _row(13), before[2]]) is None
    assert same_places(before, [before[1], before[0], before[2]]) is None
    assert same_places(before, before[:2]) is None


def test_the_sampler_gives_the_watch_the_pids_listed_now(tmp_path: Path) -> None:
    """The listed set is reused only while every GPU lists the same PIDs in the same places:
    a PID that takes another's place in a list of the same length reaches the holder watch."""
    sampler = Sampler(FakeSource(), dev_dir=str(tmp_path))

    def snap(*lists: tuple[GpuProcess, ...]) -> Snapshot:
        return make_snapshot(gpus=tuple(make_gpu(i, processes=p) for i, p in enumerate(lists)))

    a, b, c = _proc(10), _proc(11), _proc(12)
    first = sampler._listed_pids(snap((a, b), (c,)))
    assert first == {10, 11, 12}
    # New readings of the same processes: the same set, not gathered again.
    again = sampler._listed_pids(snap((a, _proc(11, used=5 * GiB)), (c,)))
    assert again is first
    # PID 11 gone, PID 13 in its place: the set says so.
    assert sampler._listed_pids(snap((a, _proc(13)), (c,))) == {10, 12, 13}
    # A GPU lost from the snapshot (fewer lists) drops its PIDs.
    assert sampler._listed_pids(snap((a, _proc(13)))) == {10, 13}
