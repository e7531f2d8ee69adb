"""The IPython extension's cost per cell, on the simulated dgx box (8 GPUs, ~40 processes).

A real InteractiveShell runs the same cells without and with ``%load_ext gputop``:

- a cell of pure Python (``x = 1``): the fixed cost per cell (a start and an end read of the
  driver, a sampler thread started and joined, the line formatted);
- a cell of small work (~20 ms of Python): the same, plus the sampler's reads during the cell;
- a cell of longer work (~0.3 s): the sampler's share of the time (it reads every 10 ms, or
  less often when one read costs more than 5 % of that: ``max_share``).

The simulated driver runs in Python in this process, so its reads compete for the GIL more than
the real libnvidia-ml does: these figures are an upper bound.
"""

from __future__ import annotations

import io
import time
from statistics import median
from typing import Any

from gputop import notebook
from gputop.engine.source import open_source

CELLS = {
    "pure_python": ("x = 1", 200),
    "small_work": ("_ = sum(i * i for i in range(200_000))", 30),
    "long_work": ("_ = sum(i * i for i in range(3_000_000))", 5),
}


def _shell() -> Any:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    return InteractiveShell.instance(config=config)


def _per_cell(shell: Any, cell: str, runs: int) -> float:
    """Median seconds per ``run_cell`` (after two warm-up runs)."""
    for _ in range(2):
        shell.run_cell(cell, store_history=True)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        shell.run_cell(cell, store_history=True)
        times.append(time.perf_counter() - t0)
    return median(times)


def main() -> None:
    """Print 'name: value unit' lines."""
    source = open_source(demo="dgx")
    shell = _shell()
    try:
        without = {name: _per_cell(shell, cell, n) for name, (cell, n) in CELLS.items()}
        monitor = notebook.load_ipython_extension(shell)
        monitor.source, monitor.file = source, io.StringIO()
        with_ext = {name: _per_cell(shell, cell, n) for name, (cell, n) in CELLS.items()}
        for name in CELLS:
            base, tracked = without[name], with_ext[name]
            print(f"cell_{name}_without: {base * 1000:.2f} ms")
            print(f"cell_{name}_with_gputop: {tracked * 1000:.2f} ms")
            print(f"cell_{name}_overhead: {(tracked - base) * 1000:.2f} ms")
        samples = monitor.records[-1].report.samples
        print(f"long_work_samples_per_cell: {samples} samples")
        notebook.unload_ipython_extension(shell)
    finally:
        source.close()
        from IPython.core.interactiveshell import InteractiveShell

        InteractiveShell.clear_instance()


if __name__ == "__main__":
    main()
