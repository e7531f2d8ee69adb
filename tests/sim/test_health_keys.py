"""The simulator's health readings: scenario keys the verdict reads, and the shipped ``sick`` box
with one GPU per verdict."""

from __future__ import annotations

from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.engine.gpu_health import Verdict, assess
from gputop.errors import UsageError
from gputop.sim.scenario import Scenario


def test_unrepairable_memory_key_answers_the_call(sim_source: Any) -> None:
    _, lib = sim_source(
        {"name": "t", "gpu": [{"name": "a", "unrepairable_memory": 1}, {"name": "b"}]}
    )
    pynvml.nvmlInit()
    try:
        flagged = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert pynvml.nvmlDeviceGetUnrepairableMemoryFlag_v1(flagged) == 1
        default = pynvml.nvmlDeviceGetHandleByIndex(1)  # unsupported unless a scenario says
        with pytest.raises(pynvml.NVMLError_NotSupported):
            pynvml.nvmlDeviceGetUnrepairableMemoryFlag_v1(default)
    finally:
        pynvml.nvmlShutdown()
    assert lib.calls["nvmlDeviceGetUnrepairableMemoryFlag_v1"] == 2


def test_a_bad_health_key_is_one_clear_error() -> None:
    with pytest.raises(UsageError, match="recovery_action"):
        Scenario.from_dict({"name": "t", "gpu": [{"name": "a", "recovery_action": "reboot"}]})


def test_the_sick_box_has_one_gpu_per_verdict(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    assert "sick" in sim.SHIPPED
    source, _ = sim_source("sick")
    at_start = [assess(g).verdict for g in source.snapshot().gpus]
    assert at_start == [
        Verdict.OK,
        Verdict.DEGRADED,
        Verdict.RESET,
        Verdict.REBOOT,
        Verdict.REPLACE,
        Verdict.UNKNOWN,
        Verdict.OK,
    ]
    sim_clock.set(29.5)  # every Xid told; GPU 6 reports Xid 79, then falls off the bus
    gpus = source.snapshot().gpus
    assert [e.xid for e in gpus[2].recent_xids or ()] == [48, 63]
    assert assess(gpus[0]).reasons[0].evidence == "Xid 13"  # a note: still ok
    assert assess(gpus[0]).verdict is Verdict.OK
    assert assess(gpus[6]).tag == "reboot needed: Xid 79"
    sim_clock.set(31.0)
    lost = source.snapshot().gpus[6]
    assert lost.state.value == "lost" and assess(lost).verdict is Verdict.REBOOT
