"""The simulated NVIDIA driver: scenario files served at pynvml's library boundary.

``install(scenario)`` puts a SimLibrary where pynvml keeps its loaded libnvidia-ml, so the real
pynvml module and all of gputop run unchanged on simulated GPUs. The simulator knows nothing of
gputop's driver layer: gputop.sources opens a source on it (``open_simulated``).
"""

from __future__ import annotations

from dataclasses import replace

import pynvml

from gputop.sim.actors import start_cast
from gputop.sim.clock import Clock, ElapsedClock, ManualClock
from gputop.sim.devices import device_names
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


def install(
    scenario: Scenario | str, clock: Clock | None = None, *, actors: bool = False
) -> SimLibrary:
    """Serve ``scenario`` (a Scenario, or a shipped name / file path) as the NVML library.

    With ``actors``, the scenario's real actor processes are started and their PIDs replace the
    stand-in PIDs of the processes that name them (``lib.dev_dir`` is then their device folder;
    without, the box has a private folder of its own: never the real /dev).
    """
    if isinstance(scenario, str):
        scenario = load_scenario(scenario)
    cast = None
    if actors and scenario.actors:
        cast = start_cast(scenario.actors, device_names(len(scenario.gpus)))
        scenario = _with_actor_pids(scenario, cast.pids)
    lib = SimLibrary(scenario, clock)
    if cast is not None:
        lib.set_cast(cast)
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()  # resolved 'symbols' belong to the old library
    return lib


def _with_actor_pids(scenario: Scenario, pids: dict[str, int]) -> Scenario:
    gpus = tuple(
        replace(
            gpu,
            processes=tuple(
                replace(p, pid=pids[p.actor]) if p.actor in pids else p for p in gpu.processes
            ),
        )
        for gpu in scenario.gpus
    )
    return replace(scenario, gpus=gpus)


def uninstall() -> None:
    """Forget the simulated library and its device folder; the next nvmlInit loads the real one."""
    with pynvml.libLoadLock:
        if isinstance(pynvml.nvmlLib, SimLibrary):
            pynvml.nvmlLib.release()
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()


def active() -> SimLibrary | None:
    """The installed simulated library, if any."""
    lib = pynvml.nvmlLib
    return lib if isinstance(lib, SimLibrary) else None
