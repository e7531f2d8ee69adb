"""gputop.stages(): fastai's memory per stage, from a script."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

import gputop
from gputop import sim
from gputop.engine.source import SourceBase
from tests.notebook.conftest import FakeCuda, memory_scenario

MiB = 1024**2


def columns(row: str) -> list[str]:
    return re.split(r"\s{2,}", row)


def test_a_table_per_stage(
    sim_source: Callable[..., Any], sim_clock: sim.ManualClock, no_torch: None
) -> None:
    source, _ = sim_source(memory_scenario(10.0, 20.0, second_gpu=False))
    with gputop.stages(interval_s=0.01, source=source) as s:
        with s("load"):
            pass
        with s("train head") as t:
            sim_clock.set(10.0)
            seen = t.samples
            while t.samples < seen + 2:
                pass
        with s("free"):
            sim_clock.set(20.0)
    assert [r.label for r in s.reports] == ["load", "train head", "free"]
    lines = str(s).splitlines()
    assert lines[0] == "gputop.stages"
    assert columns(lines[1]) == [
        "stage",
        "time",
        "GPU delta",
        "GPU peak+",
        "RSS delta",
        "RSS peak+",
    ]
    rows = {columns(x)[0]: columns(x) for x in lines[2:]}
    assert list(rows) == ["load", "train head", "free"]
    assert rows["load"][2:4] == ["+0 MiB", "+0 MiB"]
    assert rows["train head"][2:4] == ["+4000 MiB", "+4000 MiB"]
    assert rows["free"][2:4] == ["-4000 MiB", "+0 MiB"]


def test_a_stage_that_raises_is_still_reported(
    sim_source: Callable[..., Any], sim_clock: sim.ManualClock, no_torch: None
) -> None:
    source, _ = sim_source(memory_scenario(second_gpu=False))
    s = gputop.stages(source=source)

    def stage() -> None:
        with s("boom"):
            sim_clock.set(10.0)
            raise KeyError("x")

    with pytest.raises(KeyError):
        stage()
    assert [r.label for r in s.reports] == ["boom"]
    assert s.reports[0].process is not None
    assert s.reports[0].process.delta_bytes == 4000 * MiB


def test_stages_with_torch_have_torch_columns(
    sim_source: Callable[..., Any], fake_torch: FakeCuda
) -> None:
    source, _ = sim_source(memory_scenario(second_gpu=False))
    with gputop.stages(source=source) as s:
        with s("model"):
            fake_torch.alloc(500)
        with s("batch"):
            fake_torch.alloc(1500)
            fake_torch.free(1500)
    lines = str(s).splitlines()
    assert columns(lines[1])[-4:] == ["alloc delta", "alloc peak", "reserved", "reclaimable"]
    model, batch = (columns(x) for x in lines[2:])
    assert model[-4:] == ["+500 MiB", "500 MiB", "500 MiB", "0 MiB"]
    assert batch[-4:] == ["+0 MiB", "2000 MiB", "2000 MiB", "1500 MiB"]


def test_stages_without_a_gpu(no_torch: None) -> None:
    s = gputop.stages(gpu=False)
    with s("host only"):
        data = b"q" * (64 * MiB)
    del data
    row = columns(str(s).splitlines()[2])
    assert row[2:4] == ["n/a", "n/a"]
    assert row[4].startswith("+") and int(row[4].split()[0]) >= 60


class CostlySource(SourceBase):
    """Each read burns ``cost_s`` of CPU in this thread (as a slow driver or many GPUs would)."""

    def __init__(self, inner: Any, cost_s: float) -> None:
        self.inner, self.cost_s, self.calls = inner, cost_s, 0
        self.simulated, self.dev_dir = True, inner.dev_dir

    def snapshot(self) -> Any:
        self.calls += 1
        t0 = time.thread_time()
        while time.thread_time() - t0 < self.cost_s:
            pass
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


@pytest.mark.parametrize(("max_share", "most"), [(None, 10_000), (0.1, 14)])
def test_max_share_spaces_out_costly_reads(
    sim_source: Callable[..., Any], no_torch: None, max_share: float | None, most: int
) -> None:
    inner, _ = sim_source(memory_scenario(second_gpu=False))
    source = CostlySource(inner, 0.005)
    with gputop.track(interval_s=0.001, source=source, max_share=max_share):
        time.sleep(0.5)
    # 5 ms reads at most 10 % of the time: one per 50 ms or so, not one per ms
    assert source.calls <= most
    if max_share is None:
        assert source.calls >= 40


def test_a_wide_stage_name_keeps_the_columns_in_line(
    sim_source: Callable[..., Any], no_torch: None
) -> None:
    """A CJK label takes two cells a character: the time column starts in one place on screen."""
    from rich.cells import cell_len

    source, _ = sim_source(memory_scenario(second_gpu=False))
    with gputop.stages(interval_s=0.01, source=source) as s:
        with s("训练训练训练"):  # 6 characters, 12 cells: wider than the header
            pass
        with s("eval"):
            pass
    lines = str(s).splitlines()[1:]
    ends = {cell_len(line[: line.index(" s")]) for line in lines[1:]}  # where each time ends
    assert len(ends) == 1, lines
