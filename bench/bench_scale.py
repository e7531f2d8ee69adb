"""Scaling (issue 17): what one holder scan costs as the box grows, with real processes.

Starts real sleeping processes (``sleep``) until the box has about 200, 2,000 and 10,000
processes, and times gputop's full holder scan (``/proc/PID/maps`` and ``/proc/PID/fd`` of every
process) at each size, with its average cost at the sampler's 5 s holder cadence.
GPUTOP_BENCH_SCALE_SIZES overrides the sizes (comma separated; 0 skips this bench).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from statistics import median

from gputop.engine.holders import scan_holders

SCANS = 5
HOLDER_INTERVAL_S = 5.0  # the sampler's default full-scan cadence


def _processes() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def _scan_ms() -> tuple[float, int]:
    times = []
    scanned = 0
    for _ in range(SCANS):
        scan = scan_holders()
        times.append(scan.duration_s)
        scanned = scan.scanned
    return median(times) * 1000, scanned


def main() -> None:
    raw = os.environ.get("GPUTOP_BENCH_SCALE_SIZES", "200,2000,10000")
    sizes = sorted(int(s) for s in raw.split(",") if s.strip() and int(s) > 0)
    sleep = shutil.which("sleep")
    if not sizes or sleep is None:
        print("scale: skipped")
        return
    started: list[subprocess.Popen[bytes]] = []
    try:
        for size in sizes:
            while _processes() < size:
                started.append(subprocess.Popen([sleep, "600"], stdin=subprocess.DEVNULL))
            scan_ms, scanned = _scan_ms()
            share = scan_ms / 1000 / HOLDER_INTERVAL_S * 100
            print(
                f"scale_holder_scan_{size}: {scan_ms:.1f} ms for {scanned} processes "
                f"({share:.2f} % of a core every {HOLDER_INTERVAL_S:g} s)"
            )
    finally:
        for proc in started:
            with contextlib.suppress(OSError):
                proc.kill()
        for proc in started:
            proc.wait()


if __name__ == "__main__":
    main()
