"""%load_ext gputop in a real InteractiveShell: a line per cell, summary, on/off, brief/full."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from gputop import notebook, sim
from gputop.engine.model import Snapshot
from gputop.engine.source import SourceBase
from tests.notebook.conftest import Notebook, memory_scenario
from tests.test_api import OffsetClock, loaded_modules

LINE = re.compile(r"^\[gputop\] In \[(\d+)\] (\d+\.\d\d) s \| (.*)$")


def parts(line: str) -> tuple[int, float, list[str]]:
    """(cell number, seconds, the " | "-separated parts after the time)."""
    m = LINE.match(line)
    assert m, line
    return int(m[1]), float(m[2]), m[3].split(" | ")


def test_import_gputop_does_not_load_ipython_or_the_extension() -> None:
    loaded = loaded_modules("import gputop; gputop.__version__; gputop.load_ipython_extension")
    assert not {"IPython", "gputop.notebook", "gputop.api"} & loaded
    loaded = loaded_modules("import gputop.notebook")
    assert not {"IPython", "torch", "pynvml"} & loaded


def test_a_cell_that_allocates_shows_the_step_per_gpu(nb: Notebook) -> None:
    number, seconds, fields = parts(nb.line("clock.set(10.0)\nsettle()"))
    assert number == 1  # %load_ext ran outside the history
    assert 0 <= seconds < 10
    # the sim's GPUs have 80 GiB; GPU 0 also holds 7 MiB of another process
    assert fields[0] == (
        "GPU0 +4000 MiB (peak≥ +4000 MiB sampled) = 5000 MiB, 74.6 GiB free;"
        " GPU1 +0 MiB (peak≥ +0 MiB sampled) = 300 MiB, 79.2 GiB free"
    )
    assert fields[1].startswith("RSS ")
    assert len(fields) == 2  # no torch loaded: no torch part
    record = nb.monitor.records[-1]
    assert record.report.process is not None
    assert record.report.process.delta_bytes == 4000 * 1024**2
    assert record.source == "clock.set(10.0)" and record.error is None


def test_a_cell_reads_only_the_process_lists_and_still_shows_the_delta(nb: Notebook) -> None:
    """The line's readings are the light ones: no whole snapshot (power, clocks...) per cell."""
    lib = sim.active()
    assert lib is not None
    nb.run("x = 1")  # the probe, before the first cell, is behind us
    before = dict(lib.calls)
    _, _, fields = parts(nb.line("clock.set(10.0)\nsettle()"))
    assert fields[0].startswith("GPU0 +4000 MiB (peak≥ +4000 MiB sampled) = 5000 MiB")
    made = {k for k, n in lib.calls.items() if n != before.get(k, 0)}
    assert made == {
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetMemoryInfo",  # the free memory of each GPU the process uses
    }
    assert (
        lib.calls["nvmlDeviceGetComputeRunningProcesses_v3"]
        >= before["nvmlDeviceGetComputeRunningProcesses_v3"] + 2 * 4
    )  # start, end and at least two samples (settle), on both GPUs


def test_full_takes_whole_snapshots_for_its_per_gpu_table(nb: Notebook) -> None:
    nb.run("%gputop full")
    nb.printed()
    nb.run("clock.set(10.0)")
    lines = nb.printed()
    assert any(x.startswith("GPU 0 (all processes)") and "5007 MiB" in x for x in lines)


def test_a_step_is_seen_even_without_waiting_for_the_sampler(nb: Notebook) -> None:
    """The end reading is taken after the cell: the delta never depends on the sampler's luck."""
    _, _, fields = parts(nb.line("clock.set(10.0)"))
    assert fields[0].startswith("GPU0 +4000 MiB (peak≥ +4000 MiB sampled) = 5000 MiB")


def test_a_cell_that_raises_still_gets_its_line_and_keeps_its_error(nb: Notebook) -> None:
    nb.printed()
    result = nb.run("clock.set(10.0)\nraise ValueError('boom')")
    assert not result.success
    assert isinstance(result.error_in_exec, ValueError)
    assert result.error_in_exec.args == ("boom",)
    line = next(x for x in nb.printed() if x.startswith("[gputop] In ["))
    _, _, fields = parts(line)
    assert fields[0].startswith("GPU0 +4000 MiB (peak≥ +4000 MiB sampled)")
    assert fields[-1] == "raised ValueError"
    assert nb.monitor.records[-1].error == "ValueError"
    assert nb.run("1 + 1").success  # the shell goes on as usual


def test_a_long_cell_catches_a_peak_gone_before_it_ends(
    nb: Notebook, sim_source: Callable[..., Any]
) -> None:
    clock = OffsetClock()
    source, _ = sim_source(memory_scenario(0.3, 0.7, second_gpu=False), clock)
    nb.monitor.source = source
    nb.shell.user_ns["spike"] = clock
    cell = "import time\nspike.start()\nwhile spike.now() < 1.0:\n    time.sleep(0.005)"
    _, seconds, fields = parts(nb.line(cell))
    assert seconds >= 1.0
    assert fields[0].startswith("GPU0 +0 MiB (peak≥ +4000 MiB sampled) = 1000 MiB, ")
    trace = nb.monitor.records[-1].report.process
    assert trace is not None and 0.25 <= trace.peak_at_s <= 0.9


def test_host_rss_delta_and_peak(nb: Notebook) -> None:
    keep = nb.line("kept = b'x' * (200 * 2**20)\nsettle()")
    gone = nb.line("tmp = b'y' * (300 * 2**20)\nsettle()\ndel tmp, kept")
    rss_keep = parts(keep)[2][1]
    rss_gone = parts(gone)[2][1]
    m = re.fullmatch(r"RSS \+(\d+) MiB \(peak \+(\d+) MiB exact\)", rss_keep)
    assert m and 195 <= int(m[1]) <= 230 and int(m[2]) >= int(m[1])
    m = re.fullmatch(r"RSS (-\d+|\+\d+) MiB \(peak \+(\d+) MiB exact\)", rss_gone)
    assert m and int(m[1]) <= -150 and 290 <= int(m[2]) <= 330


def test_summary_puts_the_top_memory_eaters_first(nb: Notebook) -> None:
    nb.run("x = 1")
    nb.run("clock.set(10.0)")
    nb.run("clock.set(0.0)")
    nb.printed()
    nb.run("%gputop summary")
    lines = nb.printed()
    assert lines[0] == "[gputop] 3 cells, the top memory eaters first"
    head = lines[1].split()
    assert head[:4] == ["cell", "time", "GPU", "delta"]
    rows = lines[2:]
    assert sorted(r.split()[0] for r in rows) == ["[1]", "[2]", "[3]"]
    assert rows[0].startswith("[2] clock.set(10.0)")  # the top eater, though not the first cell
    columns = {r.split()[0]: re.split(r"\s{2,}", r) for r in rows}
    assert columns["[2]"][0] == "[2] clock.set(10.0)"
    assert columns["[2]"][2:4] == ["+4000 MiB", "+4000 MiB"]  # GPU delta, GPU peak+
    assert columns["[3]"][2:4] == ["-4000 MiB", "+0 MiB"]
    assert columns["[1]"][2:4] == ["+0 MiB", "+0 MiB"]
    assert nb.monitor.summary() == "\n".join(lines)
    assert len(nb.monitor.records) == 3  # %gputop cells are not recorded


def test_off_and_on(nb: Notebook) -> None:
    nb.run("%gputop off")
    assert nb.printed() == ["[gputop] off"]
    nb.run("clock.set(10.0)")
    assert nb.printed() == [] and nb.monitor.records == []
    nb.run("%gputop on")
    assert nb.printed() == ["[gputop] on (brief)"]
    assert parts(nb.line("clock.set(0.0)"))[2][0].startswith(
        "GPU0 -4000 MiB (peak≥ +0 MiB sampled)"
    )


def test_full_adds_a_table_per_cell_and_brief_goes_back(nb: Notebook) -> None:
    nb.run("%gputop full")
    nb.printed()
    nb.run("clock.set(10.0)")
    lines = nb.printed()
    assert lines[0].startswith("[gputop] In [2] ")
    assert lines[1].startswith("gputop.track 'In [2]': ")
    assert any(x.startswith("  on GPU 0 ") and "+4000 MiB" in x for x in lines)
    assert any(x.startswith("host RSS (this process)") for x in lines)
    nb.run("%gputop brief")
    nb.printed()
    nb.run("x = 2")
    assert len(nb.printed()) == 1


def test_unknown_command_prints_usage(nb: Notebook) -> None:
    nb.run("%gputop what")
    assert nb.printed()[0].startswith("%gputop on | off | brief | full | summary | reclaim")


def test_reclaim_without_torch(nb: Notebook) -> None:
    nb.run("%gputop reclaim")
    line = nb.printed()[0]
    assert line.startswith("[gputop] reclaim: gc.collect() found ")
    assert "torch not in use" in line
    assert "GPU (NVML) 1300 MiB -> 1300 MiB (+0 MiB)" in line


class NoDriver(SourceBase):
    """A source without a GPU: every read fails, as NVML does on a machine without one."""

    simulated = True
    dev_dir = os.devnull  # no box: no device files to read

    def __init__(self) -> None:
        self.calls = 0

    def snapshot(self) -> Snapshot:
        self.calls += 1
        raise RuntimeError("NVML Shared Library Not Found")

    def close(self) -> None:
        pass


def test_without_a_gpu_it_tracks_the_host_only(nb: Notebook) -> None:
    driver = NoDriver()
    nb.monitor.source = driver  # type: ignore[assignment]
    nb.monitor.gpu = None  # probe again
    nb.printed()
    nb.run("x = b'z' * (50 * 2**20)")
    lines = nb.printed()
    assert lines[0] == (
        "[gputop] no GPU readings (NVML Shared Library Not Found); tracking host memory only"
    )
    _, _, fields = parts(lines[1])
    assert fields[0] == "GPU n/a" and fields[1].startswith("RSS +")
    nb.run("y = 1")
    assert len(nb.printed()) == 1 and driver.calls == 1  # probed once, never read again


def test_load_twice_is_one_monitor_and_unload_stops_the_lines(
    shell: InteractiveShell, nb: Notebook
) -> None:
    shell.run_cell("%load_ext gputop")
    assert notebook.monitor_of(shell) is nb.monitor
    shell.run_cell("%unload_ext gputop")
    assert notebook.monitor_of(shell) is None
    nb.printed()
    shell.run_cell("x = 1")
    assert nb.printed() == []
    assert not shell.run_cell("%gputop summary").success  # the magic is gone


def test_overhead_of_a_tracked_cell_is_small(nb: Notebook) -> None:
    """Sanity bound (bench/bench_notebook.py has the numbers): start + end reads and a thread."""
    t0 = time.perf_counter()
    for _ in range(20):
        nb.run("x = 1")
    per_cell = (time.perf_counter() - t0) / 20
    assert per_cell < 0.05
    assert len(nb.monitor.records) == 20


@pytest.mark.parametrize("cell", ["%gputop summary", "%gputop off\n%gputop on"])
def test_magic_only_cells_are_not_tracked(nb: Notebook, cell: str) -> None:
    nb.run(cell)
    assert nb.monitor.records == []


def test_the_shell_fixture_leaves_no_trace_of_ipython() -> None:
    """Runs after the tests above (file order): builtins and __main__ are the test runner's."""
    import builtins
    import sys

    assert not hasattr(builtins, "get_ipython") and not hasattr(builtins, "__IPYTHON__")
    assert type(sys.modules["__main__"]).__name__ == "module"
    assert InteractiveShell.initialized() is False


def test_experiment_and_preload_are_wired_to_their_modules(nb: Notebook) -> None:
    nb.printed()
    nb.run("%gputop experiment status")
    assert nb.printed()[0].startswith("[gputop] no experiment running")
    nb.run("%gputop experiment start demo")
    nb.run("grown = b'g' * (20 * 2**20)")
    nb.printed()
    nb.run("%gputop experiment end")
    assert "grown" not in nb.shell.user_ns  # what the experiment made is deleted at its end
    assert nb.printed()[0].startswith("[gputop] experiment")
    nb.run("%gputop preload")
    assert len(nb.printed()) == 1  # one line (no torch here: it says so)
