"""The simulated driver's process lists: its packed fast path (a whole C array at once, kept while
it cannot move) answers exactly as its field-by-field path does. (Lists that change as processes
come and go: tests/engine/test_nvml_sim.py.)"""

from __future__ import annotations

import pynvml
import pytest

from gputop import sim
from gputop.errors import UsageError
from gputop.sim import library
from gputop.sim.scenario import Scenario


def _processes(name: str | Scenario, times: list[float]) -> list[list[tuple[int, ...]]]:
    """Each GPU's (pid, memory, GI, CI) entries and (pid, SM %, memory %) samples, at each time,
    through pynvml's own wrappers."""
    clock = sim.ManualClock(times[0])
    sim.install(name, clock)
    out: list[list[tuple[int, ...]]] = []
    try:
        pynvml.nvmlInit()
        for t in times:
            clock.set(t)
            for i in range(pynvml.nvmlDeviceGetCount()):
                h = pynvml.nvmlDeviceGetHandleByIndex(i)
                listed = pynvml.nvmlDeviceGetComputeRunningProcesses(h)
                out.append(
                    [(p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId) for p in listed]
                )
                try:
                    samples = pynvml.nvmlDeviceGetProcessUtilization(h, 0)
                except pynvml.NVMLError:
                    samples = []
                out.append([(s.pid, s.smUtil, s.memUtil) for s in samples])
        pynvml.nvmlShutdown()
    finally:
        sim.uninstall()
    return out


@pytest.mark.parametrize("name", ["dgx", "demo", "mig"])
def test_the_packed_lists_are_the_field_by_field_lists(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    times = [5.0, 5.0, 17.5, 60.0, 61.0]  # the same time twice: the kept bytes answer the second
    packed = _processes(name, times)
    monkeypatch.setattr(library, "_packs", lambda array, layout: False)
    assert packed == _processes(name, times)
    assert any(packed)


@pytest.mark.parametrize("packed", [True, False])
def test_a_wave_that_swings_below_zero_reads_as_a_driver_would(
    packed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A scenario's wave of base 0 swings below it; a driver reports no negative utilisation or
    # memory (the packed path refused the number: struct.error, the driver process restarted).
    if not packed:
        monkeypatch.setattr(library, "_packs", lambda array, layout: False)
    wave = {"base": 0, "amp": 5, "period": 10}
    box = Scenario.from_dict(
        {
            "gpu": [
                {
                    "processes": [
                        {
                            "pid": 4242,
                            "used_memory_mib": {"base": 0, "amp": 300, "period": 10},
                            "sm_util": wave,
                            "mem_util": {"base": 98, "amp": 5, "period": 10},
                        }
                    ]
                }
            ]
        }
    )
    lists = _processes(box, [float(t) for t in range(10)])
    entries, samples = lists[0::2], lists[1::2]
    assert all(memory >= 0 for got in entries for _, memory, *_ in got)
    assert {sm for got in samples for _, sm, _ in got} >= {0, 5}
    assert all(0 <= sm <= 100 and 0 <= mem <= 100 for got in samples for _, sm, mem in got)
    assert max(mem for got in samples for _, _, mem in got) == 100


def test_processes_with_the_same_reading_share_one_wave() -> None:
    # Thousands of processes in a scenario have a few hundred distinct readings: each is made
    # once per GPU (the same object), and a different one, or other bounds, is another wave.
    procs = [
        {"pid": 1, "sm_util": {"base": 5, "amp": 3, "period": 7}, "used_memory_mib": 200},
        {"pid": 2, "sm_util": {"period": 7, "amp": 3, "base": 5}, "used_memory_mib": 200},
        {"pid": 3, "sm_util": {"base": 6, "amp": 3, "period": 7}, "used_memory_mib": 200.0},
        {"pid": 4, "sm_util": 0, "mem_util": 0, "used_memory_mib": 0},
    ]
    scenario = Scenario.from_dict({"name": "t", "gpu": [{"processes": procs}]})
    p1, p2, p3, p4 = scenario.gpus[0].processes
    assert p1.sm_util is p2.sm_util  # the same table, keys in any order
    assert p1.sm_util is not p3.sm_util
    assert (
        p1.sm_util
        == Scenario.from_dict({"name": "t", "gpu": [{"processes": procs[:1]}]})
        .gpus[0]
        .processes[0]
        .sm_util
    )
    assert p1.used_memory_mib is p2.used_memory_mib
    assert p3.used_memory_mib == p1.used_memory_mib  # 200.0 is 200, as a wave
    # 0 as SM % and as memory % (both 0-100): one wave; as a size (no upper bound): another.
    assert p4.sm_util is p4.mem_util
    assert p4.used_memory_mib.hi is None and p4.sm_util is not None and p4.sm_util.hi == 100.0


def test_a_bad_reading_is_refused_whatever_came_before() -> None:
    good = {"pid": 1, "sm_util": {"base": 5}}
    bad = {"pid": 2, "sm_util": {"base": 5, "wobble": 1}}
    with pytest.raises(UsageError, match="unknown wave keys"):
        Scenario.from_dict({"name": "t", "gpu": [{"processes": [good, bad]}]})
    with pytest.raises(UsageError, match="expected a number or a wave table"):
        Scenario.from_dict({"name": "t", "gpu": [{"processes": [good, {"pid": 3, "sm_util": []}]}]})
