"""The readings that change only by an administrator's action or rarely (power limit, PCIe link,
ECC count, compute/persistence/MIG mode) are read every gputop.sources.SLOW_EVERY_S of the reader's
clock by a monitor left running (the dashboard, the exporter: ``slow_every_s=SLOW_EVERY_S``), not
every reading (issue 42); the truth rules stay: a lost GPU is LOST at once. One-shots, query loops
and the API read them every time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gputop import sim
from gputop.engine.model import GpuState
from gputop.engine.nvml import NvmlSource
from gputop.sim.scenario import Scenario
from gputop.sources import SLOW_EVERY_S, open_simulated, open_source

SLOW_CALLS = (
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetMigMode",
)


@pytest.fixture
def opened(sim_clock: sim.ManualClock) -> Iterator[Any]:
    """open(scenario) -> (NvmlSource reading on the scenario's hand clock, SimLibrary)."""
    sources: list[NvmlSource] = []

    def open_(scenario: dict[str, Any]) -> tuple[NvmlSource, sim.SimLibrary]:
        lib = sim.install(Scenario.from_dict(scenario), sim_clock)
        source = NvmlSource(
            simulated=True,
            environ={},
            dev_dir=lib.dev_dir,
            counters=False,
            clock=sim_clock.now,
            slow_every_s=SLOW_EVERY_S,
        )
        sources.append(source)
        lib.calls.clear()  # opening reads some of the same calls (MIG mode): count readings'
        return source, lib

    yield open_
    for source in sources:
        source.close()


def test_the_first_reading_reads_every_slow_field(opened: Any) -> None:
    source, lib = opened({"gpu": [{"power_limit_w": 300, "ecc_uncorrected": 2}]})
    gpu = source.snapshot().gpus[0]
    assert (gpu.power_limit_mw, gpu.ecc_errors_uncorrected_volatile) == (300_000, 2)
    assert (gpu.pcie_gen, gpu.pcie_width) == (4, 16)
    assert (gpu.compute_mode, gpu.persistence_mode, gpu.mig_mode) == ("Default", True, False)
    assert {call: lib.calls[call] for call in SLOW_CALLS} == dict.fromkeys(SLOW_CALLS, 1)


def test_a_slow_field_is_read_once_in_ten_seconds_and_kept_between(
    opened: Any, sim_clock: sim.ManualClock
) -> None:
    stepping = {"base": 300, "step_at": 3, "step_to": 250}
    source, lib = opened({"gpu": [{"power_limit_w": stepping, "power_w": 100}]})
    seen = []
    for t in range(21):  # a reading a second, t = 0 ... 20
        sim_clock.set(float(t))
        seen.append(source.snapshot().gpus[0].power_limit_mw)
    # Read at 0, 10 and 20: the step at 3 s is seen at the next slow read, 7 s later.
    assert seen == [300_000] * 10 + [250_000] * 11
    assert {call: lib.calls[call] for call in SLOW_CALLS} == dict.fromkeys(SLOW_CALLS, 3)
    assert lib.calls["nvmlDeviceGetPowerUsage"] == 21  # the others: every reading


def test_the_cadence_is_in_seconds_not_readings(opened: Any, sim_clock: sim.ManualClock) -> None:
    source, lib = opened({"gpu": [{}, {}]})
    for tick in range(50):  # 0.2 s apart: 9.8 s in all
        sim_clock.set(tick * 0.2)
        source.snapshot()
    assert lib.calls["nvmlDeviceGetMigMode"] == 2  # once per GPU, not fifty times


def test_a_mode_an_administrator_sets_is_seen_within_ten_seconds(
    opened: Any, sim_clock: sim.ManualClock
) -> None:
    source, lib = opened({"gpu": [{"compute_mode": "default"}]})
    assert source.snapshot().gpus[0].compute_mode == "Default"
    sim_clock.set(1.0)
    lib.scenario = Scenario.from_dict({"gpu": [{"compute_mode": "exclusive_process"}]})
    modes = []
    for t in range(2, 12):
        sim_clock.set(float(t))
        modes.append(source.snapshot().gpus[0].compute_mode)
    assert modes[-1] == "Exclusive_Process"  # at t = 10 (the first read was at 0)
    assert modes.index("Exclusive_Process") == modes.index(modes[-1]) == 8


def test_a_failed_slow_read_is_none_until_it_answers(opened: Any) -> None:
    source, _ = opened({"gpu": [{"power_limit_w": "unsupported", "pcie_gen": "unsupported"}]})
    gpu = source.snapshot().gpus[0]
    assert (gpu.power_limit_mw, gpu.pcie_gen, gpu.pcie_width) == (None, None, 16)
    assert gpu.state is GpuState.OK


def test_a_lost_gpu_is_lost_at_once_between_slow_reads(
    opened: Any, sim_clock: sim.ManualClock
) -> None:
    source, _ = opened({"gpu": [{}, {"lost_after_s": 3}]})
    states = []
    for t in range(6):
        sim_clock.set(float(t))
        states.append(source.snapshot().gpus[1].state)
    assert states == [GpuState.OK] * 3 + [GpuState.LOST] * 3  # no slow read due at 3 s


def test_a_gpu_lost_in_a_slow_call_stays_lost(opened: Any, sim_clock: sim.ManualClock) -> None:
    source, lib = opened({"gpu": [{}]})
    source.snapshot()
    lost_in_mig_mode = {"gpu": [{"call_errors": {"nvmlDeviceGetMigMode": "gpu_is_lost"}}]}
    lib.scenario = Scenario.from_dict(lost_in_mig_mode)
    states = []
    for t in range(1, 15):
        sim_clock.set(float(t))
        states.append(source.snapshot().gpus[0].state)
    # Seen at the slow read at 10 s; from then on every reading asks that call again (a
    # kept answer from before would make the GPU OK again).
    assert states == [GpuState.OK] * 9 + [GpuState.LOST] * 5


def test_a_clock_moved_back_reads_again(opened: Any, sim_clock: sim.ManualClock) -> None:
    source, lib = opened({"gpu": [{}]})
    sim_clock.set(100.0)
    source.snapshot()
    sim_clock.set(0.0)  # a hand-moved clock set back (a new scenario run): nothing is kept
    source.snapshot()
    assert lib.calls["nvmlDeviceGetComputeMode"] == 2


def test_one_shots_queries_and_the_api_read_every_time(sim_clock: sim.ManualClock) -> None:
    """Without ``slow_every_s`` (query loops, dmon, --once, the API) what is printed is read then:
    a power limit set a second ago shows."""
    stepping = {"base": 300, "step_at": 1, "step_to": 250}
    source = open_simulated(Scenario.from_dict({"gpu": [{"power_limit_w": stepping}]}), sim_clock)
    try:
        seen = []
        for t in range(3):
            sim_clock.set(float(t))
            seen.append(source.snapshot().gpus[0].power_limit_mw)
    finally:
        source.close()
    assert seen == [300_000, 250_000, 250_000]


@pytest.mark.parametrize("slow_every_s", [0.0, SLOW_EVERY_S])
def test_the_driver_process_reads_at_the_cadence_it_is_given(
    tmp_path: Path, slow_every_s: float
) -> None:
    """End to end through a real driver process (DriverConfig.slow_every_s): a power limit that
    steps 1 s in shows in a reading 2 s in for a one-shot, and waits for a monitor."""
    box = tmp_path / "box.toml"
    box.write_text("[[gpu]]\npower_limit_w = { base = 300, step_at = 1, step_to = 250 }\n")
    source = open_source(scenario=str(box), isolated=True, slow_every_s=slow_every_s)
    try:
        first = source.snapshot().gpus[0].power_limit_mw
        time.sleep(2.0)
        later = source.snapshot().gpus[0].power_limit_mw
    finally:
        source.close()
    assert first == 300_000
    assert later == (300_000 if slow_every_s else 250_000)
