"""The light read (Source.pid_memory): some PIDs' GPU memory from the process lists alone.

It must agree with a whole snapshot's per-process figures, which the notebook's line used to
come from, while making only the list calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gputop import sim
from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.model import Snapshot, pid_memory_of

MiB = 1024**2
SimSource = Callable[..., tuple[Any, sim.SimLibrary]]
LIST_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v3")

# GPU 0: 77 is compute and graphics (both lists, 500 MiB each: one process of 500 MiB), 78
# compute; GPU 1: 77 graphics only, 79 compute.
BOX = """
name = "light"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
processes = [
  {pid = 77, type = "compute+graphics", used_memory_mib = 500},
  {pid = 78, used_memory_mib = 1200},
]
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
processes = [
  {pid = 77, type = "graphics", used_memory_mib = 30},
  {pid = 79, used_memory_mib = 4000},
]
"""


def listed_pids(snap: Snapshot) -> set[int]:
    return {p.pid for g in snap.gpus for p in g.processes}


@pytest.mark.parametrize("name", ["dgx", "mig"])
def test_agrees_with_the_snapshot_for_every_pid_and_all_of_them(
    sim_source: SimSource, name: str
) -> None:
    source, _ = sim_source(name)
    snap = source.snapshot()
    pids = listed_pids(snap)
    assert len(pids) >= 5
    for pid in sorted(pids):
        assert source.pid_memory([pid]).by_gpu_bytes == pid_memory_of(snap, [pid]).by_gpu_bytes
    everything = source.pid_memory(pids)
    assert everything.by_gpu_bytes == pid_memory_of(snap, pids).by_gpu_bytes
    assert everything.total_bytes == sum(
        p.used_memory_bytes or 0 for g in snap.gpus for p in g.processes
    )
    assert everything.total_bytes > 0


def test_mig_without_privileges_reads_each_mig_device(sim_source: SimSource) -> None:
    denied = dict.fromkeys(LIST_CALLS, 4)  # no permission for the GPU's own list
    scenario = sim.load_scenario("mig")
    scenario = replace(scenario, gpus=(replace(scenario.gpus[0], call_errors=denied),))
    source, lib = sim_source(scenario)
    snap = source.snapshot()
    pids = listed_pids(snap)
    assert pids  # they came from the MIG devices' lists
    before = lib.calls["nvmlDeviceGetMigDeviceHandleByIndex"]
    light = source.pid_memory(pids)
    assert light.by_gpu_bytes == pid_memory_of(snap, pids).by_gpu_bytes
    assert light.total_bytes > 0
    assert lib.calls["nvmlDeviceGetMigDeviceHandleByIndex"] > before


def test_a_compute_and_graphics_pid_counts_once(sim_source: SimSource, tmp_path: Path) -> None:
    path = tmp_path / "light.toml"
    path.write_text(BOX, encoding="utf-8")
    source, _ = sim_source(sim.load_scenario(str(path)))
    assert source.pid_memory([77]).by_gpu_bytes == ((0, 500 * MiB), (1, 30 * MiB))
    assert source.pid_memory([77, 78, 79]).by_gpu_bytes == ((0, 1700 * MiB), (1, 4030 * MiB))
    assert source.pid_memory([12345]).by_gpu_bytes == ((0, 0), (1, 0))


def test_only_the_list_calls_are_made(sim_source: SimSource) -> None:
    source, lib = sim_source("dgx")
    source.snapshot()
    before = dict(lib.calls)
    source.pid_memory([1, 2, 3])
    made = {k: n - before.get(k, 0) for k, n in lib.calls.items() if n != before.get(k, 0)}
    assert made == dict.fromkeys(LIST_CALLS, 8)


def test_a_lost_gpu_is_left_out(sim_source: SimSource, sim_clock: sim.ManualClock) -> None:
    scenario = sim.load_scenario("dgx")
    lost = replace(scenario.gpus[2], lost_after_s=5.0)
    source, _ = sim_source(replace(scenario, gpus=(*scenario.gpus[:2], lost)))
    pids = listed_pids(source.snapshot())
    assert [i for i, _ in source.pid_memory(pids).by_gpu_bytes] == [0, 1, 2]
    sim_clock.set(6.0)
    assert [i for i, _ in source.pid_memory(pids).by_gpu_bytes] == [0, 1]


@pytest.fixture
def isolated(tmp_path: Path) -> Iterator[IsolatedSource]:
    path = tmp_path / "light.toml"
    path.write_text(BOX, encoding="utf-8")
    source = IsolatedSource(DriverConfig(scenario=str(path)))
    yield source
    source.close()


def test_through_the_driver_process(isolated: IsolatedSource) -> None:
    snap = isolated.snapshot()
    light = isolated.pid_memory([77, 79])
    assert light.by_gpu_bytes == ((0, 500 * MiB), (1, 4030 * MiB))
    assert light.by_gpu_bytes == pid_memory_of(snap, [77, 79]).by_gpu_bytes
    assert isolated.snapshot().seq == snap.seq + 1  # light reads leave the tick count alone
