"""The driver layer names the NVML call each thread is inside, and the GPU it is reading
(gputop.engine.in_flight), on the simulated library with the real pynvml between."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.engine.in_flight import in_flight
from gputop.engine.nvml import NvmlSource
from gputop.sim.scenario import Scenario

BOX: dict[str, Any] = {"name": "box", "gpu": [{"count": 3}]}


def sim_dev_dir() -> str:
    """The installed simulated box's own device folder (never the real /dev)."""
    lib = sim.active()
    assert lib is not None
    return lib.dev_dir


def _stuck(thread: threading.Thread, deadline_s: float = 5.0) -> tuple[str | None, int | None]:
    """What ``thread`` is in once it is inside an NVML call (waits for that)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        seen = in_flight().get(thread.ident or 0)
        if seen is not None and seen[0] is not None:
            return seen
        time.sleep(0.01)
    raise AssertionError("the thread never entered an NVML call")


@pytest.fixture
def clock() -> Iterator[sim.ManualClock]:
    yield sim.ManualClock(0.0)
    sim.uninstall()


def _hung_in(
    call: str, clock: sim.ManualClock, scenario: dict[str, Any], work: Callable[[Any], Any]
) -> tuple[str | None, int | None]:
    """Block ``call`` in the simulated library, run ``work(source or None)`` on a thread, and
    return what the registry says that thread is in; the thread then finishes."""
    lib = sim.install(Scenario.from_dict(scenario), clock)
    gate = threading.Event()
    source = (
        None
        if call == "nvmlInitWithFlags"
        else NvmlSource(simulated=True, environ={}, dev_dir=sim_dev_dir())
    )
    lib.blocked[call] = gate
    thread = threading.Thread(target=work, args=(source,), daemon=True)
    thread.start()
    try:
        return _stuck(thread)
    finally:
        gate.set()
        thread.join(5)
        assert not thread.is_alive()
        assert thread.ident not in in_flight()  # done: nothing left recorded for it
        if source is not None:
            source.close()


def test_a_reading_hung_in_a_wrapped_call_names_the_call_and_its_gpu(
    clock: sim.ManualClock,
) -> None:
    said = _hung_in("nvmlDeviceGetTemperature", clock, BOX, lambda s: s.snapshot())
    assert said == ("nvmlDeviceGetTemperature", 0)
    assert threading.get_ident() not in in_flight()  # this thread is in no NVML call


def test_a_reading_hung_in_the_process_list_fast_path_names_the_c_symbol(
    clock: sim.ManualClock,
) -> None:
    call = "nvmlDeviceGetComputeRunningProcesses_v3"
    assert _hung_in(call, clock, BOX, lambda s: s.snapshot()) == (call, 0)


def test_a_hang_while_opening_names_the_init_call_and_no_gpu(clock: sim.ManualClock) -> None:
    def opening(_: object) -> None:
        NvmlSource(simulated=True, environ={}, dev_dir=sim_dev_dir()).close()

    assert _hung_in("nvmlInitWithFlags", clock, BOX, opening) == ("nvmlInitWithFlags", None)


def test_a_light_read_names_its_call_without_a_gpu_reading(clock: sim.ManualClock) -> None:
    call = "nvmlDeviceGetGraphicsRunningProcesses_v3"
    assert _hung_in(call, clock, BOX, lambda s: s.pid_memory([1])) == (call, None)


def test_the_gpu_named_is_the_one_whose_call_hangs(clock: sim.ManualClock) -> None:
    scenario = {
        **BOX,
        "fault": [{"call": "nvmlDeviceGetPowerUsage", "kind": "hang", "gpu": 2, "until_s": 5.0}],
    }
    sim.install(Scenario.from_dict(scenario), clock)
    source = NvmlSource(simulated=True, environ={}, dev_dir=sim_dev_dir())
    thread = threading.Thread(target=source.snapshot, daemon=True)
    thread.start()
    try:
        assert _stuck_on(thread, "nvmlDeviceGetPowerUsage") == ("nvmlDeviceGetPowerUsage", 2)
    finally:
        clock.set(6.0)  # the scenario's driver answers again
        thread.join(5)
        source.close()
    assert thread.ident not in in_flight()


def _stuck_on(thread: threading.Thread, call: str) -> tuple[str | None, int | None]:
    """What ``thread`` is in once it is inside ``call`` (earlier calls pass quickly)."""
    end = time.monotonic() + 5
    while time.monotonic() < end:
        seen = in_flight().get(thread.ident or 0)
        if seen is not None and seen[0] == call:
            return seen
        time.sleep(0.005)
    raise AssertionError(f"the thread never stayed in {call}")


def test_each_way_of_calling_leaves_nothing_recorded_after_the_call(
    clock: sim.ManualClock,
) -> None:
    from gputop.engine.nvml.calls import first, read, soft

    scenario = {
        "name": "box",
        "gpu": [{"count": 1, "call_errors": {"nvmlDeviceGetFanSpeed": "not_supported"}}],
    }
    sim.install(Scenario.from_dict(scenario), clock)
    source = NvmlSource(simulated=True, environ={}, dev_dir=sim_dev_dir())
    me = threading.get_ident()
    try:
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        assert read(pynvml.nvmlDeviceGetPowerUsage, h) is not None
        assert me not in in_flight()
        assert read(pynvml.nvmlDeviceGetFanSpeed, h) is None  # NOT_SUPPORTED: None, cleared
        assert me not in in_flight()
        assert soft(pynvml.nvmlDeviceGetFanSpeed, h) is None
        assert me not in in_flight()
        assert first(("nvmlDeviceGetUUID", lambda: pynvml.nvmlDeviceGetUUID(h)))
        assert me not in in_flight()
    finally:
        source.close()
