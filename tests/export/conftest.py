"""Helpers for the exporter tests: free ports, scrapes, and an exporter run as a real process."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop.engine.sampler import Sampler
from gputop.engine.source import Source
from gputop.export.http import MetricsServer
from gputop.export.prom import SnapshotCollector, make_registry

REPO = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"serving http://(\S+)/metrics")


def prometheus_binary(still_ran: str) -> str:
    """The `prometheus` binary, or skip the test; ``still_ran`` names what ran without it."""
    found = shutil.which("prometheus") or (
        "/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None
    )
    if found is None:
        pytest.skip(
            "the `prometheus` binary is not installed (scripts/install-prometheus.sh installs "
            f"Debian's package when run as root); {still_ran} still ran"
        )
    return found


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def prometheus_on(
    binary: str, folder: Path, config: Path
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real Prometheus with this config file on a free loopback port: (its URL, process);
    its data and log in ``folder`` (also the 500-host bench's)."""
    port = free_port()
    with (folder / "prometheus.log").open("w") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={folder / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            yield f"http://127.0.0.1:{port}", proc
        finally:
            stop_process(proc)


def check_running(prometheus: subprocess.Popen[str], tmp: Path) -> None:
    if prometheus.poll() is not None:
        text = (tmp / "prometheus.log").read_text()[-2000:]
        pytest.fail(f"prometheus exited: {text}")


def http_get(url: str, timeout_s: float = 5.0) -> str:
    """GET url and return the body (loopback only)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        body: bytes = response.read()
    return body.decode()


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """(labels, value) of every sample called ``name`` in exposition text.

    prometheus-client's parser names a counter's series ``<name>_total`` even where the text
    has the exact name (dcgm-exporter's counters): those are found under the family's name too.
    """
    return [
        (dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
        or (family.type == "counter" and family.name == name and sample.name == name + "_total")
    ]


def stop_process(proc: subprocess.Popen[str]) -> None:
    """SIGTERM (the exporter cleans up its demo processes), then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


@contextlib.contextmanager
def exporter_process(
    *extra: str, timeout_s: float = 30.0, driver: tuple[str, ...] = ("--demo",)
) -> Iterator[str]:
    """Run `gputop export --demo` (or the ``driver`` options) on a free loopback port; yields
    its /metrics URL."""
    cmd = [sys.executable, "-m", "gputop", "export", *driver, "--listen", "127.0.0.1:0", *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                err = proc.stderr.read() if proc.stderr else ""
                pytest.fail(f"exporter exited early: {err.strip()}")
            match = SERVING.search(line)
            if match:
                yield f"http://{match.group(1)}/metrics"
                return
        pytest.fail("exporter did not report its address")
    finally:
        stop_process(proc)


class Served:
    """A sampler on ``source`` and /metrics on a free loopback port; closed by the fixture."""

    def __init__(self, source: Source, interval_s: float, **server_args: float) -> None:
        self.sampler = Sampler(source, interval_s=interval_s, enrich=False)
        collector = SnapshotCollector(self.sampler)
        self.server = MetricsServer(make_registry(collector), "127.0.0.1", 0, **server_args)
        self.base = f"http://127.0.0.1:{self.server.port}"
        self.url = f"{self.base}/metrics"
        self.sampler.start()
        deadline = time.monotonic() + 10
        while self.sampler.latest is None:
            assert time.monotonic() < deadline, "no first sample"
            time.sleep(0.01)

    def close(self) -> None:
        self.sampler.stop()
        self.server.close()


@pytest.fixture
def serve() -> Iterator[type[Served]]:
    opened: list[Served] = []

    class Tracked(Served):
        def __init__(self, source: Source, interval_s: float, **server_args: float) -> None:
            super().__init__(source, interval_s, **server_args)
            opened.append(self)

    yield Tracked
    for served in opened:
        served.close()
