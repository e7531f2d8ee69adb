"""The torch split with a stand-in "torch": allocated / reserved / reclaimable, peak, context."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import gputop
from gputop import sim
from tests.notebook.conftest import FakeCuda, Notebook, memory_scenario
from tests.notebook.test_cells import parts

MiB = 1024**2


def test_the_line_has_the_torch_split_and_the_context_overhead(
    nb: Notebook, fake_torch: FakeCuda
) -> None:
    nb.shell.user_ns["cuda"] = fake_torch
    fake_torch.alloc(200)
    _, _, fields = parts(nb.line("cuda.alloc(600)\ncuda.free(300)"))
    # NVML: this process holds 1300 MiB (1000 + 300); torch reserved 800 of it
    assert fields[2] == (
        "torch alloc +300 MiB = 500 MiB (peak 800 MiB), reserved 800 MiB, reclaimable 300 MiB,"
        " context 500 MiB"
    )


def test_the_peak_is_the_allocators_own_and_reset_per_cell(
    nb: Notebook, fake_torch: FakeCuda
) -> None:
    nb.shell.user_ns["cuda"] = fake_torch
    # a peak between two samples: only the allocator's counter knows it
    first = parts(nb.line("cuda.alloc(4000)\ncuda.free(4000)"))[2][2]
    assert first.startswith("torch alloc +0 MiB = 0 MiB (peak 4000 MiB)")
    second = parts(nb.line("cuda.alloc(10)\ncuda.free(10)"))[2][2]
    assert second.startswith("torch alloc +0 MiB = 0 MiB (peak 10 MiB)")  # not 4000 again
    assert fake_torch.resets == 2


def test_an_uninitialised_torch_is_left_alone(nb: Notebook, fake_torch: FakeCuda) -> None:
    """No CUDA context yet: no torch figures, and nothing that would create one."""
    fake_torch.initialised = False
    _, _, fields = parts(nb.line("x = 1"))
    assert len(fields) == 2 and not any(f.startswith("torch") for f in fields)
    assert fake_torch.resets == 0


def test_summary_has_torch_columns(nb: Notebook, fake_torch: FakeCuda) -> None:
    nb.shell.user_ns["cuda"] = fake_torch
    nb.run("cuda.alloc(100)")
    nb.run("cuda.alloc(2000)\ncuda.free(2000)")
    text = nb.monitor.summary().splitlines()
    assert text[1].split()[-6:] == ["alloc", "delta", "alloc", "peak", "reserved", "reclaimable"]
    assert text[2].startswith("[2] cuda.alloc(2000)")  # the bigger torch peak first
    assert text[2].split()[-8:] == ["+0", "MiB", "2100", "MiB", "2100", "MiB", "2000", "MiB"]


def test_reclaim_empties_the_cache_and_says_what_came_back(
    nb: Notebook, fake_torch: FakeCuda
) -> None:
    fake_torch.alloc(3000)
    fake_torch.free(2000)
    nb.printed()
    nb.run("%gputop reclaim")
    line = nb.printed()[0]
    assert fake_torch.empty_caches == 1
    assert "torch reserved 3000 MiB -> 1000 MiB (-2000 MiB)" in line
    assert "GPU (NVML) 1300 MiB -> 1300 MiB (+0 MiB)" in line  # the sim does not follow torch


def test_reclaim_leaves_an_uninitialised_torch_alone(nb: Notebook, fake_torch: FakeCuda) -> None:
    fake_torch.initialised = False
    nb.run("%gputop reclaim")
    assert fake_torch.empty_caches == 0
    assert "torch not in use" in nb.printed()[-1]


def test_track_from_a_script_has_the_torch_split(
    sim_source: Callable[..., Any], sim_clock: sim.ManualClock, fake_torch: FakeCuda
) -> None:
    source, _ = sim_source(memory_scenario(second_gpu=False))
    fake_torch.alloc(700)
    with gputop.track("train", interval_s=0.01, source=source) as t:
        fake_torch.alloc(100)
        fake_torch.free(500)
    r = t.report
    assert r.torch is not None
    assert (r.torch.allocated.start_bytes, r.torch.allocated.end_bytes) == (700 * MiB, 300 * MiB)
    assert r.torch.allocated.peak_bytes == 800 * MiB
    assert r.torch.reserved.end_bytes == 800 * MiB and r.torch.reclaimable_bytes == 500 * MiB
    assert r.context_overhead_bytes == 200 * MiB  # 1000 MiB in NVML - 800 reserved
    text = str(t)
    assert "torch allocated" in text and "torch reserved" in text
    assert "CUDA context (NVML-torch)" in text and "  200 MiB" in text


def test_track_of_other_pids_has_no_torch_or_rss(
    sim_source: Callable[..., Any], fake_torch: FakeCuda
) -> None:
    source, _ = sim_source(memory_scenario(second_gpu=False))
    with gputop.track("them", pids=[1], source=source) as t:
        pass
    assert t.report.torch is None and t.report.host_rss is None
    assert t.report.context_overhead_bytes is None
    assert fake_torch.resets == 0


def test_torch_is_never_imported(nb: Notebook) -> None:
    nb.run("x = 1")
    nb.run("%gputop reclaim")
    assert "torch" not in sys.modules
