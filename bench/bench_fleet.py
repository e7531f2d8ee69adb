"""`gputop fleet` at scale: a real Prometheus scraping 500 synthetic hosts of 8 GPUs each.

Every host serves what `gputop export --demo=dgx` serves (its DCGM_FI_* series and gputop's
own, ~300 series), under its own hostname and GPU UUIDs, from one loopback HTTP server: 500
scrape targets (``/host/N``, each with its own ``instance`` label, so 500 ``up`` series),
scraped every 10 s. Measured: the queries one refresh makes, the time of one refresh (median of
10) and of one history read (the sparklines' range queries), the poller thread's CPU at a 5 s
refresh over GPUTOP_BENCH_FLEET_SECONDS (default 30), and
the whole `gputop fleet` overview process in a 200x60 tmux pane at --interval 5 over the same
window (Textual redrawing 500 rows included). Needs /usr/bin/prometheus (and tmux for the last).
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import generate_latest

from gputop import sim
from gputop.engine.nvml import NvmlSource
from gputop.engine.sampler import Sampler
from gputop.export.prom import SnapshotCollector, make_registry
from gputop.fleet.client import PrometheusClient, PrometheusError
from gputop.fleet.model import (
    HISTORY_QUERIES,
    HISTORY_STEP_S,
    QUERIES,
    FleetReader,
    read_fleet,
    read_history,
)
from gputop.ui.fleet.poller import FleetPoller
from tests.fleet.conftest import prometheus_on

HOSTS = 500
GPUS = 8
SCRAPE_INTERVAL_S = 10
REFRESH_S = 5.0
SECONDS = float(os.environ.get("GPUTOP_BENCH_FLEET_SECONDS", "30"))
SESSION = f"gputop-bench-fleet-{os.getpid()}"


def dgx_exposition() -> str:
    """What `gputop export --demo=dgx` serves (one enriched sample of the simulated dgx)."""
    lib = sim.install("dgx", sim.ManualClock(30.0))
    source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
    sampler = Sampler(source, interval_s=3600)
    sampler.start()
    try:
        while sampler.latest is None:
            time.sleep(0.01)
        return generate_latest(make_registry(SnapshotCollector(sampler))).decode()
    finally:
        sampler.stop()
        source.close()
        sim.uninstall()


def host_bodies(template: str, hosts: int) -> list[bytes]:
    """``template`` once per host: its own host name and GPU UUIDs."""
    named = re.sub(r'((?:h|H)ostname)="[^"]*"', r'\1="{host}"', template)
    named = named.replace('UUID="GPU-', 'UUID="GPU-{host}-')
    bodies = []
    for n in range(hosts):
        host = f"gpu-node-{n:03d}"
        bodies.append(named.replace("{host}", host).encode())
    return bodies


@contextlib.contextmanager
def serving(bodies: list[bytes]) -> Iterator[int]:
    """A loopback server answering ``/host/N`` with ``bodies[N]``: its port."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            try:
                body = bodies[int(self.path.rsplit("/", 1)[-1])]
            except (ValueError, IndexError):
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def prometheus(port: int, hosts: int, folder: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real Prometheus scraping the ``hosts`` targets every SCRAPE_INTERVAL_S."""
    lines = [
        f"global:\n  scrape_interval: {SCRAPE_INTERVAL_S}s\n  scrape_timeout: 5s\n",
        "scrape_configs:\n  - job_name: gputop\n    honor_labels: true\n    static_configs:\n",
    ]
    lines.extend(
        f"      - targets: ['127.0.0.1:{port}']\n"
        f"        labels: {{instance: 'gpu-node-{n:03d}:9400', "
        f"__metrics_path__: '/host/{n}'}}\n"
        for n in range(hosts)
    )
    (folder / "prometheus.yml").write_text("".join(lines))
    binary = shutil.which("prometheus") or "/usr/bin/prometheus"
    with prometheus_on(binary, folder, folder / "prometheus.yml") as running:
        yield running


def wait_for_fleet(client: PrometheusClient, hosts: int, timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    seen = 0
    while time.monotonic() < deadline:
        with contextlib.suppress(PrometheusError):
            fleet = read_fleet(client)
            seen = sum(len(h.gpus) == GPUS and not h.down for h in fleet.hosts)
            if seen == hosts:
                return
        time.sleep(1.0)
    raise RuntimeError(f"only {seen} of {hosts} hosts complete after {timeout_s:g} s")


class CountingClient(PrometheusClient):
    """A client that counts its instant and range queries."""

    count = 0
    ranges = 0

    def query(self, promql: str, *, at: float | None = None, timeout_s: float | None = None):  # type: ignore[no-untyped-def]
        self.count += 1
        return super().query(promql, at=at, timeout_s=timeout_s)

    def query_range(self, promql: str, **kwargs):  # type: ignore[no-untyped-def]
        self.ranges += 1
        return super().query_range(promql, **kwargs)


def thread_cpu_s(thread: threading.Thread) -> float:
    assert thread.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def poller_cpu(client: PrometheusClient) -> tuple[float, int]:
    """(% of a core the poller thread used, its reads) over SECONDS at a REFRESH_S refresh,
    reading as the overview does (the sparklines' history every HISTORY_STEP_S)."""
    reads = 0
    reader = FleetReader(client, history_every=round(HISTORY_STEP_S / REFRESH_S))

    def read():  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return reader()

    poller = FleetPoller(read, interval_s=REFRESH_S)
    poller.start()
    thread = poller._thread  # its own CPU clock is the measure
    time.sleep(1.0)
    while poller.state.reading_since_mono is not None:  # the first read is done
        time.sleep(0.05)
    cpu0, t0, reads0 = thread_cpu_s(thread), time.monotonic(), reads
    time.sleep(SECONDS)
    cpu1, t1 = thread_cpu_s(thread), time.monotonic()
    poller.stop()
    return (cpu1 - cpu0) / (t1 - t0) * 100, reads - reads0


def tmux_cpu(url: str) -> tuple[float, float, float] | None:
    """(process %, UI thread %, RSS MiB) of `gputop fleet --interval 5` in a 200x60 tmux pane."""
    if shutil.which("tmux") is None:
        return None
    from bench.bench_ui import _app_process, _cpu_s, _main_thread_s, _quit, _tmux, gputop_command

    command = gputop_command("fleet", "--prometheus", url, "--interval", f"{REFRESH_S:g}")
    _tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "60", "-c", os.getcwd(), command)
    try:
        deadline = time.monotonic() + 60
        while "gpu-node-000" not in _tmux("capture-pane", "-p", "-t", SESSION):
            if time.monotonic() > deadline:
                raise RuntimeError("the fleet overview showed no host within 60 s")
            time.sleep(0.1)
        proc = _app_process(int(_tmux("display", "-p", "-t", SESSION, "#{pane_pid}").strip()))
        time.sleep(REFRESH_S)
        t0, cpu0, main0 = time.monotonic(), _cpu_s(proc), _main_thread_s(proc)
        time.sleep(SECONDS)
        t1, cpu1, main1 = time.monotonic(), _cpu_s(proc), _main_thread_s(proc)
        rss = proc.memory_info().rss / 1024**2
    finally:
        _quit(SESSION)
    wall = t1 - t0
    return (cpu1 - cpu0) / wall * 100, (main1 - main0) / wall * 100, rss


def main() -> None:
    if shutil.which("prometheus") is None and not Path("/usr/bin/prometheus").exists():
        print("fleet: skipped (no prometheus binary)")
        return
    template = dgx_exposition()
    bodies = host_bodies(template, HOSTS)
    series = sum(1 for line in template.splitlines() if line and not line.startswith("#"))
    print(f"fleet_synthetic: {HOSTS} hosts x {GPUS} GPUs, {series} series a host")
    with (
        tempfile.TemporaryDirectory() as folder,
        serving(bodies) as port,
        prometheus(port, HOSTS, Path(folder)) as (url, prom),
    ):
        client = CountingClient(url, timeout_s=30.0)
        wait_for_fleet(client, HOSTS)
        client.count = 0
        fleet = read_fleet(client)
        print(f"fleet_queries_per_refresh: {client.count} (of {len(QUERIES)} kinds)")
        print(f"fleet_hosts_read: {len(fleet.hosts)} hosts, {fleet.gpu_count} GPUs")
        times = []
        for _ in range(10):
            t0 = time.perf_counter()
            read_fleet(client)
            times.append(time.perf_counter() - t0)
        print(
            f"fleet_refresh_time: {statistics.median(times) * 1000:.0f} ms median of 10 "
            f"({min(times) * 1000:.0f} to {max(times) * 1000:.0f} ms)"
        )
        t0 = time.perf_counter()
        history = read_history(client)
        print(
            f"fleet_history_read: {(time.perf_counter() - t0) * 1000:.0f} ms, "
            f"{client.ranges} range queries ({len(HISTORY_QUERIES)} a read, every "
            f"{round(HISTORY_STEP_S / REFRESH_S)} refreshes at {REFRESH_S:g} s), "
            f"{len(history)} hosts"
        )
        percent, reads = poller_cpu(client)
        print(
            f"fleet_poller_cpu_percent_of_core: {percent:.2f} % "
            f"(refresh {REFRESH_S:g} s, {reads} reads in {SECONDS:g} s, history included)"
        )
        result = tmux_cpu(url)
        if result is not None:
            whole, ui, rss = result
            print(f"fleet_overview_cpu_percent_of_core: {whole:.2f} % (--interval {REFRESH_S:g})")
            print(f"fleet_overview_ui_thread_percent: {ui:.2f} %")
            print(f"fleet_overview_rss: {rss:.0f} MiB")
        print(f"fleet_prometheus_alive: {prom.poll() is None}")


if __name__ == "__main__":
    main()
