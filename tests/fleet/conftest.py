"""A real Prometheus scraping two `gputop export` processes (the demo box and the dgx box, each
under its own hostname), a recorded dcgm-exporter, and a target that never answers."""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.fleet.client import PrometheusClient, PrometheusError
from gputop.fleet.model import Fleet, read_fleet
from tests.export.conftest import (
    REPO,
    SERVING,
    check_running,
    free_port,
    prometheus_binary,
    prometheus_on,
    stop_process,
)

DATA = Path(__file__).parent / "data"
DCGM_RECORDING = DATA / "dcgm-exporter-3.3.5.txt"
TIMEOUT_S = 60.0


def start_exporter(scenario: str, hostname: str) -> tuple[subprocess.Popen[str], str]:
    """`gputop export --demo=SCENARIO --hostname HOSTNAME` on a free port: (process, host:port);
    a SCENARIO that is a .toml file's path: ``--scenario SCENARIO``."""
    source = f"--scenario={scenario}" if scenario.endswith(".toml") else f"--demo={scenario}"
    cmd = [
        sys.executable,
        "-m",
        "gputop",
        "export",
        source,
        "--hostname",
        hostname,
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "1",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            stop_process(proc)
            pytest.fail(f"exporter exited early: {err.strip()}")
        match = SERVING.search(line)
        if match:
            return proc, match.group(1)
    stop_process(proc)
    pytest.fail("exporter did not report its address")


class StaticServer:
    """A tiny HTTP server on loopback answering every GET with ``respond(handler)``."""

    def __init__(self, respond: Callable[[http.server.BaseHTTPRequestHandler], None]) -> None:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                respond(self)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.url = f"http://{self.address}"
        self.requests: list[dict[str, str]] = []
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(
    handler: http.server.BaseHTTPRequestHandler,
    code: int,
    body: bytes,
    content_type: str = "text/plain; version=0.0.4",
) -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextlib.contextmanager
def static_server(
    respond: Callable[[http.server.BaseHTTPRequestHandler], None],
) -> Iterator[StaticServer]:
    server = StaticServer(respond)
    try:
        yield server
    finally:
        server.close()


@contextlib.contextmanager
def run_prometheus(
    binary: str, tmp: Path, jobs: dict[str, list[str]], *, honor_labels: bool = False
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real Prometheus scraping ``jobs`` (job -> targets) every second: (its URL, process)."""
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "prometheus.yml"
    lines = [
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n",
        "scrape_configs:\n",
    ]
    for job, targets in jobs.items():
        lines.append(f"  - job_name: {job}\n")
        if honor_labels:
            lines.append("    honor_labels: true\n")
        lines.append(f"    static_configs:\n      - targets: {targets!r}\n")
    config.write_text("".join(lines))
    with prometheus_on(binary, tmp, config) as running:
        yield running


@dataclass
class Lab:
    """What the fleet fixture runs: Prometheus's URL and the scrape targets by name."""

    url: str
    targets: dict[str, str]  # "box-a", "box-b", "dcgm", "dcgm-main", "dead" -> host:port
    exporters: dict[str, subprocess.Popen[str]]
    binary: str  # the prometheus binary, for tests that run one of their own
    tmp: Path

    def fleet(self) -> Fleet:
        return read_fleet(PrometheusClient(self.url, timeout_s=5.0))


def wait_for(
    url: str, prometheus: subprocess.Popen[str], tmp: Path, ready: Callable[[Fleet], bool]
) -> Fleet:
    """The fleet ``url``'s Prometheus knows, once ``ready`` says it is complete."""
    deadline = time.monotonic() + TIMEOUT_S
    last: object = None
    while True:
        check_running(prometheus, tmp)
        try:
            fleet = read_fleet(PrometheusClient(url, timeout_s=5.0))
            last = fleet
            if ready(fleet):
                return fleet
        except PrometheusError as exc:  # not up yet
            last = exc
        assert time.monotonic() < deadline, f"fleet not complete: {last}"
        time.sleep(0.5)


def _ready(fleet: Fleet) -> bool:
    hosts = {h.name: h for h in fleet.hosts}
    if not {"box-a", "box-b", "dcgm-node-7", "dcgm-node-8"} <= set(hosts):
        return False
    a, b = hosts["box-a"], hosts["box-b"]
    return (
        len(a.gpus) == 4
        and len(b.gpus) == 8
        and len(hosts["dcgm-node-7"].gpus) == 2
        and len(hosts["dcgm-node-8"].gpus) == 2
        and bool(a.stuck_total)  # the demo's stuck processes are found
        and any(h.down for h in fleet.hosts)  # the dead target was scraped at least once
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    binary = prometheus_binary("the fleet tests without it")
    tmp = tmp_path_factory.mktemp("prometheus")
    recording = DCGM_RECORDING.read_bytes()
    procs: list[subprocess.Popen[str]] = []
    with contextlib.ExitStack() as stack:
        dcgm = stack.enter_context(static_server(lambda h: send(h, 200, recording)))
        # dcgm-exporter's unreleased main names the label "hostname" (its #655)
        newer = recording.replace(b'Hostname="dcgm-node-7"', b'hostname="dcgm-node-8"')
        dcgm_main = stack.enter_context(static_server(lambda h: send(h, 200, newer)))
        try:
            a, a_addr = start_exporter("demo", "box-a")
            procs.append(a)
            b, b_addr = start_exporter("dgx", "box-b")
            procs.append(b)
            dead = f"127.0.0.1:{free_port()}"
            jobs = {"gputop": [a_addr, b_addr, dead], "dcgm": [dcgm.address, dcgm_main.address]}
            url, prometheus = stack.enter_context(run_prometheus(binary, tmp, jobs))
            lab = Lab(
                url=url,
                targets={
                    "box-a": a_addr,
                    "box-b": b_addr,
                    "dcgm": dcgm.address,
                    "dcgm-main": dcgm_main.address,
                    "dead": dead,
                },
                exporters={"box-a": a, "box-b": b},
                binary=binary,
                tmp=tmp,
            )
            wait_for(url, prometheus, tmp, _ready)
            yield lab
        finally:
            for proc in reversed(procs):
                stop_process(proc)
