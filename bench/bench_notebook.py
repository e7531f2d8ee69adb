"""The IPython extension's cost per cell, on the simulated dgx box (8 GPUs, ~40 processes).

A real InteractiveShell runs the same cells without and with ``%load_ext gputop`` tracking them
(alternating, run by run):

- a cell of pure Python (``x = 1``): the fixed cost per cell (a start and an end read of the
  driver, a sampler thread started and joined, the line formatted);
- a cell of small work (~20 ms of Python): the same, plus the sampler's reads during the cell;
- a cell of longer work (~0.3 s): the sampler's share of the time (it reads every 10 ms, or
  less often when one read costs more than 5 % of that: ``max_share``).

Each is measured with the driver in a process of its own (the extension's default) and in this
process (``gputop.use_driver(in_process=True)``). In this process the simulated driver runs in
Python, so its reads compete for the GIL more than the real libnvidia-ml does: an upper bound.
A third way (``own_gpus``, driver process) has this process on all 8 GPUs, so each cell also
reads every GPU's free memory (the line's ``free``). Each cell takes the exact host peak (a
reset of the kernel's peak RSS and a read of it: ``host_peak_block``, timed on its own too).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import time
from statistics import median
from typing import Any

import gputop
from gputop import notebook

CELLS = {
    "pure_python": ("x = 1", 200),
    "small_work": ("_ = sum(i * i for i in range(200_000))", 30),
    "long_work": ("_ = sum(i * i for i in range(3_000_000))", 15),
}


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    return InteractiveShell.instance(config=config)


def _timed(shell: Any, cell: str) -> float:
    t0 = time.perf_counter()
    shell.run_cell(cell, store_history=True)
    return time.perf_counter() - t0


def _per_cell(shell: Any, monitor: Any, cell: str, runs: int) -> tuple[float, float]:
    """Median seconds per ``run_cell`` without and with the extension tracking it.

    The two alternate run by run (``%gputop off``/``on`` as a user would), so a machine that
    gets busier or quieter meanwhile shifts both alike.
    """
    for _ in range(2):
        shell.run_cell(cell, store_history=True)
    without, tracked = [], []
    for _ in range(runs):
        monitor.enabled = False
        without.append(_timed(shell, cell))
        monitor.enabled = True
        tracked.append(_timed(shell, cell))
    return median(without), median(tracked)


def _own_gpus_scenario(folder: str) -> str:
    """A scenario file: 8 GPUs, this process holding 1000 MiB on each."""
    me = os.getpid()
    gpus = [{"processes": [{"pid": me, "used_memory_mib": 1000}]} for _ in range(8)]
    path = os.path.join(folder, "own_gpus.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"name": "own_gpus", "gpu": gpus}, f)
    return path


def _host_peak_block_us(runs: int = 2000) -> float | None:
    """Median microseconds of one exact host peak (reset, then read); None where unsupported."""
    try:
        from gputop import host_memory
    except ImportError:  # the tree before exact peaks
        return None
    if not host_memory.exact_peaks():
        return None
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        host_memory.PeakBlock().open().close()
        times.append(time.perf_counter() - t0)
    return median(times) * 1e6


def main() -> None:
    """Print 'name: value unit' lines."""
    shell = _shell()
    folder = tempfile.mkdtemp(prefix="gputop-bench-")
    try:
        monitor = notebook.load_ipython_extension(shell)
        monitor.file = io.StringIO()
        block_us = _host_peak_block_us()
        print(f"host_peak_block: {'n/a' if block_us is None else f'{block_us:.1f}'} us")
        own = _own_gpus_scenario(folder)
        # As the extension reads by default (gputop.api's shared source: a driver process), and
        # with the driver in this process (``gputop.use_driver(in_process=True)``).
        for way in ("driver_process", "in_process", "own_gpus"):
            gputop.use_driver(in_process=way == "in_process")
            gputop.use_demo(own if way == "own_gpus" else "dgx")
            monitor.gpu = None  # probe the new source
            for name, (cell, runs) in CELLS.items():
                base, tracked = _per_cell(shell, monitor, cell, runs)
                print(f"cell_{name}_without_{way}: {base * 1000:.2f} ms")
                print(f"cell_{name}_with_gputop_{way}: {tracked * 1000:.2f} ms")
                print(f"cell_{name}_overhead_{way}: {(tracked - base) * 1000:.2f} ms")
            samples = monitor.records[-1].report.samples
            print(f"long_work_samples_per_cell_{way}: {samples} samples")
        notebook.unload_ipython_extension(shell)
    finally:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        gputop.use_driver()
        gputop.use_demo(None)
        from IPython.core.interactiveshell import InteractiveShell

        InteractiveShell.clear_instance()


if __name__ == "__main__":
    main()
