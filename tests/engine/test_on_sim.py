"""The engine on the simulated driver: real PIDs named in a scenario, and a hung NVML call."""

from __future__ import annotations

import os
import queue
import threading
from pathlib import Path
from typing import Any

from gputop.engine.enrich import enrich
from gputop.engine.model import ProcState, Snapshot
from gputop.engine.sampler import Sampler
from tests.engine.spawn import Spawner

MiB = 1024**2


def _scenario(*pids: int, extra_used_mib: int = 0) -> dict[str, Any]:
    return {
        "name": "engine",
        "gpu": [
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "memory_total_mib": 81920,
                "memory_reserved_mib": 0,
                "extra_used_mib": extra_used_mib,
                "processes": [{"pid": p, "used_memory_mib": 2048} for p in pids],
            }
        ],
    }


def test_real_pid_named_in_scenario_is_active(spawner: Spawner, sim_source: Any) -> None:
    worker = spawner.start("import time; time.sleep(120)  # sim-active-worker")
    source, _ = sim_source(_scenario(worker.pid, 2**22 + 5))
    snap = enrich(source.snapshot())
    rows = {r.pid: r for r in snap.processes}
    row = rows[worker.pid]
    assert row.states == (ProcState.ACTIVE,)
    assert row.info.uid == os.getuid()
    assert "sim-active-worker" in row.info.command
    assert row.used_memory_bytes == 2048 * MiB
    assert rows[2**22 + 5].states == (ProcState.NAMESPACE,)
    assert snap.unattributed_memory_bytes == ()


def test_unattributed_memory_on_sim(sim_source: Any) -> None:
    source, _ = sim_source(_scenario(extra_used_mib=6000))
    snap = enrich(source.snapshot())
    assert len(snap.unattributed_memory_bytes) == 1
    index, missing = snap.unattributed_memory_bytes[0]
    assert index == 0
    assert missing >= 6000 * MiB


def test_hung_nvml_call_leaves_consumer_stale_on_time(sim_source: Any, tmp_path: Path) -> None:
    source, lib = sim_source(_scenario())
    got: queue.Queue[Snapshot] = queue.Queue()
    sampler = Sampler(source, on_snapshot=got.put, interval_s=0.05, dev_dir=str(tmp_path))
    gate = threading.Event()
    sampler.start()
    try:
        first = got.get(timeout=10)
        assert first.stale_s is None
        lib.blocked["nvmlDeviceGetPowerUsage"] = gate  # the next read hangs inside "NVML"
        stale = []
        while len(stale) < 3:
            snap = got.get(timeout=10)
            if snap.stale_s is not None:
                stale.append(snap)
        assert all(s.gpus == stale[0].gpus for s in stale)  # the last good reading, re-sent
        assert stale[-1].stale_s is not None
        assert stale[0].stale_s is not None
        assert stale[-1].stale_s >= stale[0].stale_s
        del lib.blocked["nvmlDeviceGetPowerUsage"]
        gate.set()
        while (snap := got.get(timeout=10)).stale_s is not None:
            pass
        assert snap.seq > first.seq
    finally:
        gate.set()
        sampler.stop()
