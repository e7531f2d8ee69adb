"""NVIDIA's Grafana dashboard 12239 ("NVIDIA DCGM Exporter Dashboard"), the published JSON
(tests/fleet/data/dashboard_12239.json, see its NOTICE), works on `gputop export`: with its
variables expanded as Grafana expands them (tests/grafana.py), every panel query returns data as
an instant and as a range query from a real Prometheus scraping the dgx and the mig demos, with
"All" selected and with each host alone."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from gputop.sim import load_scenario
from tests import grafana
from tests.export.conftest import prometheus_binary, stop_process
from tests.fleet.conftest import DATA, TIMEOUT_S, check_running, run_prometheus, start_exporter

DASHBOARD = DATA / "dashboard_12239.json"
NOTICE = DATA / "dashboard_12239.NOTICE"
SCRAPE_S = 1.0  # the data source's scrape interval: run_prometheus scrapes every second
HOSTS = {"dgx": "dgx-box", "mig": "mig-box"}  # scenario -> its exporter's hostname
TARGETS = grafana.targets(grafana.load(DASHBOARD))
SELECTIONS = ("all", "dgx", "mig")  # "All" on every variable, or one host's instance


@dataclass
class Lab:
    prometheus: grafana.Prometheus
    started: float  # when Prometheus started: the dashboard's range begins here
    instances: dict[str, str]  # scenario -> its instance label (host:port)

    def span(self) -> grafana.TimeRange:
        return grafana.TimeRange(self.started, time.time(), SCRAPE_S)


def _answers(lab: Lab, span: grafana.TimeRange) -> bool:
    """Every target answers with "All" selected (the gpm ratios need two samples)."""
    selected = grafana.expand(lab.prometheus, grafana.load(DASHBOARD), span)
    builtins = span.builtins()
    return all(
        lab.prometheus.instant(grafana.interpolate(t.expr, selected, builtins), span.end)
        for t in TARGETS
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    binary = prometheus_binary("the dashboard's offline checks")
    tmp = tmp_path_factory.mktemp("prometheus-12239")
    with contextlib.ExitStack() as stack:
        addresses = {}
        for scenario, hostname in HOSTS.items():
            proc, addresses[scenario] = start_exporter(scenario, hostname)
            stack.callback(stop_process, proc)
        started = time.time()
        url, prometheus = stack.enter_context(
            run_prometheus(binary, tmp, {"gpu": list(addresses.values())})
        )
        lab = Lab(grafana.Prometheus(url), started, addresses)
        deadline = time.monotonic() + TIMEOUT_S
        ready = False
        # until every query answers, or the deadline: the tests then say which do not
        while not ready and time.monotonic() < deadline:
            check_running(prometheus, tmp)
            time.sleep(1.0)
            with contextlib.suppress(OSError):
                ready = _answers(lab, lab.span())
        time.sleep(3 * SCRAPE_S)  # a few steps of history for the range queries
        yield lab


def test_the_json_is_the_published_one_with_its_eight_panels() -> None:
    digest = hashlib.sha256(DASHBOARD.read_bytes()).hexdigest()
    assert digest in NOTICE.read_text()
    assert [t.panel for t in TARGETS] == [
        "GPU Temperature",
        "GPU Avg. Temp",
        "GPU Power Usage",
        "GPU Power Total",
        "GPU SM Clocks",
        "GPU Utilization",
        "GPU Framebuffer Mem Used",
        "Tensor Core Utilization",
    ]
    names = {v.name: v for v in grafana.variables(grafana.load(DASHBOARD))}
    assert set(names) == {"instance", "gpu"}
    assert all(v.multi and v.include_all and v.all_value is None for v in names.values())


def test_grafana_escapes_a_multi_value_variable_as_a_regex_alternation() -> None:
    [instance, gpu] = grafana.variables(grafana.load(DASHBOARD))
    one = grafana.format_value(instance, ["10.0.0.7:9400"])
    assert one == r"10\\.0\\.0\\.7:9400"  # in the PromQL string: regex \. matches a dot only
    both = grafana.format_value(instance, ["10.0.0.7:9400", "gpu-node(2)|x"])
    assert both == r"(10\\.0\\.0\\.7:9400|gpu-node\\(2\\)\\|x)"
    assert grafana.format_value(gpu, ["0", "1"]) == "(0|1)"
    assert grafana.special_regex_escape("a\\b") == "a\\\\\\\\b"  # one backslash becomes four


def test_an_escaped_instance_matches_only_itself(lab: Lab) -> None:
    """Prometheus reads the escaped value back as the instance itself: its series match, and
    a value that differs from it at a dot matches nothing."""
    [instance, _] = grafana.variables(grafana.load(DASHBOARD))
    dgx = lab.instances["dgx"]
    span = lab.span()
    query = 'DCGM_FI_DEV_GPU_TEMP{{instance=~"{}"}}'
    escaped = grafana.format_value(instance, [dgx])
    assert {
        r["metric"]["instance"] for r in lab.prometheus.instant(query.format(escaped), span.end)
    } == {dgx}
    lookalike = grafana.format_value(instance, [dgx.replace(".", "x", 1)])
    assert lab.prometheus.instant(query.format(lookalike), span.end) == []


# Panels that draw no MIG-enabled GPU. DCGM_FI_DEV_GPU_UTIL: NVML gives no utilisation in MIG
# mode and DCGM leaves the field blank there, so dcgm-exporter, which skips blank values, draws
# no such GPU either. DCGM_FI_PROF_*: a known gap of gputop's, not dcgm-exporter's behaviour
# (DCGM profiles each GPU instance): gputop reads GPM for whole GPUs only, and leaves the
# fields out on a MIG GPU rather than copy the whole GPU's ratio into every instance.
NOT_ON_MIG = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_")


def _gpus(scenarios: tuple[str, ...], expr: str) -> set[str]:
    """The GPUs a per-GPU panel of ``expr`` draws on these scenarios."""
    return {
        str(i)
        for s in scenarios
        for i, gpu in enumerate(load_scenario(s).gpus)
        if not (gpu.mig is True and expr.startswith(NOT_ON_MIG))
    }


def _check(
    target: grafana.Target, result: list[dict[str, Any]], scenarios: tuple[str, ...]
) -> None:
    assert result, f"panel {target.name}: {target.expr} returned nothing"
    if target.expr.startswith(("avg(", "sum(")):
        assert len(result) == 1, result
        return
    drawn = {r["metric"].get("gpu") for r in result}
    assert drawn == _gpus(scenarios, target.expr), (
        f"panel {target.name}: GPUs drawn {sorted(drawn)}"
    )
    if scenarios == ("dgx",):  # no MIG: one series a GPU
        assert len(result) == 8, [r["metric"] for r in result]


@pytest.mark.parametrize("mode", ["instant", "range"])
@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.panel)
def test_every_panel_query_returns_data(
    lab: Lab, target: grafana.Target, selection: str, mode: str
) -> None:
    scenarios = tuple(HOSTS) if selection == "all" else (selection,)
    choose = None if selection == "all" else {"instance": [lab.instances[selection]]}
    dashboard = grafana.load(DASHBOARD)
    selected = grafana.expand(lab.prometheus, dashboard, lab.span(), choose)
    assert selected["instance"][1] == sorted(lab.instances[s] for s in scenarios)
    expr, result = grafana.run(lab.prometheus, dashboard, target, lab.span, mode, choose)
    assert "$" not in expr
    if not result:
        failed = lab.prometheus.instant("min_over_time(up[1m]) == 0", time.time())
        pytest.fail(f"panel {target.name}: {expr} returned nothing (failed scrapes: {failed})")
    _check(target, result, scenarios)
    if mode == "range":
        assert all(len(r["values"]) >= 2 for r in result), [len(r["values"]) for r in result]


def test_a_mig_gpu_is_drawn_once_per_gpu_instance(lab: Lab) -> None:
    """On the mig host the framebuffer panel draws GPU 0 (in MIG mode) once per GPU instance,
    as dcgm-exporter does, never also as a whole GPU."""
    [target] = [t for t in TARGETS if t.panel == "GPU Framebuffer Mem Used"]
    span = lab.span()
    choose = {"instance": [lab.instances["mig"]]}
    selected = grafana.expand(lab.prometheus, grafana.load(DASHBOARD), span, choose)
    result = lab.prometheus.instant(grafana.interpolate(target.expr, selected, {}), span.end)
    on_mig = [r["metric"] for r in result if r["metric"]["gpu"] == "0"]
    wanted = {str(d.gpu_instance_id) for d in load_scenario("mig").gpus[0].mig_devices}
    assert len(on_mig) == len(wanted), on_mig
    assert {m.get("GPU_I_ID", "") for m in on_mig} == wanted, on_mig
