"""Scripting costs on the simulated dgx box (8 GPUs, ~40 processes).

- query: time per CSV row with every --query-gpu field (snapshot + formatting), formatting alone;
- track: a tight pure-Python loop timed without and with ``gputop.track`` sampling every 50 ms.

The simulated driver runs in Python in this process, so its reads compete for the GIL more than
the real libnvidia-ml does: the track overhead here is an upper bound.
"""

from __future__ import annotations

import time
from statistics import median

import gputop
from gputop.commands.query import OutputFormat, gpu_lines
from gputop.commands.query_fields import ALL_GPU_FIELDS
from gputop.engine.source import Source, open_source

SAMPLES = 50
LOOP_N = 8_000_000
REPEATS = 3


def _query_row_times(source: Source) -> tuple[float, float]:
    """(seconds per row including the snapshot, seconds per row formatting only)."""
    fields = list(ALL_GPU_FIELDS)
    fmt = OutputFormat()
    snap = source.snapshot()
    indices = [g.index for g in snap.gpus]
    t0 = time.perf_counter()
    rows = 0
    for _ in range(SAMPLES):
        rows += len(gpu_lines(source.snapshot(), fields, indices, fmt))
    whole = (time.perf_counter() - t0) / rows
    t0 = time.perf_counter()
    for _ in range(SAMPLES):
        gpu_lines(snap, fields, indices, fmt)
    formatting = (time.perf_counter() - t0) / rows
    return whole, formatting


def _tight_loop() -> float:
    t0 = time.perf_counter()
    total = 0
    for i in range(LOOP_N):
        total += i * i % 7
    return time.perf_counter() - t0


def _track_overhead(source: Source) -> tuple[float, float, int]:
    """(median seconds without, median seconds with track, samples taken in one tracked run)."""
    without: list[float] = []
    with_track: list[float] = []
    samples = 0
    for _ in range(REPEATS):
        without.append(_tight_loop())
        with gputop.track("bench", interval_s=0.05, source=source) as t:
            with_track.append(_tight_loop())
        samples = t.samples
    return median(without), median(with_track), samples


def main() -> None:
    """Print 'name: value unit' lines."""
    source = open_source(demo="dgx")
    try:
        whole, formatting = _query_row_times(source)
        print(f"query_row_dgx_all_{len(ALL_GPU_FIELDS)}_fields: {whole * 1e6:.1f} us")
        print(f"query_row_format_only: {formatting * 1e6:.1f} us")
        base, tracked, samples = _track_overhead(source)
        print(f"tight_loop_without_track: {base * 1000:.1f} ms")
        print(f"tight_loop_with_track_50ms: {tracked * 1000:.1f} ms")
        print(f"track_overhead: {100 * (tracked - base) / base:.1f} %")
        print(f"track_samples_per_run: {samples} samples")
    finally:
        source.close()


if __name__ == "__main__":
    main()
