"""What deploy/ ships, run for real: a Prometheus scraping `gputop export` on the demo box (stuck
processes, unattributed memory) and the faults box (a lost GPU, a slow one, ECC errors), with the
alerting rules of deploy/prometheus loaded."""

from __future__ import annotations

import contextlib
import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import grafana
from tests.export.conftest import REPO, prometheus_binary, stop_process
from tests.fleet.conftest import TIMEOUT_S, check_running, prometheus_on, start_exporter

DEPLOY = REPO / "deploy"
RULES = DEPLOY / "prometheus" / "gputop-alerts.yml"
RULE_TESTS = DEPLOY / "prometheus" / "gputop-alerts.test.yml"
DASHBOARD = DEPLOY / "grafana" / "gputop-dashboard.json"
SCRAPE_S = 1.0
HOSTS = {"demo": "box-demo", "faults": "box-faults"}  # scenario -> the exporter's hostname


@dataclass
class Lab:
    url: str
    prometheus: grafana.Prometheus
    started: float
    instances: dict[str, str]  # scenario -> instance label (host:port)

    def span(self) -> grafana.TimeRange:
        return grafana.TimeRange(self.started, time.time(), SCRAPE_S)

    def failed_scrapes(self) -> str:
        """The targets a scrape failed for in the last minute, for a failure's message."""
        failed = self.prometheus.instant("min_over_time(up[1m]) == 0", time.time())
        return f"failed scrapes in the last minute: {[r['metric'] for r in failed]}"

    def alerts(self) -> list[dict[str, object]]:
        """Prometheus's pending and firing alerts."""
        with urllib.request.urlopen(f"{self.url}/api/v1/alerts", timeout=5) as reply:
            found: list[dict[str, object]] = json.loads(reply.read())["data"]["alerts"]
        return found


def _config(folder: Path, targets: list[str]) -> Path:
    config = folder / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_S:g}s\n  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        f"rule_files:\n  - {json.dumps(str(RULES))}\n"
        "scrape_configs:\n  - job_name: gputop\n"
        f"    static_configs:\n      - targets: {json.dumps(targets)}\n"
    )
    return config


def _ready(lab: Lab) -> bool:
    """Both hosts scraped, the faults box's GPU 1 lost (after 5 s) and a few samples of each."""
    span = lab.span()
    lost = lab.prometheus.instant("gputop_gpu_lost == 1", span.end)
    hosts = lab.prometheus.label_values("gputop_info", "instance", span)
    return len(hosts) == len(HOSTS) and bool(lost) and span.end - span.start > 8


@pytest.fixture(scope="package")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    binary = prometheus_binary("the offline checks of deploy/")
    folder = tmp_path_factory.mktemp("prometheus-deploy")
    with contextlib.ExitStack() as stack:
        instances = {}
        for scenario, hostname in HOSTS.items():
            proc, instances[scenario] = start_exporter(scenario, hostname)
            stack.callback(stop_process, proc)
        started = time.time()
        config = _config(folder, list(instances.values()))
        url, prometheus = stack.enter_context(prometheus_on(binary, folder, config))
        lab = Lab(url, grafana.Prometheus(url), started, instances)
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            check_running(prometheus, folder)
            with contextlib.suppress(OSError, AssertionError, KeyError):
                if _ready(lab):
                    break
            assert time.monotonic() < deadline, "the demo and faults boxes were not scraped"
            time.sleep(0.5)
        yield lab
