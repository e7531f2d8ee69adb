"""Engine costs: sampler time per tick (dgx scenario), holder scan time, history memory over 24 h.

Set GPUTOP_BENCH_EXTRA_PROCS (default 2000, 0 to skip) for the scan with extra sleeping processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import tracemalloc
from dataclasses import replace
from statistics import mean, median

from gputop.engine.enrich import enrich
from gputop.engine.history import History
from gputop.engine.holders import HolderScan, scan_holders
from gputop.engine.model import Snapshot
from gputop.engine.procs import ProcReader
from gputop.engine.source import Source
from gputop.sources import open_source

TICKS = 50
SCANS = 5
DAY_TICKS = 24 * 3600  # one tick a second for a day


def _open_dgx() -> tuple[Source, str]:
    return open_source(demo="dgx"), "dgx"


def _tick_times(source: Source, holders: HolderScan) -> tuple[list[float], list[float], Snapshot]:
    """(driver read seconds, whole tick seconds) per tick, as the sampler does a tick."""
    history = History()
    reader = ProcReader()
    reads: list[float] = []
    ticks: list[float] = []
    snap = source.snapshot()
    for _ in range(TICKS):
        t0 = time.perf_counter()
        snap = source.snapshot()
        t1 = time.perf_counter()
        snap = enrich(snap, holders=holders, history=history, reader=reader)
        history.append(snap)
        ticks.append(time.perf_counter() - t0)
        reads.append(t1 - t0)
    return reads, ticks, snap


def _scan_ms() -> tuple[float, int]:
    times = []
    scan = scan_holders()
    for _ in range(SCANS):
        scan = scan_holders()
        times.append(scan.duration_s)
    return median(times) * 1000, scan.scanned


def _with_extra_processes(count: int) -> tuple[float, int] | None:
    sleep = shutil.which("sleep")
    if count <= 0 or sleep is None:
        return None
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            # one at a time, so the finally below kills all started so far
            procs.append(subprocess.Popen([sleep, "120"], stdin=subprocess.DEVNULL))  # noqa: PERF401
        return _scan_ms()
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


class _SteppedClock:
    """A clock that moves one second per reading of the reader: ticks at a 1 s interval."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _read_real_processes(count: int) -> tuple[float, float] | None:
    """(mean ms per tick, full psutil readings per process per tick) for ``count`` real PIDs."""
    sleep = shutil.which("sleep")
    if sleep is None:
        return None
    procs = [subprocess.Popen([sleep, "120"], stdin=subprocess.DEVNULL) for _ in range(count)]
    try:
        clock = _SteppedClock()
        reader = ProcReader(clock=clock)
        pids = [p.pid for p in procs]
        times = []
        for _ in range(60):
            clock.now += 1.0
            t0 = time.perf_counter()
            reader.read_many(pids)
            times.append(time.perf_counter() - t0)
        return mean(times[10:]) * 1000, reader.full_reads / (60 * count)
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _history_day(snap: Snapshot) -> tuple[float, float]:
    """(KiB held after 1 h, KiB held after 24 h) of a default History fed one tick a second.

    Compared after 1 h rather than after the first 600 ticks: early ticks reuse tuples from
    CPython's free lists, which tracemalloc does not count as new allocations.
    """
    history = History()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        one_hour = 0
        for i in range(DAY_TICKS):
            history.append(replace(snap, seq=i, taken_at_wall=float(i)))
            if i == 3600:
                one_hour = tracemalloc.get_traced_memory()[0] - base
        day = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return one_hour / 1024, day / 1024


def main() -> None:
    source, name = _open_dgx()
    try:
        holders = scan_holders()
        reads, ticks, snap = _tick_times(source, holders)
    finally:
        source.close()
    print(f"sampler scenario: {name} ({len(snap.gpus)} GPUs, {len(snap.processes)} processes)")
    print(f"sampler driver read per tick: {median(reads) * 1000:.2f} ms")
    print(f"sampler tick (read + enrich + history): {median(ticks) * 1000:.2f} ms")
    real = _read_real_processes(40)
    if real is not None:
        print(
            f"process reads, 40 real processes, 1 s ticks: {real[0]:.2f} ms per tick "
            f"({real[1]:.2f} full psutil readings per process per tick)"
        )
    scan_ms, scanned = _scan_ms()
    print(f"holder scan ({scanned} processes): {scan_ms:.2f} ms")
    extra = int(os.environ.get("GPUTOP_BENCH_EXTRA_PROCS", "2000"))
    with_extra = _with_extra_processes(extra)
    if with_extra is not None:
        print(f"holder scan ({with_extra[1]} processes): {with_extra[0]:.2f} ms")
    one_hour_kib, day_kib = _history_day(snap)
    print(f"history memory after 1 h of ticks: {one_hour_kib:.0f} KiB")
    print(f"history memory after 24 h of ticks: {day_kib:.0f} KiB")
