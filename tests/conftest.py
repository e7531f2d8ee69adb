"""Shared fixtures: the simulated driver, installed per test and always removed afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gputop import sim
from gputop.sim.scenario import Scenario

SimFactory = Callable[..., tuple[Any, sim.SimLibrary]]


@pytest.fixture(autouse=True)
def _sim_never_leaks() -> Iterator[None]:
    """pynvml keeps the loaded library in a global: one test's sim must never reach another."""
    yield
    sim.uninstall()


@pytest.fixture
def sim_clock() -> sim.ManualClock:
    """A scenario clock that only moves when the test says so."""
    return sim.ManualClock(0.0)


@pytest.fixture
def sim_source(sim_clock: sim.ManualClock) -> Iterator[SimFactory]:
    """Factory: sim_source("demo") or sim_source({...}) -> (NvmlSource, SimLibrary)."""
    from gputop.nvml import NvmlSource

    opened: list[NvmlSource] = []

    def make(
        scenario: str | dict[str, Any] | Scenario, clock: sim.Clock | None = None, **env: str
    ) -> tuple[NvmlSource, sim.SimLibrary]:
        if isinstance(scenario, dict):
            scenario = Scenario.from_dict(scenario)
        lib = sim.install(scenario, clock or sim_clock)
        source = NvmlSource(simulated=True, environ=env)
        opened.append(source)
        return source, lib

    yield make
    for source in opened:
        source.close()
