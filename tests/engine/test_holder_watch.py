"""The incremental holder scan's scheduling rules, on real processes holding our own device files.

The rules (gputop/engine/holder_watch.py): a new PID is read on the next tick; a holder NVML does
not list, a newly listed PID and a young PID are checked every tick; every other PID is checked
once per sweep; a PID whose fds did not change is not read again.
"""

from __future__ import annotations

import itertools
import math
import os
import subprocess
from pathlib import Path

import pytest

from gputop.engine import holder_watch
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.holders import HolderScan, scan_holders
from tests.engine.fake_proc import PYTHON_MAPS, add_pid
from tests.engine.spawn import HOLD, HOLD_WITH_THREADS, OPEN_WHEN_TOLD, Spawner

SWEEP_S = 5.0


def _watch(dev_dir: Path, **kwargs: float) -> HolderWatch:
    # A budget of a whole core: the sweep is min_sweep_s whatever this machine's speed.
    options: dict[str, float] = {"min_sweep_s": SWEEP_S, "budget": 1.0, "catch_up_s": 30.0}
    options.update(kwargs)
    return HolderWatch(str(dev_dir), **options)


def _settled(watch: HolderWatch) -> HolderScan:
    """The first tick, which reads the start-up backlog (catch_up_s is long enough here)."""
    scan = watch.tick(1.0)
    assert not watch._unread
    return scan


def _wait_line(proc: subprocess.Popen[str], expected: str) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == expected


def test_a_holder_running_before_the_watch_is_found_in_the_first_tick(
    spawner: Spawner, dev_dir: Path
) -> None:
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    scan = _watch(dev_dir).tick(1.0)
    assert scan.holders[holder.pid] == (str(dev_dir / "nvidia0"),)
    assert scan.holders == scan_holders(str(dev_dir)).holders


def test_the_start_up_backlog_is_read_a_bounded_share_a_tick(
    spawner: Spawner, dev_dir: Path
) -> None:
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    watch = _watch(dev_dir, catch_up_s=0.0)  # one full read a tick
    first = watch.tick(1.0)
    assert first.full_looks == 1
    assert first.scanned > 1
    ticks = 1
    while holder.pid not in watch.tick(1.0).holders:
        ticks += 1
        assert ticks <= first.scanned
    assert ticks > 1


def test_the_first_tick_reads_a_share_of_the_backlog_the_first_frame_waits_on(
    dev_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backlog the budget cannot read whole, however few processes the test machine runs.
    crowd = [subprocess.Popen(["sleep", "60"]) for _ in range(50)]
    try:
        clock = iter(itertools.count(0.0, 0.001))  # every look at the clock: 1 ms later
        monkeypatch.setattr(holder_watch.time, "perf_counter", lambda: next(clock))
        watch = _watch(dev_dir, catch_up_s=0.02)
        first, second = watch.tick(1.0), watch.tick(1.0)
    finally:
        for proc in crowd:
            proc.kill()
            proc.wait()
    assert first.scanned > 2 * 20
    share = holder_watch.FIRST_CATCH_UP_SHARE
    assert 0 < first.full_looks <= 20 * share + 1
    assert 20 - 1 <= second.full_looks <= 20 + 1


def test_the_backlog_reads_the_pids_nvml_lists_first(spawner: Spawner, dev_dir: Path) -> None:
    # The newest processes are last in the backlog (it goes by PID): listed, they come first.
    listed = [spawner.ready(HOLD, str(dev_dir / "nvidia0")).pid for _ in range(2)]
    watch = _watch(dev_dir, catch_up_s=0.0)  # one full read a tick
    first = watch.tick(1.0, listed)
    assert first.full_looks == 1 and first.scanned > 3
    assert len(first.checked or ()) == 1
    second = watch.tick(1.0, listed)
    assert second.checked == frozenset(listed)
    assert set(second.holders) == set(listed)
    # Each was read once: the backlog's own turn for them does not read them again.
    reads: list[int] = []
    read = watch._read
    watch._read = lambda pid, key=None: (reads.append(pid), read(pid, key))[1]  # type: ignore[method-assign]
    while watch._unread:
        watch.tick(1.0, listed)
    assert reads and not set(reads) & set(listed)


def test_a_new_process_is_read_on_the_next_tick(spawner: Spawner, dev_dir: Path) -> None:
    watch = _watch(dev_dir, min_sweep_s=3600)  # no sweep reaches it: only the births rule can
    settled = _settled(watch)
    holder = spawner.ready(HOLD, str(dev_dir / "nvidiactl"))
    assert holder.pid not in settled.holders
    scan = watch.tick(1.0)
    assert scan.holders[holder.pid] == (str(dev_dir / "nvidiactl"),)
    assert scan.full_looks < scan.scanned  # it read the newcomer, not the whole box again


def test_a_young_process_that_opens_the_device_later_is_found_the_tick_after(
    spawner: Spawner, dev_dir: Path, tmp_path: Path
) -> None:
    watch = _watch(dev_dir, min_sweep_s=3600)  # no sweep reaches it: only the young rule can
    _settled(watch)
    told = tmp_path / "open"
    late = spawner.ready(OPEN_WHEN_TOLD, str(dev_dir / "nvidia0"), str(told))
    assert late.pid not in watch.tick(1.0).holders
    watch.tick(1.0)
    told.touch()
    _wait_line(late, "opened")
    assert watch.tick(1.0).holders[late.pid] == (str(dev_dir / "nvidia0"),)


def test_a_holder_nvml_does_not_list_is_checked_every_tick(
    spawner: Spawner, dev_dir: Path, tmp_path: Path
) -> None:
    told = tmp_path / "open"
    told.touch()
    proc = spawner.ready(OPEN_WHEN_TOLD, str(dev_dir / "nvidia0"), str(told))
    _wait_line(proc, "opened")
    dying = spawner.ready(HOLD, str(dev_dir / "nvidiactl"))
    watch = _watch(dev_dir, min_sweep_s=3600)  # both are old: no young rule, no sweep
    assert {proc.pid, dying.pid} <= set(_settled(watch).holders)
    told.unlink()
    _wait_line(proc, "closed")
    dying.kill()
    dying.wait()
    scan = watch.tick(1.0)
    assert proc.pid not in scan.holders  # it let go
    assert dying.pid not in scan.holders  # it died
    assert scan.scanned == len(watch._seen)  # and is forgotten


def test_every_process_is_checked_within_one_sweep(
    spawner: Spawner, dev_dir: Path, tmp_path: Path
) -> None:
    told = tmp_path / "open"
    old = spawner.ready(OPEN_WHEN_TOLD, str(dev_dir / "nvidia0"), str(told))
    watch = _watch(dev_dir)  # the process is older than the watch: not young
    settled = _settled(watch)
    assert old.pid not in settled.holders
    told.touch()
    _wait_line(old, "opened")
    ticks = 0
    scan = settled
    while old.pid not in scan.holders and ticks < 10:
        scan = watch.tick(1.0)
        ticks += 1
        # Each tick checks a slice, not the whole box (new PIDs and young ones come on top).
        assert scan.looked <= math.ceil(scan.scanned / SWEEP_S) + 16
    assert old.pid in scan.holders
    assert ticks <= SWEEP_S + 1  # one sweep of 1 s ticks (and the tick that began it)
    assert scan.sweep_s == SWEEP_S


def test_a_threads_id_is_never_a_holder(spawner: Spawner, dev_dir: Path) -> None:
    watch = _watch(dev_dir)
    _settled(watch)
    proc = spawner.start(HOLD_WITH_THREADS, str(dev_dir / "nvidia0"))
    assert proc.stdout is not None
    tids = {int(word) for word in proc.stdout.readline().split()}
    scan = watch.tick(1.0)
    assert proc.pid in scan.holders
    assert not tids & set(scan.holders)


def test_a_large_box_stretches_the_sweep_to_the_budget(dev_dir: Path) -> None:
    # A budget of a millionth of a core: any real sweep costs more, so it lasts the longest.
    watch = _watch(dev_dir, budget=1e-6)
    _settled(watch)
    while watch.tick(1.0).sweep_s == SWEEP_S:
        pass
    assert watch.sweep_s == 60.0


def test_a_process_whose_fds_did_not_change_is_not_read_again(tmp_path: Path) -> None:
    dev = tmp_path / "dev"
    dev.mkdir()
    proc = tmp_path / "proc"
    python = PYTHON_MAPS
    add_pid(proc, 10, {"0": "/dev/null"}, python)
    add_pid(proc, 11, {"0": "/dev/null"}, python)
    watch = HolderWatch(str(dev), str(proc), min_sweep_s=1.0, budget=1.0)
    _settled(watch)
    quiet = watch.tick(1.0)
    assert quiet.looked == 2 and quiet.full_looks == 0
    # A device mapped with no new fd goes unseen (the documented limit of the cheap check) ...
    (proc / "10" / "maps").write_text(python + f"7f00-7f01 rw-s 0 00:05 1 {dev}/nvidia0\n")
    assert watch.tick(1.0).holders == {}
    # ... and an fd opened on a device is seen on the next check.
    (proc / "11" / "fd" / "5").symlink_to(f"{dev}/nvidia1")
    scan = watch.tick(1.0)
    assert scan.holders == {11: (f"{dev}/nvidia1",)}
    assert scan.full_looks == 1
    assert os.path.realpath(dev) == str(dev)
