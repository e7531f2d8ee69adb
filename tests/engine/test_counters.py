"""The driver layer's counters (Snapshot.counters), read through the real pynvml on the sim.

Energy, PCIe replays, remapped rows, NVLink, Xid events and GPM: each reading is None where the
driver gives none, and a failing call costs its reading only, never the GPU.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import pytest

from gputop import sim
from gputop.engine import wire
from gputop.engine.model import GpuCounters, GpuState, Snapshot
from gputop.engine.nvml.counters import CounterReader

H100: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": [9, 0],
    "power_w": 200,
    "pcie_replay_count": 4,
    "remapped_rows_correctable": 3,
    "remapped_rows_uncorrectable": 1,
    "remapped_rows_failure": 1,
    "nvlink_links": 2,
    "nvlink_tx_kibps": 100,
    "nvlink_rx_kibps": 100,
    "util_gpu": {"base": 30, "step_at": 10, "step_to": 90},
    "gpm_tensor_util": 20,
    "util_memory": 50,
    "xids": [{"at_s": 3, "xid": 13}, {"at_s": 7, "xid": 48}],
}
A100: dict[str, Any] = {"name": "NVIDIA A100-SXM4-80GB", "compute_capability": [8, 0]}


def counters(snapshot: Snapshot, index: int = 0) -> GpuCounters:
    found = snapshot.counters_of(index)
    assert found is not None
    return found


def test_every_counter_on_a_hopper_gpu(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source({"gpu": [H100]})
    first = counters(source.snapshot())
    assert first.energy_mj == 0
    assert first.pcie_replay_count == 4
    assert (first.remapped_rows_correctable, first.remapped_rows_uncorrectable) == (3, 1)
    assert first.remapped_rows_failure is True and first.remapped_rows_pending is False
    assert first.xid_count == 0 and first.xid_last is None and first.xid_last_at_wall is None
    assert first.gpm_graphics_percent is None  # GPM needs two samples: none before the second
    sim_clock.set(5.0)
    before = time.time()
    second = counters(source.snapshot())
    assert second.energy_mj == 1_000_000  # 200 W for 5 s
    assert second.nvlink_data_kib == 5 * 200 + 5 * 202  # link 1 counts 1 % more in the sim
    assert (second.xid_count, second.xid_last) == (1, 13)
    assert second.xid_last_at_wall is not None and second.xid_last_at_wall >= before
    assert second.gpm_graphics_percent == pytest.approx(30.0)
    assert second.gpm_tensor_percent == pytest.approx(20.0)
    assert second.gpm_dram_percent == pytest.approx(50.0)
    sim_clock.set(15.0)
    third = counters(source.snapshot())
    assert (third.xid_count, third.xid_last) == (2, 48)
    assert third.gpm_graphics_percent == pytest.approx(60.0)  # the previous tick's sample on
    assert third.energy_mj == 3_000_000


def test_a_gpu_before_hopper_without_nvlink(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, lib = sim_source({"gpu": [A100]})
    source.snapshot()
    sim_clock.set(2.0)
    c = counters(source.snapshot())
    assert c.gpm_graphics_percent is c.gpm_tensor_percent is c.gpm_dram_percent is None
    assert c.nvlink_data_kib is None
    assert c.energy_mj == 2 * 60_000  # the default 60 W
    assert c.xid_count == 0  # events work on every GPU
    # Asked once whether it has GPM and NVLink, never again.
    assert lib.calls["nvmlGpmQueryDeviceSupport"] == 1
    assert lib.calls["nvmlGpmSampleGet"] == 0
    assert lib.calls["nvmlDeviceGetNvLinkState"] == 1


def test_unsupported_calls_are_none_and_the_gpu_stays(sim_source: Any) -> None:
    gone = [
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceRegisterEvents",
        "nvmlGpmSampleGet",
    ]
    source, _ = sim_source({"gpu": [{**H100, "unsupported": gone}, H100]})
    source.snapshot()
    snap = source.snapshot()
    assert [g.state for g in snap.gpus] == [GpuState.OK, GpuState.OK]
    c = counters(snap, 0)
    assert c.energy_mj is c.pcie_replay_count is c.remapped_rows_correctable is None
    assert c.remapped_rows_failure is None
    assert c.xid_count is None  # no events for it: no count, not a count of 0
    assert c.gpm_tensor_percent is None
    assert c.nvlink_data_kib is not None  # the rest is read
    other = counters(snap, 1)
    assert other.energy_mj is not None and other.xid_count == 0


def test_a_failing_call_costs_only_its_reading(sim_source: Any) -> None:
    errors = {"nvmlDeviceGetTotalEnergyConsumption": "unknown", "nvmlGpmSampleGet": "unknown"}
    source, _ = sim_source({"gpu": [{**H100, "call_errors": errors}]})
    source.snapshot()
    snap = source.snapshot()
    assert snap.gpus[0].state is GpuState.OK
    c = counters(snap)
    assert c.energy_mj is None and c.gpm_graphics_percent is None
    assert c.pcie_replay_count == 4


def test_a_lost_gpu_has_no_counters(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source({"gpu": [{**H100, "lost_after_s": 5}, H100]})
    assert [c.index for c in source.snapshot().counters] == [0, 1]
    sim_clock.set(6.0)
    snap = source.snapshot()
    assert snap.gpus[0].state is GpuState.LOST
    assert [c.index for c in snap.counters] == [1]
    assert snap.counters_of(0) is None


def test_remapped_rows_are_read_every_so_many_ticks(sim_source: Any) -> None:
    source, lib = sim_source({"gpu": [H100]})
    for _ in range(CounterReader.REMAP_EVERY + 1):
        snap = source.snapshot()
    assert lib.calls["nvmlDeviceGetRemappedRows"] == 2  # the first tick and the 31st
    assert counters(snap).remapped_rows_correctable == 3  # kept in between
    assert lib.calls["nvmlDeviceGetTotalEnergyConsumption"] == CounterReader.REMAP_EVERY + 1


def test_shipped_dgx_box(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source("dgx")
    source.snapshot()
    sim_clock.set(50.0)
    snap = source.snapshot()
    assert len(snap.counters) == 8
    assert all(c.nvlink_data_kib and c.gpm_tensor_percent for c in snap.counters)
    assert counters(snap, 5).xid_last == 13  # its Xid 13 at 45 s
    assert [c.xid_count for c in snap.counters] == [0, 0, 0, 0, 0, 1, 0, 0]


def test_counters_cross_the_wire_to_the_parent(sim_source: Any) -> None:
    source, _ = sim_source({"gpu": [H100]})
    snap = source.snapshot()
    tag, back = pickle.loads(wire.dumps(("snap", snap)))
    assert tag == "snap" and back.counters == snap.counters
