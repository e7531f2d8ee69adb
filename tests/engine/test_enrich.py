"""enrich/classify: real spawned processes classified as holder, defunct, orphan, stopped."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from gputop.engine import enrich as enrich_module
from gputop.engine import procs
from gputop.engine.enrich import (
    SUSPECT_NOTE,
    ProcFacts,
    RowMemo,
    classify,
    enrich,
    unattributed_memory,
)
from gputop.engine.history import History
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.holders import scan_holders
from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcState, Snapshot
from gputop.engine.procs import PENDING_NOTE, ProcReader
from tests.engine.spawn import HOLD, ORPHAN_MAKER, ZOMBIE_PARENT, Spawner, status_of, wait_until
from tests.fakes import GiB, lost_gpu, make_gpu, make_snapshot

MiB = 1024**2
A, H, D, ORP, S, N = (
    ProcState.ACTIVE,
    ProcState.HOLDER,
    ProcState.DEFUNCT,
    ProcState.ORPHAN,
    ProcState.STOPPED,
    ProcState.NAMESPACE,
)


@pytest.mark.parametrize(
    ("listed", "visible", "status", "holds", "orphaned", "expected"),
    [
        (True, True, "running", True, False, (A,)),
        (True, True, "sleeping", False, False, (A,)),
        (False, True, "sleeping", True, False, (H,)),
        (True, False, None, False, False, (N,)),
        (True, False, None, True, True, (N,)),  # nothing else is knowable about an unseen PID
        (True, True, "zombie", False, False, (D, A)),
        (True, True, "stopped", True, False, (S, A)),
        (False, True, "stopped", True, False, (S, H)),
        (False, True, "tracing-stop", True, False, (S, H)),
        (False, True, "sleeping", True, True, (ORP, H)),
        (True, True, "running", True, True, (ORP, A)),
        (False, True, "sleeping", False, True, ()),  # an orphan holding nothing is not ours
        (False, True, "zombie", False, False, (D,)),
    ],
)
def test_classify_table(
    listed: bool,
    visible: bool,
    status: str | None,
    holds: bool,
    orphaned: bool,
    expected: tuple[ProcState, ...],
) -> None:
    facts = ProcFacts(
        listed=listed, visible=visible, status=status, holds_device=holds, orphaned=orphaned
    )
    assert classify(facts) == expected


def _driver_snapshot(*pids: int, used_mib: int = 1024) -> Snapshot:
    """A 1-GPU driver snapshot listing ``pids`` (memory fully attributed)."""
    procs = tuple(
        GpuProcess(pid=p, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=used_mib * MiB)
        for p in pids
    )
    gpu = make_gpu(0, processes=procs, memory_used_bytes=len(pids) * used_mib * MiB)
    return make_snapshot(gpus=(gpu,))


def _row(snapshot: Snapshot, pid: int) -> ProcessRow:
    rows = {r.pid: r for r in snapshot.processes}
    assert pid in rows, f"no row for {pid}: {sorted(rows)}"
    return rows[pid]


def test_listed_real_process_is_active_with_user_and_command(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)  # gputop-active-marker")
    row = _row(enrich(_driver_snapshot(proc.pid)), proc.pid)
    assert row.states == (A,)
    assert row.info.uid == os.getuid()
    assert "gputop-active-marker" in row.info.command
    assert row.gpu_indices == (0,)
    assert row.used_memory_bytes == 1024 * MiB
    assert not row.stuck


def test_holder_not_listed_by_driver(spawner: Spawner, dev_dir: Path) -> None:
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    snap = enrich(_driver_snapshot(), holders=scan_holders(str(dev_dir)))
    row = _row(snap, proc.pid)
    assert row.states == (H,)
    assert row.stuck
    assert row.device_files == (str(dev_dir / "nvidia0"),)
    assert row.gpu_indices == ()
    assert row.used_memory_bytes is None


def test_own_process_holding_device_is_not_a_row(dev_dir: Path) -> None:
    with open(dev_dir / "nvidia0", "rb"):
        scan = scan_holders(str(dev_dir))
        assert os.getpid() in scan.holders
        snap = enrich(_driver_snapshot(), holders=scan)
    assert os.getpid() not in {r.pid for r in snap.processes}


def test_defunct_names_the_parent_not_reaping_it(spawner: Spawner) -> None:
    parent = spawner.start(ZOMBIE_PARENT)
    zombie = spawner.first_line_pid(parent)
    assert wait_until(lambda: status_of(zombie) == "zombie")
    row = _row(enrich(_driver_snapshot(zombie)), zombie)
    assert row.states == (D, A)
    assert row.stuck
    assert row.parent_note is not None
    assert f"parent {parent.pid} (python" in row.parent_note
    assert "not reaping" in row.parent_note


def test_orphan_still_holding_the_device(spawner: Spawner, dev_dir: Path) -> None:
    leader = spawner.start(ORPHAN_MAKER, str(dev_dir / "nvidia0"), new_session=True)
    worker = spawner.first_line_pid(leader)
    leader.wait(timeout=30)  # the job leader exits (and is reaped): the worker is orphaned
    assert wait_until(lambda: status_of(worker) is not None and _ppid(worker) != leader.pid)
    snap = enrich(_driver_snapshot(), holders=scan_holders(str(dev_dir)))
    row = _row(snap, worker)
    assert row.states == (ORP, H)
    assert row.stuck
    assert row.parent_note is not None
    assert f"job leader {leader.pid} has exited" in row.parent_note


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except FileNotFoundError:
        return None


def test_child_of_live_parent_is_not_an_orphan(spawner: Spawner, dev_dir: Path) -> None:
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))  # its parent (us) is alive
    row = _row(enrich(_driver_snapshot(), holders=scan_holders(str(dev_dir))), proc.pid)
    assert ORP not in row.states


def test_stopped_process(spawner: Spawner, dev_dir: Path) -> None:
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    os.kill(proc.pid, signal.SIGSTOP)
    assert wait_until(lambda: status_of(proc.pid) == "stopped")
    row = _row(enrich(_driver_snapshot(), holders=scan_holders(str(dev_dir))), proc.pid)
    assert row.states == (S, H)
    assert row.stuck
    os.kill(proc.pid, signal.SIGCONT)


def test_pid_in_another_namespace_keeps_its_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    unseen = 2**22 + 17  # above the largest possible pid_max: never a PID here
    # gputop in a PID namespace of its own (seeing every host PID, it would call it exited)
    monkeypatch.setattr(enrich_module, "_sees_driver_pids", lambda: False)
    row = _row(enrich(_driver_snapshot(unseen, used_mib=5000)), unseen)
    assert row.states == (N,)
    assert row.used_memory_bytes == 5000 * MiB
    assert row.info.note is not None
    assert "PID namespace" in row.info.note
    assert not row.stuck


def test_unattributed_memory_beyond_tolerance() -> None:
    gpu = make_gpu(0)  # 80 GiB card, 20 GiB used, 18 GiB listed: 2 GiB > max(256 MiB, 1.6 GiB)
    small = make_gpu(1, memory_used_bytes=18 * GiB + 300 * MiB)  # 300 MiB < 1.6 GiB: driver's
    tiny_card = make_gpu(
        2, memory_total_bytes=4 * GiB, memory_used_bytes=18 * GiB + 300 * MiB
    )  # 300 MiB > max(256 MiB, 82 MiB)
    unknown = make_gpu(3, memory_used_bytes=None)
    assert unattributed_memory((gpu, small, tiny_card, unknown, lost_gpu(4))) == (
        (0, 2 * GiB),
        (2, 300 * MiB),
    )


def test_peak_memory_comes_from_history(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    history = History(maxlen=10)
    reader = ProcReader()
    high = enrich(_driver_snapshot(proc.pid, used_mib=3000), history=history, reader=reader)
    history.append(high)
    low = enrich(
        replace(_driver_snapshot(proc.pid, used_mib=1000), seq=2), history=history, reader=reader
    )
    row = _row(low, proc.pid)
    assert row.used_memory_bytes == 1000 * MiB
    assert row.peak_memory_bytes == 3000 * MiB
    assert history.gpu_peak_memory_bytes(0) == 3000 * MiB


def test_process_on_two_gpus_is_one_row(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    gpus = tuple(
        make_gpu(
            i,
            processes=(
                GpuProcess(
                    pid=proc.pid,
                    gpu_index=i,
                    type=ProcessType.COMPUTE if i == 0 else ProcessType.GRAPHICS,
                    used_memory_bytes=GiB,
                    sm_util_percent=10 * (i + 1),
                ),
            ),
        )
        for i in (0, 1)
    )
    row = _row(enrich(make_snapshot(gpus=gpus)), proc.pid)
    assert row.gpu_indices == (0, 1)
    assert row.used_memory_bytes == 2 * GiB
    assert row.type is ProcessType.MIXED
    assert row.sm_util_percent == 20


def test_row_sums_and_maxima_skip_unknown_values(spawner: Spawner) -> None:
    proc = spawner.start("import time; time.sleep(120)")
    known = {"used_memory_bytes": GiB, "sm_util_percent": 30, "memory_util_percent": 5}
    contexts = [known, {}, {**known, "sm_util_percent": 40, "memory_util_percent": None}]
    gpus = tuple(
        make_gpu(
            i,
            processes=(GpuProcess(pid=proc.pid, gpu_index=i, type=ProcessType.COMPUTE, **c),),
        )
        for i, c in enumerate(contexts)
    )
    row = _row(enrich(make_snapshot(gpus=gpus)), proc.pid)
    assert row.gpu_indices == (0, 1, 2)
    assert row.type is ProcessType.COMPUTE
    assert row.used_memory_bytes == row.peak_memory_bytes == 2 * GiB
    assert (row.sm_util_percent, row.memory_util_percent) == (40, 5)
    unknown = make_gpu(
        0, processes=(GpuProcess(pid=proc.pid, gpu_index=0, type=ProcessType.COMPUTE),)
    )
    row = _row(enrich(make_snapshot(gpus=(unknown,))), proc.pid)
    assert (row.used_memory_bytes, row.peak_memory_bytes, row.sm_util_percent) == (None,) * 3
    assert row.memory_util_percent is None


def test_listed_pid_holding_no_device_is_suspect(spawner: Spawner, dev_dir: Path) -> None:
    # In a container the driver's PID can name an unrelated local process: it holds no device.
    proc = spawner.start("import time; time.sleep(120)")
    row = _row(enrich(_driver_snapshot(proc.pid), holders=scan_holders(str(dev_dir))), proc.pid)
    assert row.states == (A,)
    assert row.info.note == SUSPECT_NOTE


def test_the_watch_marks_a_listed_pid_suspect_once_it_has_read_it(
    spawner: Spawner, dev_dir: Path
) -> None:
    # The dashboard's incremental watch: it reads a listed PID before enrich may call it suspect.
    idle = spawner.start("import time; time.sleep(120)")
    user = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    watch = HolderWatch(str(dev_dir), catch_up_s=10.0)
    scan = watch.tick(1.0, {idle.pid, user.pid})
    assert {idle.pid, user.pid} <= scan.checked
    snap = make_snapshot(
        gpus=(
            make_gpu(
                0,
                processes=tuple(
                    GpuProcess(pid=p.pid, gpu_index=0, type=ProcessType.COMPUTE)
                    for p in (idle, user)
                ),
            ),
        )
    )
    rows = enrich(snap, holders=scan)
    assert _row(rows, idle.pid).info.note == SUSPECT_NOTE
    assert _row(rows, user.pid).info.note is None
    assert _row(rows, user.pid).device_files == (str(dev_dir / "nvidia0"),)
    # Not read yet (the start-up backlog of a large box): no verdict, rather than a false one.
    unread = replace(scan, checked=frozenset())
    assert _row(enrich(snap, holders=unread), idle.pid).info.note is None


def test_device_opened_after_the_scan_is_seen(spawner: Spawner, dev_dir: Path) -> None:
    scan = scan_holders(str(dev_dir))  # taken before the process exists
    proc = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    row = _row(enrich(_driver_snapshot(proc.pid), holders=scan), proc.pid)
    assert row.states == (A,)
    assert row.info.note is None
    assert row.device_files == (str(dev_dir / "nvidia0"),)


def test_past_the_readers_allowance_the_most_memory_is_read_first(
    spawner: Spawner, dev_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 5,000 new GPU processes on the first tick (issue 17): those on screen are read first.
    monkeypatch.setattr(procs, "NEW_PER_CALL", 1)
    small, big = (spawner.start("import time; time.sleep(120)") for _ in range(2))
    gpu = make_gpu(
        0,
        processes=tuple(
            GpuProcess(
                pid=p.pid,
                gpu_index=0,
                type=ProcessType.COMPUTE,
                used_memory_bytes=mib * MiB,
                driver_name="python3",
            )
            for p, mib in ((small, 10), (big, 900))
        ),
    )
    snap = make_snapshot(gpus=(gpu,))
    watch = HolderWatch(str(dev_dir), catch_up_s=10.0)
    reader = ProcReader()
    scan = watch.tick(1.0, {small.pid, big.pid})
    first = enrich(snap, holders=scan, reader=reader)
    assert _row(first, big.pid).info.create_time is not None
    waiting = _row(first, small.pid)
    # Not read yet: the driver's name, its memory, and no verdict on it (not suspect).
    assert waiting.info.name == "python3" and waiting.info.note == PENDING_NOTE
    assert waiting.used_memory_bytes == 10 * MiB and waiting.states == (A,)
    second = enrich(snap, holders=watch.tick(1.0, {small.pid, big.pid}), reader=reader)
    assert _row(second, small.pid).info.create_time is not None
    assert _row(second, small.pid).info.note == SUSPECT_NOTE  # holds no device file


def test_an_unchanged_process_keeps_its_row_and_a_change_makes_a_new_one(
    spawner: Spawner, dev_dir: Path
) -> None:
    # Issue 17: at thousands of idle workers a row whose reading, device files and driver
    # entries are the last tick's objects is the last tick's row; any change rebuilds it.
    idle = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    reader, memo, history = ProcReader(), RowMemo(), History()
    snap = _driver_snapshot(idle.pid, used_mib=100)
    watch = HolderWatch(str(dev_dir), catch_up_s=10.0)

    def tick(snapshot: Snapshot) -> ProcessRow:
        done = enrich(
            snapshot,
            holders=watch.tick(1.0, {idle.pid}),
            history=history,
            reader=reader,
            memo=memo,
        )
        history.append(done)
        return _row(done, idle.pid)

    tick(snap)
    time.sleep(0.05)
    kept = tick(snap)
    assert tick(snap) is kept and memo.rows_reused == 1
    grown = tick(_driver_snapshot(idle.pid, used_mib=300))  # new driver entries
    assert grown is not kept and memo.rows_reused == 0
    assert grown.used_memory_bytes == grown.peak_memory_bytes == 300 * MiB
    shrunk = tick(_driver_snapshot(idle.pid, used_mib=200))
    assert (shrunk.used_memory_bytes, shrunk.peak_memory_bytes) == (200 * MiB, 300 * MiB)
    psutil.Process(idle.pid).send_signal(signal.SIGSTOP)
    try:
        assert wait_until(lambda: status_of(idle.pid) == psutil.STATUS_STOPPED)
        same_entries = _driver_snapshot(idle.pid, used_mib=200)
        tick(same_entries)
        stopped = tick(same_entries)
        assert stopped.states[0] is S  # its reading changed: a new verdict and row
    finally:
        psutil.Process(idle.pid).send_signal(signal.SIGCONT)
