"""Exporter costs on the dgx scenario (8 GPUs, ~40 processes): /metrics scrape latency over
loopback HTTP, rendering alone, and one atomic textfile write. Scrapes never touch the driver."""

from __future__ import annotations

import statistics
import tempfile
import time
import urllib.request
from collections.abc import Callable

from prometheus_client import generate_latest

from gputop import sim
from gputop.engine.nvml import NvmlSource
from gputop.engine.sampler import Sampler
from gputop.export.http import MetricsServer
from gputop.export.prom import SnapshotCollector, TextfileWriter, make_registry

SCRAPES = 200


def _median_ms(fn: Callable[[], object], n: int) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return statistics.median(times) * 1000, times[int(n * 0.95)] * 1000


def main() -> None:
    lib = sim.install("dgx", sim.ManualClock(30.0))
    source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
    sampler = Sampler(source, interval_s=3600)  # one enriched snapshot, then quiet
    sampler.start()
    while sampler.latest is None:
        time.sleep(0.01)
    registry = make_registry(SnapshotCollector(sampler))
    server = MetricsServer(registry, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.port}/metrics"
    try:

        def scrape() -> None:
            with urllib.request.urlopen(url, timeout=5) as response:
                response.read()

        body = generate_latest(registry)
        for _ in range(20):
            scrape()
        median, p95 = _median_ms(scrape, SCRAPES)
        print(f"scrape_dgx_median: {median:.2f} ms")
        print(f"scrape_dgx_p95: {p95:.2f} ms")
        render, _ = _median_ms(lambda: generate_latest(registry), SCRAPES)
        print(f"render_dgx_median: {render:.2f} ms")
        print(f"body_dgx: {len(body) / 1024:.1f} KiB")
        with tempfile.TemporaryDirectory() as folder:
            writer = TextfileWriter(folder, registry)
            write, _ = _median_ms(writer.write, 50)
        print(f"textfile_write_dgx_median: {write:.2f} ms")
    finally:
        server.close()
        sampler.stop()
        source.close()
        sim.uninstall()


if __name__ == "__main__":
    main()
