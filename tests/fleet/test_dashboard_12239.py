"""NVIDIA's Grafana dashboard 12239 ("NVIDIA DCGM Exporter Dashboard") works on `gputop export`:
every panel query (tests/fleet/data/dashboard_12239_queries.txt) returns series from a real
Prometheus that scrapes only the dgx demo's exporter."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop.fleet.client import PrometheusClient
from tests.export.conftest import prometheus_binary, stop_process
from tests.fleet.conftest import DATA, run_prometheus, start_exporter, wait_for

QUERIES = DATA / "dashboard_12239_queries.txt"


def panel_queries(path: Path = QUERIES) -> list[tuple[str, str]]:
    """(panel, query) for every query line of the file."""
    found, panel = [], "?"
    for line in path.read_text().splitlines():
        if line.startswith("# panel:"):
            panel = line.removeprefix("# panel:").strip()
        elif line.strip() and not line.startswith("#"):
            found.append((panel, line.strip()))
    return found


@pytest.fixture(scope="module")
def dgx_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusClient]:
    binary = prometheus_binary("the dashboard test without it")
    tmp = tmp_path_factory.mktemp("prometheus-12239")
    proc, address = start_exporter("dgx", "dgx-box")
    with contextlib.ExitStack() as stack:
        stack.callback(stop_process, proc)
        url, prometheus = stack.enter_context(run_prometheus(binary, tmp, {"gpu": [address]}))
        wait_for(url, prometheus, tmp, lambda f: [len(h.gpus) for h in f.hosts] == [8])
        yield PrometheusClient(url, timeout_s=5.0)


def test_the_file_holds_the_dashboards_panels() -> None:
    panels = {panel for panel, _ in panel_queries()}
    assert {"GPU Temperature", "GPU Utilization", "Tensor Core Utilization"} <= panels
    assert len(panel_queries()) >= 10


@pytest.mark.parametrize(("panel", "query"), panel_queries())
def test_every_panel_query_returns_series(
    dgx_prometheus: PrometheusClient, panel: str, query: str
) -> None:
    answer = dgx_prometheus.query(query)
    assert answer.series, f"panel {panel!r}: {query} returned nothing"
    aggregated = query.startswith(("avg(", "sum("))
    assert len(answer.series) == (1 if aggregated else 8), (panel, answer.series)
