"""A real Prometheus server (Debian's `prometheus`) scrapes `gputop export --demo` on loopback."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

from gputop import sim
from gputop.sim import load_scenario
from gputop.units import whole_mib
from tests.conftest import FixedTimeSource, snapshot_of
from tests.export.conftest import (
    check_running,
    exporter_process,
    http_get,
    prometheus_binary,
    prometheus_on,
)

TIMEOUT_S = 30.0
Box = Callable[..., FixedTimeSource]


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
        with prometheus_on(binary, tmp_path, config) as (base, prometheus):
            wanted = {g.uuid for g in load_scenario("demo").gpus}
            deadline = time.monotonic() + TIMEOUT_S
            seen: set[str] = set()
            while seen != wanted:
                check_running(prometheus, tmp_path)
                assert time.monotonic() < deadline, f"series seen: {seen}, wanted {wanted}"
                time.sleep(0.5)
                series = _query(base, "DCGM_FI_DEV_GPU_UTIL")
                seen = {str(s["metric"]["UUID"]) for s in series}
            labels = series[0]["metric"]
            assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname"} <= set(labels)
            assert _query(base, 'gputop_sample_age_seconds{job="gputop"} < 30')


def _metadata(base: str, metric: str) -> list[dict[str, str]]:
    url = f"{base}/api/v1/metadata?metric={urllib.parse.quote(metric)}"
    try:
        reply = json.loads(http_get(url, timeout_s=2.0))
    except OSError:
        return []
    found: list[dict[str, str]] = reply["data"].get(metric, [])
    return found


def test_mig_memory_sums_once_and_counters_are_counters(tmp_path: Path, box: Box) -> None:
    """On the mig demo (its memory held still), a real Prometheus sums DCGM_FI_DEV_FB_USED to
    the used memory (each MIG GPU once: its GPU instances, no whole-GPU series), and types
    dcgm-exporter's counters counter."""
    binary = prometheus_binary("the plain HTTP scrape tests")
    shipped = Path(sim.__file__).parent / "scenarios" / "mig.toml"
    still = re.sub(
        r"used_memory_mib = \{ base = (\d+),[^}]*\}", r"used_memory_mib = \1", shipped.read_text()
    )
    scenario = tmp_path / "mig-still.toml"
    scenario.write_text(still)
    snap = snapshot_of(box, load_scenario(scenario))
    real = sum(whole_mib(g.memory_used_bytes or 0) for g in snap.gpus)
    assert real > 100_000  # both H100s of the scenario
    with exporter_process("--interval", "1", driver=("--scenario", str(scenario))) as metrics_url:
        target = metrics_url.removeprefix("http://").removesuffix("/metrics")
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: gputop\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        with prometheus_on(binary, tmp_path, config) as (base, prometheus):
            deadline = time.monotonic() + TIMEOUT_S
            while not (rows := _query(base, "sum(DCGM_FI_DEV_FB_USED)")):
                check_running(prometheus, tmp_path)
                assert time.monotonic() < deadline, "no DCGM_FI_DEV_FB_USED scraped"
                time.sleep(0.5)
            used = _query(base, "DCGM_FI_DEV_FB_USED")
            assert len(used) == 5  # GPU 0: its 4 GPU instances; GPU 1: whole
            assert not [
                s for s in used if s["metric"]["gpu"] == "0" and "GPU_I_ID" not in s["metric"]
            ]
            value = rows[0]["value"]
            assert isinstance(value, list)
            assert float(value[1]) == real
            while not (meta := _metadata(base, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")):
                assert time.monotonic() < deadline, "no metadata"
                time.sleep(0.5)
            assert meta[0]["type"] == "counter", meta
            assert _query(base, "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[1m])") is not None
            assert not _query(base, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total")
