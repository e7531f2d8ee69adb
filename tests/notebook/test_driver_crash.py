"""A real IPython process with ``%load_ext gputop`` on a driver that crashes (SIGSEGV in a driver
call): each cell meanwhile says so in one line, the kernel lives, and once the driver process is
back the cells get their GPU lines again."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import gputop
from gputop.engine.model import PidMemory, Snapshot
from tests.notebook.conftest import Notebook
from tests.test_api_driver_process import crash_scenario

ROOT = Path(__file__).resolve().parents[2]
LIST_CALL = "nvmlDeviceGetComputeRunningProcesses_v3"
CELLS = [
    "%load_ext gputop",
    "x = 1",
    *["import time; time.sleep(0.5)"] * 10,
    "print('alive', 6 * 7)",
]


def run_ipython(cells: list[str], scenario: Path) -> subprocess.CompletedProcess[str]:
    """The cells, one a line, in a real IPython shell (a terminal one, reading a pipe)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_")}
    env["GPUTOP_DEMO"] = str(scenario)  # the API's shared source, as the extension opens it
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--simple-prompt",
            "--no-banner",
            "--quick",
            "--HistoryManager.hist_file=:memory:",
        ],
        input="\n".join(cells) + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )


def test_a_crashing_driver_is_a_line_in_the_cell_and_the_kernel_lives(tmp_path: Path) -> None:
    # The per-cell line reads the process lists only: that is the call that crashes here.
    run = run_ipython(CELLS, crash_scenario(tmp_path, until_s=1.5, call=LIST_CALL))
    assert run.returncode == 0, run.stderr
    out = run.stdout
    lines = [x.split("]: ", 1)[-1] for x in out.splitlines()]  # without the "In [n]: " prompt
    gputop = [x for x in lines if x.startswith("[gputop]")]
    assert len(gputop) == len(CELLS) - 1, out  # one line a cell (not the %load_ext one)
    crashed = [x for x in gputop if "| GPU n/a: DRIVER CRASHED (SIGSEGV in libnvidia-ml" in x]
    assert crashed, out
    # Back once the fault window is over: later cells read the driver again (this process has
    # no memory on the simulated GPUs: "GPU none" is a reading).
    after = out.index(crashed[-1])
    assert "| GPU none |" in out[after:], out
    assert "alive 42" in out
    assert "Traceback" not in out + run.stderr


class CrashesAfter(gputop.SourceBase):
    """Reads ``inner`` ``good`` times, then every light read is a driver-process crash."""

    def __init__(self, inner: Any, good: int) -> None:
        self.inner, self.good, self.calls = inner, good, 0
        self.simulated, self.dev_dir = True, inner.dev_dir

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        self.calls += 1
        if self.calls > self.good:
            raise gputop.DriverCrashed("DRIVER CRASHED (SIGSEGV in libnvidia-ml)")
        return self.inner.pid_memory(pids)


def test_a_crash_during_a_cell_ends_its_line_and_the_cell_runs_on(
    nb: Notebook,
) -> None:
    inner = nb.monitor.source
    nb.monitor.source = CrashesAfter(inner, good=2)  # the probe and the cell's start read
    line = nb.line("import time; time.sleep(0.2)\nz = 5")
    assert line.endswith(" | GPU read failed: DRIVER CRASHED (SIGSEGV in libnvidia-ml)"), line
    assert "GPU0 +0 MiB (peak≥ +0 MiB sampled) = 1000 MiB" in line  # what was read before the crash
    assert nb.shell.user_ns["z"] == 5
