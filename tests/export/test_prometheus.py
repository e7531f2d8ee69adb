"""A real Prometheus server (Debian's `prometheus`) scrapes `gputop export --demo` on loopback."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from gputop.sim import load_scenario
from tests.export.conftest import (
    exporter_process,
    free_port,
    http_get,
    prometheus_binary,
    stop_process,
)

TIMEOUT_S = 30.0


def _query(base: str, promql: str) -> list[dict[str, object]]:
    url = f"{base}/api/v1/query?query={urllib.parse.quote(promql)}"
    try:
        reply = json.loads(http_get(url, timeout_s=2.0))
    except OSError:  # not up yet
        return []
    result: list[dict[str, object]] = reply["data"]["result"]
    return result


def test_prometheus_scrapes_every_simulated_gpu(tmp_path: Path) -> None:
    binary = prometheus_binary("the plain HTTP scrape tests")
    with exporter_process("--interval", "1") as metrics_url:
        target = metrics_url.removeprefix("http://").removesuffix("/metrics")
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gputop\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        port = free_port()
        prometheus = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wanted = {g.uuid for g in load_scenario("demo").gpus}
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + TIMEOUT_S
            seen: set[str] = set()
            while seen != wanted:
                if prometheus.poll() is not None:
                    pytest.fail(f"prometheus exited: {prometheus.stderr.read()[-2000:]}")
                assert time.monotonic() < deadline, f"series seen: {seen}, wanted {wanted}"
                time.sleep(0.5)
                series = _query(base, "DCGM_FI_DEV_GPU_UTIL")
                seen = {str(s["metric"]["UUID"]) for s in series}
            labels = series[0]["metric"]
            assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"} <= set(labels)
            assert _query(base, 'gputop_sample_age_seconds{job="gputop"} < 30')
        finally:
            stop_process(prometheus)
