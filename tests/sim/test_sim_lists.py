"""The simulated driver's process lists: its packed fast path (a whole C array at once, kept while
it cannot move) answers exactly as its field-by-field path does. (Lists that change as processes
come and go: tests/engine/test_nvml_sim.py.)"""

from __future__ import annotations

import pynvml
import pytest

from gputop import sim
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
