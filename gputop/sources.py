"""Composition: which Source to open, from the command line or a caller's keywords.

The only module that knows both the simulator (gputop.sim) and the concrete sources (NvmlSource in
this process, IsolatedSource for a driver process of its own), and the only one that turns
command-line options into a source. The driver process starts here too
(:func:`driver_process_main`): it opens the driver with :func:`open_for_driver`, so the engine
never imports the simulator.

Nothing here loads pynvml or the simulator at import: the commands' parsers import this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gputop.errors import DriverMissing

# Under TYPE_CHECKING, or imported where used: the driver process imports this module too, and
# needs none of these (argparse is the command line's, the deadline the caller's).
if TYPE_CHECKING:
    import argparse

    from gputop.engine.isolated import IsolatedSource
    from gputop.engine.messages import DriverConfig
    from gputop.engine.nvml import NvmlSource
    from gputop.engine.source import Source
    from gputop.sim import Clock, Scenario

    # The concrete sources keep the whole contract: one that drifts fails mypy here.
    _IN_PROCESS: type[Source] = NvmlSource
    _DRIVER_PROCESS: type[Source] = IsolatedSource

DEMO_ENV = "GPUTOP_DEMO"  # set to a scenario name (or "1" for the demo) to use the simulated driver
# Set to 1 to call the driver from gputop's own process (no driver process): for debugging and
# for measuring what the isolation costs. A crash in libnvidia-ml then takes gputop down.
IN_PROCESS_ENV = "GPUTOP_IN_PROCESS"


# What a monitor left running (the dashboard, the exporter) passes as ``slow_every_s``: the power
# limit, PCIe link, ECC counts and compute/persistence/MIG modes read every 10 s, not every tick
# (a quarter of the driver's NVML calls on dgx, issue 42).
SLOW_EVERY_S = 10.0


def open_source(
    *,
    demo: str | None = None,
    scenario: str | None = None,
    fallback_to_demo: bool = False,
    environ: Mapping[str, str] | None = None,
    isolated: bool = False,
    guard_terminal: bool = False,
    counters: bool = False,
    slow_every_s: float = 0.0,
) -> Source:
    """Open the real driver, or the simulated one when asked (or absent, with ``fallback_to_demo``).

    ``demo`` is a shipped scenario name; ``scenario`` a path to a scenario file. The fallback is
    only for a machine without the NVIDIA library: a driver that is there but fails (version
    mismatch, module not loaded, no permission) raises like any other.
    With ``isolated`` the driver (real or simulated) runs in a process of its own
    (gputop.engine.isolated) unless GPUTOP_IN_PROCESS=1; ``guard_terminal`` has that process
    mend the terminal if gputop dies (the dashboard). ``counters``: fill Snapshot.counters (the
    exporter's energy, Xid, NVLink... readings), which costs every tick; off, it stays empty.
    ``slow_every_s``: see NvmlSource (a monitor passes SLOW_EVERY_S; 0, every reading).
    Raises DriverError with a one-line message when the driver cannot be used.
    """
    env = os.environ if environ is None else environ
    if demo is None and scenario is None and env.get(DEMO_ENV):
        value = env[DEMO_ENV]
        demo = "demo" if value in ("1", "true", "yes") else value
    if isolated and env.get(IN_PROCESS_ENV) != "1":
        from gputop.engine.isolated import IsolatedSource
        from gputop.engine.messages import DriverConfig

        config = DriverConfig(
            demo=demo,
            scenario=scenario,
            fallback_to_demo=fallback_to_demo,
            counters=counters,
            slow_every_s=slow_every_s,
            boot=f"{__name__}:{driver_process_main.__name__}",  # the driver process starts here
        )
        return IsolatedSource(config, guard_terminal=guard_terminal)
    return _open_in_process(
        demo=demo,
        scenario=scenario,
        fallback_to_demo=fallback_to_demo,
        environ=env,
        counters=counters,
        slow_every_s=slow_every_s,
    )


def _open_in_process(
    *,
    demo: str | None,
    scenario: str | None,
    fallback_to_demo: bool,
    environ: Mapping[str, str],
    counters: bool,
    slow_every_s: float,
) -> NvmlSource:
    """NvmlSource in this process: on the simulated box asked for, else the real driver (or the
    demo box where there is no NVIDIA library and ``fallback_to_demo`` allows it)."""
    from gputop import sim  # local: keep `import gputop.sources` free of pynvml
    from gputop.engine.nvml import NvmlSource

    if demo is None and scenario is None:
        try:
            return NvmlSource(environ=environ, counters=counters, slow_every_s=slow_every_s)
        except DriverMissing:
            if not fallback_to_demo:
                raise
    lib = sim.install(sim.load_scenario(scenario or demo or "demo"), actors=True)
    return NvmlSource(
        environ=environ,
        simulated=True,
        counters=counters,
        dev_dir=lib.dev_dir,
        slow_every_s=slow_every_s,
    )


def open_simulated(
    scenario: Scenario | str, clock: Clock | None = None, *, actors: bool = False
) -> NvmlSource:
    """Install ``scenario`` (a Scenario, or a shipped name / file path) and open the driver layer
    on it in this process: a Source of simulated snapshots (tests, benches, demo frames).

    With a ``clock`` of the caller's, every reading follows that clock: PCIe is read in line
    even when a busy machine makes the call slow (else a thread would read it on the real one).
    """
    from gputop import sim
    from gputop.engine.nvml import NvmlSource

    lib = sim.install(scenario, clock, actors=actors)
    return NvmlSource(
        simulated=True,
        environ={},
        dev_dir=lib.dev_dir,
        pcie_in_line=clock is not None,
        clock=lib.clock.now,  # the slow readings' cadence follows the simulated clock too
    )


def open_for_driver(config: DriverConfig) -> NvmlSource:
    """What the driver process reads: the driver ``config`` names, opened in that process.

    A simulated box's clock goes on from the first driver process's start
    (``config.clock_origin_mono``), so a restarted driver process does not start its scenario
    over.
    """
    # The driver layer's pynvml first, without ctypes.util (3.4 MiB for the process's life);
    # the simulator's own `import pynvml` then finds it loaded.
    from gputop.engine.nvml.pynvml_private import import_pynvml

    import_pynvml()
    if config.clock_origin_mono is not None:
        from gputop.sim import clock

        clock.ORIGIN_MONO = config.clock_origin_mono
    return _open_in_process(
        demo=config.demo,
        scenario=config.scenario,
        fallback_to_demo=config.fallback_to_demo,
        environ=os.environ,
        counters=config.counters,
        slow_every_s=config.slow_every_s,
    )


def driver_process_main() -> None:
    """The driver process's entry point (``DriverConfig.boot``): serve readings until told to
    stop, then stop the simulated box's actor processes, if any."""
    from gputop.engine.child import serve

    serve(open_for_driver, on_exit=_stop_actors)


def _stop_actors() -> None:
    # Every cast, not just the installed library's: the demo may still be starting.
    from gputop.sim.actors import stop_all

    stop_all()


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The --demo/--scenario options every command shares, before or after its name.

    The main parser and each subcommand's parser get them. No default is stored
    (``argparse.SUPPRESS``): a subcommand's parser copies every attribute it has over the main
    parser's, so a stored None would erase ``gputop --scenario F doctor``'s F. Read them with
    ``getattr(args, "demo", None)``, as :func:`source_from_args` does.
    """
    import argparse

    group = parser.add_argument_group("data source")
    group.add_argument(
        "--demo",
        nargs="?",
        const="demo",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help=(
            "simulated driver, shipped scenario NAME "
            "(default demo; also dgx, faults, flaky, mig, sick)"
        ),
    )
    group.add_argument(
        "--scenario",
        metavar="FILE",
        default=argparse.SUPPRESS,
        help="use the simulated driver with a scenario file",
    )


def source_from_args(
    args: argparse.Namespace,
    *,
    fallback_to_demo: bool = False,
    guard_terminal: bool = False,
    counters: bool = False,
    slow_every_s: float = 0.0,
) -> Source:
    """Open the source the parsed --demo/--scenario options ask for, in a driver process.

    ``counters``: only for what shows Snapshot.counters (the exporter, --json);
    ``slow_every_s``: SLOW_EVERY_S for a monitor left running (see open_source).
    """
    return open_source(
        demo=getattr(args, "demo", None),
        scenario=getattr(args, "scenario", None),
        fallback_to_demo=fallback_to_demo,
        isolated=True,
        guard_terminal=guard_terminal,
        counters=counters,
        slow_every_s=slow_every_s,
    )


def timeout_of(args: argparse.Namespace) -> float:
    """The ``--timeout`` a command was given (the option stores no default), else the default."""
    from gputop.engine.deadline import DEFAULT_TIMEOUT_S

    value = getattr(args, "timeout", None)
    return DEFAULT_TIMEOUT_S if value is None else float(value)
