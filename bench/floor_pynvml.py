"""The NVML floor (issue 42): a plain pynvml loop over the simulated dgx box, every second.

Run by bench_floor in a 200x60 tmux pane beside gputop, with PYTHONPATH at the repo root: the
simulated driver is installed the way bench/nvitop_on_sim.py does (``gputop.sim.install`` puts
the SimLibrary where pynvml keeps its loaded libnvidia-ml, and ``ctypes.CDLL`` refuses the real
one), then only plain pynvml calls: per GPU utilisation, memory, temperature, power, the graphics
and memory clocks and the compute and graphics process lists. One status line per second.
"""

from __future__ import annotations

import sys
import time

from bench.nvitop_on_sim import _refuse_real_nvml


def main(argv: list[str]) -> int:
    scenario = argv[0] if argv else "dgx"
    _refuse_real_nvml()  # before pynvml's import: it binds CDLL by ``from ctypes import *``
    from gputop import sim

    sim.install(scenario)  # no actors (dgx has none): the same box gputop --demo=dgx reads
    import pynvml  # noqa: TID251 (the floor is plain pynvml on the simulated library)

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    gpus = len(handles)
    while True:
        started = time.monotonic()
        procs = 0
        util_sum = 0
        for h in handles:
            util_sum += pynvml.nvmlDeviceGetUtilizationRates(h).gpu
            pynvml.nvmlDeviceGetMemoryInfo(h)
            pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)
            pynvml.nvmlDeviceGetPowerUsage(h)
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_GRAPHICS)
            pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM)
            procs += len(pynvml.nvmlDeviceGetComputeRunningProcesses(h))
            procs += len(pynvml.nvmlDeviceGetGraphicsRunningProcesses(h))
        line = f"floor_pynvml: GPU {gpus - 1} read, {gpus} GPUs, {procs} processes, util {util_sum}"
        sys.stdout.write(f"\r{line}   ")
        sys.stdout.flush()
        time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
