"""Tests grouped by kind (tests/markers.py): pytest selects by the markers tests/conftest.py gives.

Each check runs pytest as a real process collecting real test files; ``-p tests.markers`` makes
it print every collected test's markers.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import markers

ROOT = Path(__file__).resolve().parent.parent

# Tests whose kinds are known from what they do (read them).
PTY = "tests/ui/test_signals.py"  # mostly the dashboard on a pseudo-terminal, sent signals
ON_A_PTY = f"{PTY}::test_ctrl_c_key_quits"  # python -m gputop --demo on a pty
NO_TERMINAL = f"{PTY}::test_no_terminal_at_all_is_one_line_and_exit_2"  # a process, no pty
KEYS = f"{PTY}::test_interval_keys_step_within_the_bounds"  # a pure function, parametrized
PROMETHEUS = "tests/export/test_prometheus.py"  # a real Prometheus scrapes the exporter
DRIVER_PROCESS = "tests/engine/test_isolated.py"  # the driver process, crashed and hung
IN_PROCESS = "tests/test_units.py"  # pure functions
WHOLE_MODULE = "tests/fleet/test_fleet_prometheus.py"  # slow_tests.txt lists the module


def marks(*args: str) -> dict[str, set[str]]:
    """Node id -> markers of each test ``pytest --collect-only`` selects with these arguments."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "tests.markers", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]  # 5: none
    lines = [line.split("\t") for line in done.stdout.splitlines() if line.startswith("MARKS\t")]
    return {nodeid: set(names.split()) for _, nodeid, names in lines}


def of_file(found: dict[str, set[str]], path: str) -> dict[str, set[str]]:
    return {nodeid: names for nodeid, names in found.items() if nodeid.startswith(f"{path}::")}


def test_each_test_gets_the_kinds_of_what_it_uses() -> None:
    found = marks(PTY, PROMETHEUS, DRIVER_PROCESS, IN_PROCESS)
    assert {"pty", "real_process"} <= found[ON_A_PTY]
    assert "pty" not in found[NO_TERMINAL] and "real_process" in found[NO_TERMINAL]
    keys = [names for nodeid, names in found.items() if nodeid.startswith(f"{KEYS}[")]
    assert keys and all(names == {"unit"} for names in keys)
    assert all("prometheus" in names for names in of_file(found, PROMETHEUS).values())
    driver = of_file(found, DRIVER_PROCESS).values()
    assert all("real_process" in names and "pty" not in names for names in driver)
    assert {frozenset(names) for names in of_file(found, IN_PROCESS).values()} == {
        frozenset({"unit"})
    }


def test_pytest_selects_by_the_markers() -> None:
    files = [PTY, IN_PROCESS, WHOLE_MODULE]
    found = marks(*files)
    selected = marks("-m", "unit and not slow", *files)
    wanted = {n for n, names in found.items() if "unit" in names and "slow" not in names}
    assert set(selected) == wanted
    assert {n for n, names in found.items() if "slow" in names} == {
        n for n in found if markers.is_slow(n)
    }
    whole = of_file(found, WHOLE_MODULE).values()
    assert whole and all("slow" in names for names in whole)
    assert of_file(selected, IN_PROCESS) == of_file(found, IN_PROCESS)


def test_every_test_of_this_run_has_a_kind(request: pytest.FixtureRequest) -> None:
    unmarked = [
        item.nodeid
        for item in request.session.items
        if not any(item.get_closest_marker(kind) for kind in markers.KINDS)
    ]
    assert unmarked == []


def test_every_test_of_the_suite_has_a_kind_and_the_slow_list_names_real_tests() -> None:
    found = marks("tests")
    assert len(found) > 1000
    assert [n for n, names in found.items() if not names & set(markers.KINDS)] == []
    files = {nodeid.split("::")[0] for nodeid in found}
    lines = markers.SLOW_LIST.read_text().splitlines()
    entries = [line.split("\t", 1)[1] for line in lines if line and line[0] != "#"]
    stale = [e for e in entries if e not in found and e not in files]
    assert stale == [], "measure again: tests/slow_tests.txt names tests that are gone"
