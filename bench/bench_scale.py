"""Scaling (issue 17): the holder scan and the sampler tick as the box grows, with real processes.

Starts real sleeping processes (``sleep``) until the box has about 200, 2,000 and 10,000
processes, and measures at each size, in the same run:

* the whole holder scan (``/proc/PID/maps`` and ``/proc/PID/fd`` of every process), which the
  sampler ran every 5 s before issue 17, and its share of a core at that cadence;
* the incremental watch (gputop.engine.holder_watch) at 1 s ticks once its start-up backlog is
  read: CPU per tick, share of a core, how long a sweep lasts (every process is looked at within
  it) and what the backlog cost;
* a whole sampler tick on the dgx scenario (driver read + enrich + history + holders), the old
  way (a whole scan every 5th tick, averaged) and the new way (a watch tick every tick).

GPUTOP_BENCH_SCALE_SIZES overrides the sizes (comma separated; 0 skips this bench).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from statistics import median

from bench.crowd import Crowd
from gputop.engine.enrich import enrich
from gputop.engine.history import History
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.holders import HolderScan, scan_holders
from gputop.engine.procs import ProcReader
from gputop.engine.source import Source
from gputop.sources import open_source

SCANS = 3
OLD_HOLDER_INTERVAL_S = 5.0  # the sampler's whole-scan cadence before the watch
TICK_S = 1.0  # the dashboard's default interval
SAMPLER_TICKS = 40


def _cpu(fn: Callable[[], object]) -> float:
    """CPU seconds this thread spent in ``fn``."""
    t0 = time.thread_time()
    fn()
    return time.thread_time() - t0


def _whole_scan_ms() -> tuple[float, int]:
    scanned = 0

    def scan() -> None:
        nonlocal scanned
        scanned = scan_holders().scanned

    return median(_cpu(scan) for _ in range(SCANS)) * 1000, scanned


def _watch() -> tuple[float, float, float, float]:
    """(ms per steady tick, % of a core at 1 s ticks, sweep seconds, backlog ms)."""
    watch = HolderWatch()
    backlog = _cpu(lambda: watch.tick(TICK_S))
    while watch._unread:  # the start-up backlog: read at up to catch_up_s a tick
        backlog += _cpu(lambda: watch.tick(TICK_S))
    # Two sweeps' worth of ticks, so that the sweep's length comes from a measured sweep.
    ticks = 2 * math.ceil(watch.sweep_s / TICK_S) + 2
    spent = sum(_cpu(lambda: watch.tick(TICK_S)) for _ in range(ticks))
    per_tick = spent / ticks
    return per_tick * 1000, per_tick / TICK_S * 100, watch.sweep_s, backlog * 1000


def _sampler_ms(source: Source) -> tuple[float, float]:
    """(old, new) mean CPU ms of a sampler tick: driver read + enrich + history + holders."""
    results = []
    for incremental in (False, True):
        history, reader = History(), ProcReader()
        watch = HolderWatch()
        scan: HolderScan | None = None
        if incremental:
            while watch.tick(TICK_S) and watch._unread:
                pass
        spent = 0.0
        for i in range(SAMPLER_TICKS):
            t0 = time.thread_time()
            snap = source.snapshot()
            listed = {p.pid for g in snap.gpus for p in g.processes}
            if incremental:
                scan = watch.tick(TICK_S, listed)
            elif scan is None or i % round(OLD_HOLDER_INTERVAL_S / TICK_S) == 0:
                scan = scan_holders()
            history.append(enrich(snap, holders=scan, history=history, reader=reader))
            spent += time.thread_time() - t0
        results.append(spent / SAMPLER_TICKS * 1000)
    return results[0], results[1]


def main() -> None:
    raw = os.environ.get("GPUTOP_BENCH_SCALE_SIZES", "200,2000,10000")
    sizes = sorted(int(s) for s in raw.split(",") if s.strip() and int(s) > 0)
    crowd = Crowd(900)
    if not sizes or not crowd.available:
        print("scale: skipped")
        return
    print(
        "processes | whole scan ms (% of a core every 5 s) | watch ms/tick (% of a core at 1 s)"
        " | sweep s | backlog ms | sampler tick ms, old -> new"
    )
    source = open_source(demo="dgx")
    try:
        with crowd:
            for size in sizes:
                crowd.grow_box_to(size)
                scan_ms, scanned = _whole_scan_ms()
                tick_ms, share, sweep_s, backlog_ms = _watch()
                old_ms, new_ms = _sampler_ms(source)
                old_share = scan_ms / 1000 / OLD_HOLDER_INTERVAL_S * 100
                print(
                    f"scale_{size}: {scanned} | {scan_ms:.1f} ({old_share:.2f} %) | "
                    f"{tick_ms:.2f} ({share:.2f} %) | {sweep_s:.1f} | {backlog_ms:.0f} | "
                    f"{old_ms:.2f} -> {new_ms:.2f}",
                    flush=True,
                )
    finally:
        source.close()


if __name__ == "__main__":
    main()
