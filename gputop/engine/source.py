"""Where snapshots come from: the real driver, or the simulated one, behind one small interface."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable
from typing import Protocol

from gputop.engine.model import PidMemory, Snapshot
from gputop.errors import DriverMissing

DEMO_ENV = "GPUTOP_DEMO"  # set to a scenario name (or "1" for the demo) to use the simulated driver
# Set to 1 to call the driver from gputop's own process (no driver process): for debugging and
# for measuring what the isolation costs. A crash in libnvidia-ml then takes gputop down.
IN_PROCESS_ENV = "GPUTOP_IN_PROCESS"


class Source(Protocol):
    """Anything that can read a complete Snapshot of the box.

    A source may also have ``request_probes(probes, explain)`` (NvmlSource has): ``gputop query``
    calls it to have the driver read the extra fields it shows (see gputop.engine.probes).
    ``pid_memory`` is the light read (gputop's own sources have it; a caller's own source may
    not: see :func:`gputop.engine.model.pid_memory_of`).
    """

    @property
    def simulated(self) -> bool: ...

    @property
    def dev_dir(self) -> str: ...

    def snapshot(self) -> Snapshot: ...

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        """The GPU memory ``pids`` use on each GPU: the process lists only, no full snapshot."""
        ...

    def close(self) -> None: ...


def open_source(
    *,
    demo: str | None = None,
    scenario: str | None = None,
    fallback_to_demo: bool = False,
    environ: dict[str, str] | None = None,
    isolated: bool = False,
    guard_terminal: bool = False,
    counters: bool = False,
) -> Source:
    """Open the real driver, or the simulated one when asked (or absent, with ``fallback_to_demo``).

    ``demo`` is a shipped scenario name; ``scenario`` a path to a scenario file. The fallback is
    only for a machine without the NVIDIA library: a driver that is there but fails (version
    mismatch, module not loaded, no permission) raises like any other.
    With ``isolated`` the driver (real or simulated) runs in a process of its own
    (gputop.engine.isolated) unless GPUTOP_IN_PROCESS=1; ``guard_terminal`` has that process
    mend the terminal if gputop dies (the dashboard). ``counters``: fill Snapshot.counters (the
    exporter's energy, Xid, NVLink... readings), which costs every tick; off, it stays empty.
    Raises DriverError with a one-line message when the driver cannot be used.
    """
    env = os.environ if environ is None else environ
    if demo is None and scenario is None and env.get(DEMO_ENV):
        value = env[DEMO_ENV]
        demo = "demo" if value in ("1", "true", "yes") else value
    if isolated and env.get(IN_PROCESS_ENV) != "1":
        from gputop.engine.isolated import DriverConfig, IsolatedSource

        config = DriverConfig(
            demo=demo, scenario=scenario, fallback_to_demo=fallback_to_demo, counters=counters
        )
        return IsolatedSource(config, guard_terminal=guard_terminal)
    from gputop import sim  # local: keep `import gputop.engine.source` free of pynvml
    from gputop.engine import nvml

    if demo is not None or scenario is not None:
        sim.install(sim.load_scenario(scenario or demo or "demo"), actors=True)
        return nvml.NvmlSource(environ=env, simulated=True, counters=counters)
    try:
        return nvml.NvmlSource(environ=env, counters=counters)
    except DriverMissing:
        if not fallback_to_demo:
            raise
    sim.install(sim.load_scenario("demo"), actors=True)
    return nvml.NvmlSource(environ=env, simulated=True, counters=counters)


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The --demo/--scenario options every command shares, before or after its name.

    The main parser and each subcommand's parser get them. No default is stored
    (``argparse.SUPPRESS``): a subcommand's parser copies every attribute it has over the main
    parser's, so a stored None would erase ``gputop --scenario F doctor``'s F. Read them with
    ``getattr(args, "demo", None)``, as :func:`source_from_args` does.
    """
    group = parser.add_argument_group("data source")
    group.add_argument(
        "--demo",
        nargs="?",
        const="demo",
        default=argparse.SUPPRESS,
        metavar="NAME",
        help="simulated driver, shipped scenario NAME (default demo; also dgx, faults, flaky, mig)",
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
) -> Source:
    """Open the source the parsed --demo/--scenario options ask for, in a driver process.

    ``counters``: only for what shows Snapshot.counters (the exporter, --json).
    """
    return open_source(
        demo=getattr(args, "demo", None),
        scenario=getattr(args, "scenario", None),
        fallback_to_demo=fallback_to_demo,
        isolated=True,
        guard_terminal=guard_terminal,
        counters=counters,
    )
