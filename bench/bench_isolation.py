"""What the driver process costs: IPC per snapshot, and the driver work moved out of gputop.

For the demo and dgx scenarios, the same readings in-process (NvmlSource) and through the
driver process (IsolatedSource): wall time per snapshot, gputop's own CPU per snapshot (for the
isolated source that is only the IPC: unpickling, the pipe, the listener thread), the driver
process's CPU, and the bytes a snapshot takes on the pipe. Both read the scenario on its real
clock, as the demo does.
"""

from __future__ import annotations

import statistics
import time

import psutil

from gputop import sim
from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.nvml import NvmlSource
from gputop.engine.wire import dumps

ROUNDS = 200


def _in_process(name: str) -> tuple[float, float, int]:
    lib = sim.install(name)  # real elapsed time, as the driver process's demo runs
    source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
    try:
        for _ in range(20):
            snap = source.snapshot()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(ROUNDS):
            snap = source.snapshot()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    finally:
        source.close()
        sim.uninstall()
    size = len(dumps(("snap", 1, snap)))
    return wall / ROUNDS, cpu / ROUNDS, size


def _isolated(name: str) -> tuple[float, float, float]:
    source = IsolatedSource(DriverConfig(demo=name))
    try:
        for _ in range(20):
            source.snapshot()
        child = psutil.Process(source.pid or 0)
        c0 = child.cpu_times()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        for _ in range(ROUNDS):
            source.snapshot()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        c1 = child.cpu_times()
    finally:
        source.close()
    driver = (c1.user - c0.user) + (c1.system - c0.system)
    return wall / ROUNDS, cpu / ROUNDS, driver / ROUNDS


def main() -> None:
    for name in ("demo", "dgx"):
        in_wall, in_cpu, size = _in_process(name)
        iso_wall, iso_cpu, iso_driver = _isolated(name)
        print(f"isolation_{name}_in_process_wall: {in_wall * 1000:.2f} ms per snapshot")
        print(f"isolation_{name}_in_process_cpu: {in_cpu * 1000:.2f} ms per snapshot")
        print(f"isolation_{name}_isolated_wall: {iso_wall * 1000:.2f} ms per snapshot")
        print(f"isolation_{name}_ipc_cpu_in_gputop: {iso_cpu * 1000:.3f} ms per snapshot")
        print(f"isolation_{name}_driver_process_cpu: {iso_driver * 1000:.2f} ms per snapshot")
        print(f"isolation_{name}_bytes_on_pipe: {size / 1024:.1f} KiB per snapshot")
        print(
            f"isolation_{name}_ipc_share: "
            f"{statistics.fmean([iso_cpu]) / in_cpu * 100:.0f} % of the in-process reading's CPU"
        )


if __name__ == "__main__":
    main()
