"""Scripting costs on the simulated dgx box (8 GPUs, ~40 processes).

- query: time per CSV row with every --query-gpu field (snapshot + formatting), formatting alone;
- api: a fresh interpreter's first ``gputop.devices()`` (the driver process spawned and opened,
  the API's default; or the driver opened in this process, ``use_driver(in_process=True)``), and
  one call after that, each way;
- track: a tight pure-Python loop timed without and with ``gputop.track`` sampling every 50 ms,
  reading through the driver process (the default) and in this process.

In this process the simulated driver runs in Python, so its reads compete for the GIL more than
the real libnvidia-ml does: the in-process track overhead here is an upper bound.
"""

from __future__ import annotations

import subprocess
import sys
import time
from statistics import median

import gputop
from gputop.commands.query import OutputFormat, gpu_lines
from gputop.commands.query_fields import ALL_GPU_FIELDS
from gputop.engine.source import Source
from gputop.sources import open_source

SAMPLES = 50
LOOP_N = 8_000_000
REPEATS = 3
FIRST_CALLS = 3  # fresh interpreters per way of reading
CALLS = 20

# A fresh interpreter: the first gputop.devices() on the dgx demo (seconds), in-process when asked.
_FIRST_CALL = """
import sys, time, gputop
if sys.argv[1] == "in-process":
    gputop.use_driver(in_process=True)
gputop.use_demo("dgx")
t0 = time.perf_counter()
gputop.devices()
print(time.perf_counter() - t0)
"""
WAYS = ("driver_process", "in_process")


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


def _first_call_s(way: str) -> float:
    """Median over fresh interpreters of the first ``gputop.devices()``."""
    runs = [
        float(
            subprocess.run(
                [sys.executable, "-c", _FIRST_CALL, way.replace("_", "-")],
                capture_output=True,
                text=True,
                check=True,
                timeout=120,
            ).stdout
        )
        for _ in range(FIRST_CALLS)
    ]
    return median(runs)


def _use(way: str) -> None:
    """The API's shared source from now on: the dgx demo, read the ``way`` asked."""
    gputop.use_driver(in_process=way == "in_process")
    gputop.use_demo("dgx")


def _call_s() -> float:
    """Median seconds of one ``gputop.devices()`` once the driver is open."""
    gputop.devices()
    times = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        gputop.devices()
        times.append(time.perf_counter() - t0)
    return median(times)


def _track_overhead(source: Source | None) -> tuple[float, float, int]:
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
    finally:
        source.close()
    for way in WAYS:
        print(f"api_first_call_{way}: {_first_call_s(way) * 1000:.1f} ms")
    try:
        for way in WAYS:
            _use(way)
            print(f"api_call_{way}: {_call_s() * 1e6:.0f} us")
            base, tracked, samples = _track_overhead(None)
            print(f"tight_loop_without_track_{way}: {base * 1000:.1f} ms")
            print(f"tight_loop_with_track_50ms_{way}: {tracked * 1000:.1f} ms")
            print(f"track_overhead_{way}: {100 * (tracked - base) / base:.1f} %")
            print(f"track_samples_per_run_{way}: {samples} samples")
    finally:
        gputop.use_driver()
        gputop.use_demo(None)


if __name__ == "__main__":
    main()
