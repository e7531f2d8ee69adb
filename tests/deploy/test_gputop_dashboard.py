"""deploy/grafana/gputop-dashboard.json, gputop's own dashboard: every panel query, with the
variables expanded as Grafana expands them (tests/grafana.py), returns data as an instant and as
a range query from a real Prometheus scraping the demo and faults boxes; each host alone too."""

from __future__ import annotations

import re

import pytest

from tests import grafana
from tests.deploy.conftest import DASHBOARD, HOSTS, Lab

TARGETS = grafana.targets(grafana.load(DASHBOARD))
SELECTIONS = ("all", *HOSTS)


def test_the_dashboard_is_importable_and_filters_every_panel() -> None:
    dashboard = grafana.load(DASHBOARD)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    assert [v.name for v in grafana.variables(dashboard)] == ["instance", "gpu"]
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    for target in TARGETS:
        assert "$instance" in target.expr, target.name  # the host selector applies everywhere
    # gputop's own families are what it is for
    own = {m for t in TARGETS for m in re.findall(r"gputop_\w+", t.expr)}
    assert {
        "gputop_stuck_processes",
        "gputop_unattributed_memory_bytes",
        "gputop_process_gpu_memory_bytes",
        "gputop_gpu_responding",
        "gputop_gpu_lost",
        "gputop_driver_up",
        "gputop_xid_errors_total",
    } <= own


@pytest.mark.parametrize("mode", ["instant", "range"])
@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_every_panel_query_returns_data(
    lab: Lab, target: grafana.Target, selection: str, mode: str
) -> None:
    choose = None if selection == "all" else {"instance": [lab.instances[selection]]}
    dashboard = grafana.load(DASHBOARD)
    expr, result = grafana.run(lab.prometheus, dashboard, target, lab.span, mode, choose)
    assert "$" not in expr
    assert result, f"panel {target.name}: {expr} returned nothing ({lab.failed_scrapes()})"
    drawn = {r["metric"].get("instance") for r in result} - {None}
    wanted = set(lab.instances.values()) if selection == "all" else {lab.instances[selection]}
    assert drawn <= wanted, (target.name, drawn)
