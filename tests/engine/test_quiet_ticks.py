"""Ticks in which no process came or went (gputop.engine.changes): the sampler makes anew only
the rows whose driver entries or reading changed, and what it gives is what a whole call gives.
Real processes."""

from __future__ import annotations

import random
import signal
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path

import pytest

from gputop.engine import proc_files, procs
from gputop.engine.enrich import RowMemo, process_rows
from gputop.engine.history import History
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.holders import HolderScan
from gputop.engine.model import GpuProcess, GpuSample, ProcessRow, ProcessType, ProcInfo
from gputop.engine.procs import ProcReader
from tests.engine.spawn import HOLD, Spawner, wait_until
from tests.fakes import make_gpu, make_snapshot

IDLE = "import time; print('ready', flush=True); time.sleep(120)"
MiB = 1 << 20
OPEN_LATER = """
import os, sys, time
while not os.path.exists(sys.argv[2]):
    time.sleep(0.02)
f = open(sys.argv[1], "rb")
print("ready", flush=True)
time.sleep(120)
"""


class _Recording(ProcReader):
    """The real reader, keeping its last answers to hand to a whole call."""

    last: dict[int, ProcInfo]

    def read_many(self, pids: Collection[int]) -> dict[int, ProcInfo]:
        self.last = super().read_many(pids)
        return self.last


class _Given:
    """A reader that answers the readings it is given: the whole call to compare with."""

    changed = None

    def __init__(self, infos: dict[int, ProcInfo]) -> None:
        self.infos = infos

    def read_many(self, pids: Collection[int]) -> dict[int, ProcInfo]:
        return {pid: self.infos[pid] for pid in pids}


class _Box:
    """Two GPUs' driver lists; an entry is replaced only when its reading changes, as the
    driver's reader (engine.nvml) and the pipe (engine.process_delta) do."""

    def __init__(self, pids: list[int]) -> None:
        self.lists: list[list[GpuProcess]] = [[], []]
        for i, pid in enumerate(pids):
            self.lists[i % 2].append(_entry(pid, i % 2, 100 + i))

    def gpus(self) -> tuple[GpuSample, ...]:
        return tuple(make_gpu(i, processes=tuple(entries)) for i, entries in enumerate(self.lists))

    def change(self, pid: int, used_mib: int) -> None:
        for index, entries in enumerate(self.lists):
            for place, entry in enumerate(entries):
                if entry.pid == pid:
                    entries[place] = _entry(pid, index, used_mib)

    def add(self, pid: int) -> None:
        self.lists[0].append(_entry(pid, 0, 50))


def _entry(pid: int, gpu: int, used_mib: int) -> GpuProcess:
    return GpuProcess(
        pid=pid,
        gpu_index=gpu,
        type=ProcessType.COMPUTE,
        used_memory_bytes=used_mib * MiB,
        sm_util_percent=used_mib % 7,
    )


@pytest.fixture
def turns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every process read in turn (as past 250 of them), so that quiet ticks happen with few."""
    monkeypatch.setattr(procs, "STATS_PER_CALL", 2)
    monkeypatch.setattr(procs, "IDLE_STATS_PER_CALL", 2)


class _Sampler:
    """What the sampler does each tick: holder watch, rows, history."""

    def __init__(self, dev_dir: Path) -> None:
        self.watch = HolderWatch(str(dev_dir), catch_up_s=10.0)
        self.reader = _Recording()
        self.memo = RowMemo()
        self.history = History()
        self.scan: HolderScan | None = None

    def tick(self, gpus: tuple[GpuSample, ...]) -> tuple[ProcessRow, ...]:
        listed = {p.pid for g in gpus for p in g.processes}
        self.scan = self.watch.tick(1.0, listed)
        rows = process_rows(
            gpus, holders=self.scan, history=self.history, reader=self.reader, memo=self.memo
        )
        whole = process_rows(
            gpus, holders=self.scan, history=self.history, reader=_Given(self.reader.last)
        )
        assert rows == whole
        # As the sampler does: History notes each tick's rows (their peaks) before the next.
        self.history.append(replace(make_snapshot(gpus=gpus), processes=rows))
        return rows

    def settle(self, box: _Box) -> tuple[ProcessRow, ...]:
        """Tick until every process has a standing reading (its first CPU % comes from its
        second): then a tick with no change reuses every row."""
        for _ in range(30):
            rows = self.tick(box.gpus())
            if self.memo.rows_reused == len(rows):
                return rows
        raise AssertionError("the rows never settled")


def _by_pid(rows: tuple[ProcessRow, ...]) -> dict[int, ProcessRow]:
    return {r.pid: r for r in rows}


def test_a_quiet_tick_makes_only_the_changed_rows(
    spawner: Spawner, dev_dir: Path, turns: None
) -> None:
    pids = [spawner.ready(HOLD, str(dev_dir / "nvidia0")).pid for _ in range(3)]
    pids += [spawner.ready(IDLE).pid for _ in range(3)]  # listed, holding nothing: suspect
    box, sampler = _Box(pids), _Sampler(dev_dir)
    before = sampler.settle(box)
    box.change(pids[1], 700)
    after = sampler.tick(box.gpus())
    assert sampler.memo.rows_reused == len(pids) - 1
    old, new = _by_pid(before), _by_pid(after)
    assert new[pids[1]].used_memory_bytes == new[pids[1]].peak_memory_bytes == 700 * MiB
    assert all(new[p] is old[p] for p in pids if p != pids[1])
    assert [r.pid for r in after] == [r.pid for r in before]  # the same order, not sorted anew


def test_quiet_and_whole_ticks_agree_through_changes_exits_and_arrivals(
    spawner: Spawner, dev_dir: Path, turns: None
) -> None:
    # A seeded walk: memory moves, a process exits (its turn shows it gone), one arrives (a
    # whole call), one drops its device file. Each tick the rows equal a whole call's.
    holders = [spawner.ready(HOLD, str(dev_dir / "nvidia0")) for _ in range(4)]
    idle = [spawner.ready(IDLE) for _ in range(4)]
    pids = [p.pid for p in holders + idle]
    box, sampler, rng = _Box(pids), _Sampler(dev_dir), random.Random(17)
    sampler.tick(box.gpus())
    for step in range(24):
        for pid in rng.sample(pids, rng.randint(0, 3)):
            box.change(pid, rng.randint(10, 900))
        if step == 5:
            idle[0].send_signal(signal.SIGKILL)
            idle[0].wait()
        if step == 11:
            box.add(spawner.ready(IDLE).pid)
        if step == 17:
            holders[0].send_signal(signal.SIGKILL)
            holders[0].wait()
        rows = sampler.tick(box.gpus())
    gone = _by_pid(rows)
    assert not gone[idle[0].pid].info.visible and not gone[holders[0].pid].info.visible


def test_a_process_that_came_makes_a_whole_call_and_is_read_at_once(
    spawner: Spawner, dev_dir: Path, turns: None
) -> None:
    pids = [spawner.ready(IDLE).pid for _ in range(4)]
    box, sampler = _Box(pids), _Sampler(dev_dir)
    sampler.settle(box)
    late = spawner.ready(IDLE).pid
    box.add(late)
    row = _by_pid(sampler.tick(box.gpus()))[late]
    assert row.info.create_time is not None and row.used_memory_bytes == 50 * MiB


def test_a_new_holder_found_by_the_watch_reaches_its_row_on_a_quiet_tick(
    spawner: Spawner, dev_dir: Path, turns: None
) -> None:
    # The listed process opens the device after gputop first looked: the watch sees its fds
    # change, and the row stops being suspect although no driver entry changed.
    flag = dev_dir.parent / "open-now"
    late = spawner.start(OPEN_LATER, str(dev_dir / "nvidia0"), str(flag))
    pids = [late.pid] + [spawner.ready(IDLE).pid for _ in range(3)]
    box, sampler = _Box(pids), _Sampler(dev_dir)
    rows = sampler.settle(box)
    assert _by_pid(rows)[late.pid].device_files == ()
    flag.touch()
    assert late.stdout is not None and late.stdout.readline().strip() == "ready"
    assert wait_until(lambda: bool(_by_pid(sampler.tick(box.gpus()))[late.pid].device_files))


def test_the_reader_looks_only_at_the_pids_whose_turn_it_is(
    spawner: Spawner, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "STATS_PER_CALL", 1)
    monkeypatch.setattr(procs, "IDLE_STATS_PER_CALL", 1)  # 4 PIDs: each read every 4th call
    spawned = [spawner.ready(IDLE) for _ in range(4)]
    pids = [p.pid for p in spawned]
    reader = ProcReader()
    reader.read_many(pids)
    assert reader.changed is None  # a new list: every PID looked at
    for _ in range(8):  # each read twice more: its first CPU % comes with its second reading
        reader.read_many(pids)
    reads: list[int] = []
    real = proc_files.read_file

    def counting(path: str, *args: object, **kwargs: object) -> bytes | None:
        if path.endswith("/stat"):
            reads.append(int(path.split("/")[2]))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(proc_files, "read_file", counting)
    for _ in range(4):
        reader.read_many(list(pids))  # the same PIDs again (a copy: equal is enough)
        assert reader.changed == set()  # idle: the same answers
    assert sorted(reads) == sorted(pids)  # each once in four calls
    spawned[2].send_signal(signal.SIGKILL)
    spawned[2].wait()
    seen_gone = False
    for _ in range(4):
        out = reader.read_many(pids)
        assert reader.changed is not None
        seen_gone |= pids[2] in reader.changed and not out[pids[2]].visible
    assert seen_gone and len(reader) == 3  # noticed on its turn, and forgotten
    reader.read_many(pids[::-1])  # other PIDs, or another order: a whole call again
    assert reader.changed is None


def test_the_watch_hands_out_the_same_findings_while_nothing_changed(
    spawner: Spawner, dev_dir: Path
) -> None:
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    watch = HolderWatch(str(dev_dir), catch_up_s=10.0)
    watch.tick(1.0, {holder.pid})
    first = watch.tick(1.0, {holder.pid})
    again = watch.tick(1.0, {holder.pid})
    assert again.holders is first.holders and again.checked is first.checked
    assert holder.pid in again.holders
    other = spawner.ready(IDLE).pid  # a PID the driver lists from now on
    grown = watch.tick(1.0, {holder.pid, other})
    assert grown.checked == {holder.pid, other} and grown.holders is first.holders
    assert watch.tick(1.0, {holder.pid, other}).checked is grown.checked
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert wait_until(lambda: holder.pid not in watch.tick(1.0, {holder.pid}).holders)
