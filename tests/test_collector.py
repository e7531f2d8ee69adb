"""gputop.Collector on the simulator with a hand-moved clock: known readings in, known
mean/min/max/last out; MIG; a lost GPU's readings absent (never zeros); failures counted."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import gputop
from gputop import sim
from gputop.engine.model import Snapshot
from tests.conftest import FixedTimeSource, shipped

MiB = 1024**2
Sim = Callable[..., tuple[Any, sim.SimLibrary]]


def stepping() -> dict[str, Any]:
    """GPU 0 steps up at 10 s; GPU 1 falls off the bus at 15 s; this process on GPU 0."""
    return {
        "name": "stepping",
        "gpu": [
            {
                "util_gpu": {"base": 20, "step_at": 10, "step_to": 80},
                "temperature_c": {"base": 50, "step_at": 10, "step_to": 71},
                "power_w": {"base": 100, "step_at": 10, "step_to": 250},
                "clock_sm_mhz": 1500,
                "processes": [
                    {
                        "pid": os.getpid(),
                        "used_memory_mib": {"base": 1000, "step_at": 10, "step_to": 4000},
                    },
                    {"pid": 1, "used_memory_mib": 500},
                ],
            },
            {"util_gpu": 33, "lost_after_s": 15},
        ],
    }


def sample_at(collector: gputop.Collector, clock: sim.ManualClock, *times: float) -> None:
    for t in times:
        clock.set(t)
        assert collector.sample()


def test_known_readings_give_known_mean_min_max_last(
    sim_source: Sim, sim_clock: sim.ManualClock
) -> None:
    source, _ = sim_source(stepping())
    collector = gputop.Collector(source=source)
    sample_at(collector, sim_clock, 0.0, 10.0, 12.0, 14.0)  # 20, 80, 80, 80
    out = collector.collect()
    assert out["gpu0/utilization_gpu_percent/mean"] == 65.0
    assert out["gpu0/utilization_gpu_percent/min"] == 20
    assert out["gpu0/utilization_gpu_percent/max"] == 80
    assert out["gpu0/utilization_gpu_percent/last"] == 80
    assert out["gpu0/temperature_c/mean"] == pytest.approx((50 + 3 * 71) / 4)
    assert (out["gpu0/power_draw_w/min"], out["gpu0/power_draw_w/max"]) == (100.0, 250.0)
    assert out["gpu0/clock_sm_mhz/mean"] == 1500
    # this process's own memory, apart from the other process's 500 MiB
    assert out["gpu0/process_memory_bytes/min"] == 1000 * MiB
    assert out["gpu0/process_memory_bytes/max"] == 4000 * MiB
    assert out["gpu1/process_memory_bytes/max"] == 0  # listed there: it uses none
    assert out["host/process_rss_bytes/last"] > 0
    assert out["gpu1/utilization_gpu_percent/mean"] == 33
    assert out["collector/samples"] == 4 and out["collector/read_errors"] == 0


def test_collect_starts_a_new_window(sim_source: Sim, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source(stepping())
    collector = gputop.Collector(source=source, tag="resources")
    sample_at(collector, sim_clock, 0.0)
    first = collector.collect()
    assert first["resources/gpu0/utilization_gpu_percent/mean"] == 20
    assert all(key.startswith("resources/") for key in first)
    empty = collector.collect()  # nothing read since: no readings, not the old ones
    assert set(empty) == {
        "resources/collector/samples",
        "resources/collector/read_errors",
        "resources/collector/window_s",
    }
    sample_at(collector, sim_clock, 10.0)
    assert collector.collect()["resources/gpu0/utilization_gpu_percent/min"] == 80


def test_a_lost_gpu_readings_are_absent_not_zeros(
    sim_source: Sim, sim_clock: sim.ManualClock
) -> None:
    source, _ = sim_source(stepping())
    collector = gputop.Collector(source=source)
    sample_at(collector, sim_clock, 0.0, 16.0, 17.0)  # GPU 1 answers only the first
    out = collector.collect()
    assert out["gpu1/utilization_gpu_percent/min"] == 33  # a lost reading is not a 0
    assert out["gpu1/utilization_gpu_percent/last"] == 33
    sample_at(collector, sim_clock, 18.0, 19.0)
    out = collector.collect()
    assert not [key for key in out if key.startswith("gpu1/")]
    assert out["gpu0/utilization_gpu_percent/mean"] == 80
    assert out["collector/samples"] == 2


def test_mig_devices_have_their_own_keys(sim_source: Sim, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source(shipped("mig"))
    collector = gputop.Collector(source=source)
    sample_at(collector, sim_clock, 0.0, 1.0)
    out = collector.collect()
    mig = [
        key.split("/")[1] for key in out if key.endswith("/memory_used_bytes/mean") and "mig" in key
    ]
    assert sorted(mig) == ["mig1.0", "mig13.0", "mig14.0", "mig5.0"]  # keys sorted as text
    used = out["gpu0/mig1.0/memory_used_bytes/mean"]
    assert (
        used + out["gpu0/mig1.0/memory_free_bytes/mean"]
        <= out["gpu0/mig1.0/memory_total_bytes/mean"]
    )
    # In MIG mode NVML gives no utilisation: absent, not 0.
    assert "gpu0/utilization_gpu_percent/mean" not in out
    assert "gpu1/utilization_gpu_percent/mean" in out


def test_memory_stays_bounded_however_long_the_window(
    sim_source: Sim, sim_clock: sim.ManualClock
) -> None:
    source, _ = sim_source(stepping())
    collector = gputop.Collector(source=source)
    sample_at(collector, sim_clock, 0.0)
    keys = len(collector.collect())
    for i in range(300):
        sample_at(collector, sim_clock, i % 10)
    out = collector.collect()
    assert len(out) == keys and out["collector/samples"] == 300


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


class FailingSource(FixedTimeSource):
    """Fails every snapshot after the first, like a driver going away mid-run."""

    def snapshot(self) -> Snapshot:
        self.calls += 1
        if self.calls > 1:
            raise RuntimeError("driver went away\nsecond line")
        return self.inner.snapshot()


def test_the_thread_samples_and_failures_are_counted_never_raised(sim_source: Sim) -> None:
    inner, _ = sim_source(stepping())
    source = FailingSource(inner)
    with gputop.Collector(interval_s=0.005, source=source, timeout_s=2.0) as collector:
        wait_for(lambda: source.calls >= 4)
    out = collector.collect()
    assert out["collector/samples"] == 1 and out["collector/read_errors"] >= 3
    assert out["gpu0/utilization_gpu_percent/last"] == 20
    assert collector.last_error == "RuntimeError: driver went away"
    assert not any(t.name == "gputop-collector" and t.is_alive() for t in threading.enumerate())


def test_the_collector_reads_the_shared_connection() -> None:
    gputop.use_demo("dgx")
    with gputop.Collector(interval_s=0.01) as collector:
        wait_for(lambda: collector.samples >= 2)
    out = collector.collect()
    assert {f"gpu{i}/memory_used_bytes/mean" for i in range(8)} <= set(out)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_s"):
        gputop.Collector(interval_s=0)
