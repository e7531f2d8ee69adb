"""deploy/prometheus/gputop-alerts.yml: promtool accepts it, its unit tests
(gputop-alerts.test.yml) pass and cover every alert, a broken threshold fails them, and loaded
into a real Prometheus scraping `gputop export` the rules see what the exporter serves."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import yaml

from gputop import dcgm
from tests.deploy.conftest import RULE_TESTS, RULES, Lab
from tests.export.test_promtool import promtool

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "metrics.md"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *map(str, args)], capture_output=True, text=True, timeout=120
    )


def _alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [rule for group in groups for rule in group["rules"] if "alert" in rule]


def test_promtool_checks_the_rules() -> None:
    done = _run("check", "rules", RULES)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_alerts()) + 1} rules found" in done.stdout  # + one recording rule


def test_promtool_runs_the_unit_tests() -> None:
    done = _run("test", "rules", RULE_TESTS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_test_where_it_fires_and_one_where_it_does_not() -> None:
    tests = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    fires = {c["alertname"] for c in cases if c.get("exp_alerts")}
    silent = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    names = {str(a["alert"]) for a in _alerts()}
    assert names <= fires, names - fires
    # a rule whose "no" cases are only the neighbours of its firing test still has those:
    # every test's series include ones that must not alert (checked by exp_alerts' exact list)
    assert silent, "no test expects an alert to stay quiet"


def test_a_wrong_threshold_fails_the_unit_tests(tmp_path: Path) -> None:
    """The unit tests can fail: the temperature threshold raised to 95 °C breaks them."""
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    text = RULES.read_text()
    assert text.count(") > 85\n") == 1
    (tmp_path / RULES.name).write_text(text.replace(") > 85\n", ") > 95\n"))
    done = _run("test", "rules", tmp_path / RULE_TESTS.name)
    assert done.returncode != 0
    assert "alertname: GputopGpuHot" in done.stdout + done.stderr


def test_the_rules_use_only_names_the_exporter_knows() -> None:
    text = RULES.read_text()
    dcgm_names = set(re.findall(r"\bDCGM_FI_\w+", text))
    assert dcgm_names and all(dcgm.field(name) for name in dcgm_names), [
        n for n in dcgm_names if dcgm.field(n) is None
    ]
    reference = REFERENCE.read_text()
    own = set(re.findall(r"\bgputop_\w+", text))
    assert own and all(f"`{name}`" in reference for name in own), [
        n for n in own if f"`{n}`" not in reference
    ]


def _alerting(lab: Lab, deadline_s: float = 30.0) -> dict[tuple[str, str], set[str]]:
    """(alertname, state) -> the scenarios whose exporter it is for, once the lost GPU fired."""
    by_instance = {v: k for k, v in lab.instances.items()}
    deadline = time.monotonic() + deadline_s
    while True:
        seen: dict[tuple[str, str], set[str]] = {}
        for alert in lab.alerts():
            labels = alert["labels"]
            assert isinstance(labels, dict)
            key = (str(labels["alertname"]), str(alert["state"]))
            seen.setdefault(key, set()).add(by_instance.get(str(labels.get("instance")), "?"))
        if ("GputopGpuLost", "firing") in seen or time.monotonic() > deadline:
            return seen
        time.sleep(0.5)


def test_the_rules_see_what_the_exporter_serves(lab: Lab) -> None:
    """On the demo box (stuck processes, unattributed memory, an ECC count) and the faults box
    (GPU 1 lost, GPU 3 too slow to answer, ECC errors, unattributed memory) the rules that
    need no waiting fire and those with a `for:` are pending; nothing alerts on the healthy
    parts (no Xid, no heat, the driver up)."""
    seen = _alerting(lab)
    assert seen.get(("GputopGpuLost", "firing")) == {"faults"}, seen
    assert seen.get(("GputopEccUncorrectable", "firing")) == {"demo", "faults"}, seen
    assert seen.get(("GputopStuckProcesses", "pending")) == {"demo"}, seen
    assert seen.get(("GputopUnattributedMemory", "pending")) == {"demo"}, seen
    assert seen.get(("GputopGpuNotResponding", "pending")) == {"faults"}, seen
    quiet = {"GputopXidError", "GputopGpuHot", "GputopDriverDown", "GputopExporterDown"}
    assert not {name for name, _ in seen} & quiet, seen
