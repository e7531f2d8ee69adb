"""Time one full driver snapshot (every field of every GPU through the real pynvml) on dgx."""

from __future__ import annotations

import statistics
import time

from gputop import sim
from gputop.engine.nvml import NvmlSource


def main() -> None:
    for name in ("demo", "dgx"):
        lib = sim.install(name, sim.ManualClock(30.0))
        source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
        try:
            for _ in range(20):  # warm up caches of resolved symbols
                source.snapshot()
            times = []
            for _ in range(300):
                t0 = time.perf_counter()
                source.snapshot()
                times.append(time.perf_counter() - t0)
        finally:
            source.close()
            sim.uninstall()
        times.sort()
        median_ms = statistics.median(times) * 1000
        p95_ms = times[int(len(times) * 0.95)] * 1000
        print(f"snapshot_{name}_median: {median_ms:.2f} ms")
        print(f"snapshot_{name}_p95: {p95_ms:.2f} ms")


if __name__ == "__main__":
    main()
