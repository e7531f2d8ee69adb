"""`gputop doctor`: the diagnosis text and exit code, on real stuck processes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gputop.commands.doctor import diagnose
from gputop.engine.enrich import enrich
from gputop.engine.holders import scan_holders
from gputop.engine.model import GpuProcess, ProcessType, Snapshot
from tests.engine.spawn import HOLD, ZOMBIE_PARENT, Spawner, status_of, wait_until
from tests.fakes import GiB, make_gpu, make_snapshot


def _clean_driver(*pids: int) -> Snapshot:
    """One GPU whose memory is exactly what the listed PIDs use."""
    procs = tuple(
        GpuProcess(pid=p, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=GiB)
        for p in pids
    )
    return make_snapshot(gpus=(make_gpu(0, processes=procs, memory_used_bytes=len(pids) * GiB),))


def test_healthy_box_exits_0(spawner: Spawner, dev_dir: Path) -> None:
    worker = spawner.start("import time; time.sleep(120)")
    holders = scan_holders(str(dev_dir))
    d = diagnose(enrich(_clean_driver(worker.pid), holders=holders), holders)
    assert d.exit_code == 0
    assert d.text.rstrip().endswith("OK: nothing stuck.")
    assert (
        "GPU 0  NVIDIA A100-SXM4-80GB: used 1,024 MiB, attributed 1,024 MiB to 1 process" in d.text
    )


def test_holder_is_stuck_with_kill_command(spawner: Spawner, dev_dir: Path) -> None:
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    holders = scan_holders(str(dev_dir))
    d = diagnose(enrich(_clean_driver(), holders=holders), holders)
    assert d.exit_code == 1
    assert [r.pid for r in d.stuck_processes] == [holder.pid]
    assert f"PID {holder.pid}  [holder]" in d.text
    assert f"holds {dev_dir / 'nvidia0'}" in d.text
    assert f"fix: kill -TERM {holder.pid}" in d.text
    assert "STUCK: 1 stuck process" in d.text


def test_defunct_fix_signals_the_parent(spawner: Spawner) -> None:
    parent = spawner.start(ZOMBIE_PARENT)
    zombie = spawner.first_line_pid(parent)
    assert wait_until(lambda: status_of(zombie) == "zombie")
    d = diagnose(enrich(_clean_driver(zombie)))
    assert d.exit_code == 1
    assert f"parent {parent.pid} (python" in d.text
    assert f"fix: kill -TERM {parent.pid}   # the parent" in d.text


def test_forked_worker_of_active_process_is_not_stuck(spawner: Spawner, dev_dir: Path) -> None:
    # The spawned holder's parent is this test process; list us as the active GPU user.
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    holders = scan_holders(str(dev_dir))
    d = diagnose(enrich(_clean_driver(os.getpid()), holders=holders), holders)
    assert d.exit_code == 0
    assert "Workers forked from active GPU processes (released when they exit) (1):" in d.text
    assert f"PID {holder.pid}" in d.text


def test_unattributed_memory_is_reported() -> None:
    d = diagnose(enrich(make_snapshot(gpus=(make_gpu(0, processes=()),))))
    assert d.exit_code == 1
    assert "UNATTRIBUTED 20,480 MiB" in d.text
    assert "STUCK: 1 GPU with unattributed memory" in d.text


def _scenario(tmp_path: Path, pid: int) -> Path:
    data = {
        "name": "one-real-pid",
        "gpu": [
            {
                "name": "NVIDIA A100-SXM4-80GB",
                "memory_total_mib": 81920,
                "memory_reserved_mib": 0,
                "processes": [{"pid": pid, "used_memory_mib": 4096}],
            }
        ],
    }
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_doctor_on_simulated_driver(
    spawner: Spawner, dev_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.cli import main

    worker = spawner.start("import time; time.sleep(120)  # doctor-active")
    holder = spawner.ready(HOLD, str(dev_dir / "nvidia0"))
    scenario = _scenario(tmp_path, worker.pid)
    code = main(["doctor", "--scenario", str(scenario), "--dev-dir", str(dev_dir)])
    out = capsys.readouterr().out
    assert "(SIMULATED)" in out
    assert f"PID {holder.pid}  [holder]" in out
    assert f"PID {worker.pid}" not in out  # the active worker is fine
    assert code == 1
    holder.kill()
    holder.wait()
    code = main(["doctor", "--scenario", str(scenario), "--dev-dir", str(dev_dir)])
    assert code == 0, capsys.readouterr().out
