"""Exact peaks: the kernel's peak RSS per cell and block, torch's own peak per GPU."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

import gputop
from gputop import host_memory, sim
from gputop.engine.source import SourceBase
from tests.notebook.conftest import FakeCuda, Notebook, install_fake_torch, memory_scenario
from tests.notebook.test_cells import parts

MiB = 1024**2
TRANSIENT = "y = bytearray(200 * 2**20); del y; time.sleep(0.3)"  # the cell
RSS = re.compile(r"RSS ([-+]\d+) MiB \(peak(≥?) \+(\d+) MiB (exact|sampled)\)")


def rss_part(fields: list[str]) -> tuple[int, int, str]:
    """(delta MiB, peak rise MiB, kind) of a cell line's RSS part."""
    m = next(m for f in fields if (m := RSS.fullmatch(f)))
    assert (m[2] == "≥") == (m[4] == "sampled")  # a sampled peak says it is a lower bound
    return int(m[1]), int(m[3]), m[4]


@pytest.fixture
def no_exact_peaks(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a kernel without /proc/self/clear_refs (or without the right to write it)."""
    monkeypatch.setattr(host_memory, "_CLEAR_REFS", "/proc/self/no-such-file")
    monkeypatch.setattr(host_memory, "_supported", None)


@pytest.fixture
def slow_sampler(nb: Notebook) -> Notebook:
    """No sample during a cell: only the start and end reads (and the kernel's peak)."""
    nb.monitor.interval_s = 60.0
    nb.shell.user_ns["time"] = time
    return nb


def test_the_transient_cell_reports_its_peak_ten_times_out_of_ten(slow_sampler: Notebook) -> None:
    for _ in range(10):
        delta, rise, kind = rss_part(parts(slow_sampler.line(TRANSIENT))[2])
        assert kind == "exact"
        assert 195 <= rise <= 215, rise
        assert abs(delta) < 20
        record = slow_sampler.monitor.records[-1]
        assert record.report.host_peak_kind == "exact"


def test_without_the_kernels_counter_the_peak_is_sampled_and_says_so(
    slow_sampler: Notebook, no_exact_peaks: None
) -> None:
    _, rise, kind = rss_part(parts(slow_sampler.line(TRANSIENT))[2])
    assert kind == "sampled"
    assert rise < 20  # no sample saw it: this is what the kernel's counter fixes
    assert host_memory.exact_peaks() is False
    assert slow_sampler.monitor.records[-1].as_dict()["host_peak_kind"] == "sampled"


def test_a_track_inside_a_cell_keeps_the_cells_peak(slow_sampler: Notebook) -> None:
    """The inner block resets the kernel's counter; the outer one's peak is folded in first."""
    cell = (
        "y = bytearray(300 * 2**20); del y\n"
        "import gputop\n"
        "with gputop.track('inner', gpu=False, interval_s=60) as inner:\n"
        "    z = bytearray(100 * 2**20); del z\n"
    )
    _, rise, kind = rss_part(parts(slow_sampler.line(cell))[2])
    assert kind == "exact" and 295 <= rise <= 330, rise
    inner = slow_sampler.shell.user_ns["inner"].report
    assert inner.host_peak_kind == "exact"
    assert inner.host_rss is not None
    assert 95 <= (inner.host_rss.peak_bytes - inner.host_rss.start_bytes) // MiB <= 120


def test_overlapping_blocks_each_keep_their_own_peak(no_torch: None) -> None:
    outer = gputop.track("outer", gpu=False, interval_s=60)
    outer.__enter__()
    data = bytearray(150 * MiB)
    del data
    with gputop.track("a", gpu=False, interval_s=60) as a:
        pass
    with gputop.track("b", gpu=False, interval_s=60) as b:
        more = bytearray(50 * MiB)
        del more
    outer.__exit__(None, None, None)

    def rise(t: gputop.tracking.Tracker) -> int:
        trace = t.report.host_rss
        assert trace is not None
        return (trace.peak_bytes - trace.start_bytes) // MiB

    assert 145 <= rise(outer) <= 170
    assert rise(a) < 10  # a started after the 150 MiB were gone
    assert 45 <= rise(b) <= 60


def test_gputop_resets_the_processes_peak_rss(no_torch: None) -> None:
    """What the docs say: VmHWM (and ru_maxrss, which follows it) restart at each block."""
    big = bytearray(200 * MiB)
    del big
    before = host_memory.peak_rss_bytes()
    with gputop.track(gpu=False, interval_s=60):
        pass
    after = host_memory.peak_rss_bytes()
    assert before is not None and after is not None
    assert after <= before - 150 * MiB


class SlowToOpen(SourceBase):
    """A source whose first read takes 0.4 s and 80 MiB (imports, a driver process starting)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.simulated, self.dev_dir = inner, True, inner.dev_dir
        self.opened = False
        self.kept: list[bytes] = []

    def snapshot(self) -> Any:
        if not self.opened:
            self.opened = True
            time.sleep(0.4)
            self.kept.append(b"i" * (80 * MiB))  # stays, as imported modules do
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


def test_the_first_stage_is_not_charged_gputops_start_up(
    sim_source: Callable[..., Any], no_torch: None
) -> None:
    inner, _ = sim_source(memory_scenario(second_gpu=False))
    source = SlowToOpen(inner)
    with gputop.stages(interval_s=0.01, source=source) as s:
        with s("first"):
            pass
        with s("second"):
            pass
    first = s.reports[0]
    assert first.duration_s < 0.2
    assert first.host_rss is not None and first.host_rss.delta_bytes < 20 * MiB
    assert first.host_rss.peak_bytes - first.host_rss.start_bytes < 20 * MiB
    assert first.process is not None and first.process.delta_bytes == 0
    assert source.opened


def test_a_track_is_not_charged_gputops_start_up(
    sim_source: Callable[..., Any], no_torch: None
) -> None:
    inner, _ = sim_source(memory_scenario(second_gpu=False))
    with gputop.track(interval_s=0.01, source=SlowToOpen(inner)) as t:
        pass
    assert t.report.duration_s < 0.2
    assert t.report.host_rss is not None and t.report.host_rss.delta_bytes < 20 * MiB


# -- GPU peaks: torch's own, on every device it uses ------------------------------------------


@pytest.fixture
def two_gpus(
    nb: Notebook, monkeypatch: pytest.MonkeyPatch, sim_source: Callable[..., Any]
) -> FakeCuda:
    """torch on both GPUs of memory_scenario (CUDA i = NVML i); its counters start at 0."""
    cuda = install_fake_torch(monkeypatch, FakeCuda(devices=2))
    nb.shell.user_ns["cuda"] = cuda
    return cuda


def gpu_parts(line: str) -> dict[str, str]:
    """{"GPU0": its part of the line, ...}."""
    return {p.split()[0]: p for p in parts(line)[2][0].split("; ")}


def test_a_peak_between_samples_on_the_second_device_is_exact(
    slow_sampler: Notebook, two_gpus: FakeCuda
) -> None:
    line = slow_sampler.line("cuda.alloc(4000, device=1)\ncuda.free(4000, device=1)")
    gpus = gpu_parts(line)
    # NVML (the sim does not follow torch) saw 300 MiB throughout; torch reserved 4000 more
    assert gpus["GPU1"].startswith("GPU1 +0 MiB (peak +4000 MiB exact) = 300 MiB, ")
    assert gpus["GPU1"].endswith(", torch reclaimable 4000 MiB")
    assert gpus["GPU0"].startswith("GPU0 +0 MiB (peak +0 MiB exact) = 1000 MiB, ")
    assert two_gpus.resets_by == [1, 1]  # each device's peak reset at the cell's start
    record = slow_sampler.monitor.records[-1].as_dict()
    assert record["gpu1_peak_rise_bytes"] == 4000 * MiB
    assert record["gpu1_peak_kind"] == "exact"
    assert record["gpu1_torch_reclaimable_bytes"] == 4000 * MiB
    assert record["gpu_peak_kind"] == "sampled"  # two GPUs: their peaks need not coincide


def test_the_second_cell_has_its_own_peak(slow_sampler: Notebook, two_gpus: FakeCuda) -> None:
    slow_sampler.run("cuda.alloc(4000, device=1)\ncuda.free(4000, device=1)")
    two_gpus.empty_cache()
    line = slow_sampler.line("cuda.alloc(10, device=1)\ncuda.free(10, device=1)")
    assert gpu_parts(line)["GPU1"].startswith("GPU1 +0 MiB (peak +10 MiB exact)")


def test_a_gpu_torch_does_not_hold_is_sampled(slow_sampler: Notebook, fake_torch: FakeCuda) -> None:
    """torch on CUDA device 0 only: GPU 1's peak is NVML's, sampled."""
    slow_sampler.shell.user_ns["cuda"] = fake_torch
    gpus = gpu_parts(slow_sampler.line("cuda.alloc(100)\ncuda.free(100)"))
    assert gpus["GPU0"].startswith("GPU0 +0 MiB (peak +100 MiB exact)")
    assert gpus["GPU1"].startswith("GPU1 +0 MiB (peak≥ +0 MiB sampled)")
    assert "torch reclaimable" not in gpus["GPU0"]  # one torch device: the torch part says it


def test_nvml_above_torch_keeps_the_sampled_peak(nb: Notebook, fake_torch: FakeCuda) -> None:
    """Something besides torch took memory (NVML's step): that peak, sampled, not torch's."""
    nb.shell.user_ns["cuda"] = fake_torch
    gpus = gpu_parts(nb.line("cuda.alloc(100)\nclock.set(10.0)\nsettle()"))
    assert gpus["GPU0"].startswith("GPU0 +4000 MiB (peak≥ +4000 MiB sampled)")


def test_cuda_visible_devices_maps_torchs_device_to_its_gpu(
    nb: Notebook, sim_source: Callable[..., Any], sim_clock: sim.ManualClock, fake_torch: FakeCuda
) -> None:
    """CUDA_VISIBLE_DEVICES=1: torch's device 0 is NVML's GPU 1."""
    source, _ = sim_source(memory_scenario(), CUDA_VISIBLE_DEVICES="1")
    nb.monitor.source = source
    nb.monitor.interval_s = 60.0
    nb.shell.user_ns["cuda"] = fake_torch
    gpus = gpu_parts(nb.line("cuda.alloc(700)\ncuda.free(700)"))
    assert gpus["GPU1"].startswith("GPU1 +0 MiB (peak +700 MiB exact)")
    assert gpus["GPU0"].startswith("GPU0 +0 MiB (peak≥ +0 MiB sampled)")
    assert nb.monitor.records[-1].report.cuda_to_gpu == {0: 1}


def test_a_device_first_used_during_the_block_starts_at_zero(
    sim_source: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    cuda = install_fake_torch(monkeypatch, FakeCuda(devices=2))
    cuda.alloc(100)  # device 0 in use; device 1 not yet
    source, _ = sim_source(memory_scenario())
    with gputop.track(interval_s=60, source=source, devices=False) as t:
        cuda.alloc(900, device=1)
        cuda.free(400, device=1)
    by_device = t.report.torch_by_device
    assert set(by_device) == {0, 1}
    late = by_device[1]
    assert (late.allocated.start_bytes, late.allocated.end_bytes) == (0, 500 * MiB)
    assert late.allocated.peak_bytes == 900 * MiB and late.reserved.peak_bytes == 900 * MiB
    total = t.report.torch
    assert total is not None and total.allocated.end_bytes == 600 * MiB
    assert t.report.process_peak_kinds == {0: "exact", 1: "exact"}


def test_the_context_is_never_negative(nb: Notebook, fake_torch: FakeCuda) -> None:
    """torch reserved 3000 MiB while NVML says the process holds 1300: say they disagree."""
    nb.shell.user_ns["cuda"] = fake_torch
    _, _, fields = parts(nb.line("cuda.alloc(3000)"))
    assert fields[2].endswith(", context n/a: torch reserved > NVML")
    record = nb.monitor.records[-1]
    assert record.report.context_overhead_bytes is None
    assert record.report.torch_above_nvml
    assert "n/a: torch reserved > NVML" in record.report.summary()
    assert record.as_dict()["context_overhead_bytes"] is None
