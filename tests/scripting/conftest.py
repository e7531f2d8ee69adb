"""Fixtures for the scripting tests: the CLI on a simulated box at a fixed time, golden files."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from gputop import api, sim
from gputop.cli import main
from gputop.model import Snapshot
from gputop.sim.scenario import Scenario
from gputop.source import Source

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "GPUTOP_UPDATE_GOLDEN"  # set to 1 to rewrite the golden files (then review them)
FIXED_WALL = 1706704496.789  # 2024-01-31 12:34:56.789 UTC

# Stand-in PIDs of the shipped scenarios -> the process names a golden run shows.
FAKE_NAMES = {5048213: "python", 5048214: "python", 5051377: "/usr/bin/python3", 5061001: "python"}


class FixedTimeSource:
    """A Source whose snapshots all carry the same wall-clock time (stable timestamps)."""

    def __init__(self, source: Source, wall: float | None = FIXED_WALL) -> None:
        self.inner = source
        self.wall = wall
        self.simulated = True
        self.dev_dir = "/dev"
        self.calls = 0

    def snapshot(self) -> Snapshot:
        self.calls += 1
        snap = self.inner.snapshot()
        return snap if self.wall is None else replace(snap, taken_at_wall=self.wall)

    def close(self) -> None:
        self.inner.close()

    def request_probes(self, probes: Any, explain: Any = ()) -> None:
        """Pass a query's extra readings on to the driver layer (gputop.views.query.ask_driver)."""
        self.inner.request_probes(probes, explain)


@dataclass
class Result:
    """What one CLI run printed."""

    rc: int
    out: str
    err: str


def shipped(name: str) -> Scenario:
    """A shipped scenario, without slow calls (faults has a 1.5 s one) so tests stay fast."""
    scenario = sim.load_scenario(name)
    return replace(scenario, gpus=tuple(replace(g, slow_calls={}) for g in scenario.gpus))


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Timestamps are local time: pin the zone so golden files match everywhere."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture(autouse=True)
def _api_reset() -> Iterator[None]:
    """The API's shared source must not outlive a test (the sim is uninstalled after each)."""
    yield
    api.use_demo(None)


@pytest.fixture
def box(
    sim_source: Callable[..., tuple[Any, sim.SimLibrary]], sim_clock: sim.ManualClock
) -> Callable[..., FixedTimeSource]:
    """box("demo") or box({...}): a fixed-time Source on the simulated driver at scenario t."""

    def make(
        scenario: str | dict[str, Any] | Scenario, t: float = 0.0, wall: float | None = FIXED_WALL
    ) -> FixedTimeSource:
        source, _ = sim_source(shipped(scenario) if isinstance(scenario, str) else scenario)
        sim_clock.set(t)  # after opening: a GPU lost at t still has its identity read at 0
        return FixedTimeSource(source, wall)

    return make


@pytest.fixture
def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    """run_cli(source, "query", "--query-gpu=index"): gputop.cli.main on that source."""
    import gputop.views.dmon
    import gputop.views.query

    monkeypatch.setattr(gputop.views.query, "process_name", FAKE_NAMES.get)

    def run(source: Source | None, *argv: str) -> Result:
        def opened(args: object) -> Source:
            if source is None:
                raise AssertionError("the source must not be opened")
            return source

        monkeypatch.setattr(gputop.views.query, "source_from_args", opened)
        monkeypatch.setattr(gputop.views.dmon, "source_from_args", opened)
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)

    return run


def check_golden(name: str, text: str) -> None:
    """Compare with tests/scripting/golden/<name> (rewrite it when GPUTOP_UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV) == "1" or not path.exists():
        path.write_text(text, encoding="utf-8")
        if os.environ.get(UPDATE_ENV) != "1":
            pytest.fail(f"golden file {name} was missing: written, review it and run again")
    assert text == path.read_text(encoding="utf-8"), f"differs from golden/{name}"
