"""The simulated NVIDIA driver: scenario files served at pynvml's library boundary.

``install(scenario)`` puts a SimLibrary where pynvml keeps its loaded libnvidia-ml, so the real
pynvml module and all of gputop run unchanged on simulated GPUs.
"""

from __future__ import annotations

import pynvml

from gputop.sim.clock import Clock, ElapsedClock, ManualClock
from gputop.sim.library import SimLibrary
from gputop.sim.scenario import SHIPPED, Scenario, load_scenario

__all__ = [
    "SHIPPED",
    "Clock",
    "ElapsedClock",
    "ManualClock",
    "Scenario",
    "SimLibrary",
    "active",
    "install",
    "load_scenario",
    "uninstall",
]


def install(scenario: Scenario | str, clock: Clock | None = None) -> SimLibrary:
    """Serve ``scenario`` (a Scenario, or a shipped name / file path) as the NVML library."""
    if isinstance(scenario, str):
        scenario = load_scenario(scenario)
    lib = SimLibrary(scenario, clock)
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()  # resolved 'symbols' belong to the old library
    return lib


def uninstall() -> None:
    """Forget the simulated library; the next nvmlInit loads the real one."""
    with pynvml.libLoadLock:
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()


def active() -> SimLibrary | None:
    """The installed simulated library, if any."""
    lib = pynvml.nvmlLib
    return lib if isinstance(lib, SimLibrary) else None
