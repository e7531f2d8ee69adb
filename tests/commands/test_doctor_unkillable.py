"""`gputop doctor` and `--json` on a simulated box whose GPU a real process in state D uses."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop.cli import main
from gputop.engine import proc_lookup
from gputop.engine.procs import BLOCKED_AFTER_S, ProcReader
from tests.engine.spawn import Spawner, wait_until
from tests.engine.test_unkillable import VFORK_HOLDER, InD, state_letter


@pytest.fixture
def box(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[InD, Path, Path]]:
    """(the process in D, its device folder, a scenario whose GPU 0 lists it)."""
    # A reader of its own: what earlier tests read of other processes says nothing here.
    monkeypatch.setattr(proc_lookup, "_DEFAULT_READER", ProcReader(max_cached=64))
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidiactl"):
        (dev / name).write_bytes(b"\0" * 4096)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    spawner = Spawner()
    in_d = None
    try:
        parent = spawner.ready(VFORK_HOLDER, str(dev / "nvidia0"), str(fifo))
        in_d = InD(pid=parent.pid, device=dev / "nvidia0", fifo=fifo)
        assert wait_until(lambda: state_letter(parent.pid) == "D")
        for child in psutil.Process(parent.pid).children():
            spawner.adopt(child.pid)  # killed at teardown should its FIFO never open
        scenario = tmp_path / "scenario.json"
        scenario.write_text(
            json.dumps(
                {
                    "name": "one-process-in-d",
                    "gpu": [
                        {
                            "name": "NVIDIA A100-SXM4-80GB",
                            "memory_total_mib": 81920,
                            "memory_reserved_mib": 0,
                            "processes": [{"pid": parent.pid, "used_memory_mib": 4096}],
                        }
                    ],
                }
            )
        )
        yield in_d, dev, scenario
    finally:
        if in_d is not None:
            in_d.release()
        spawner.cleanup()


def test_doctor_names_it_unkillable_with_no_kill_command(
    box: tuple[InD, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    in_d, dev, scenario = box
    code = main(["doctor", "--scenario", str(scenario), "--dev-dir", str(dev)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"PID {in_d.pid}  [unkillable+active]" in out
    assert "kill will not help" in out
    assert "nvidia-smi --gpu-reset -i 0" in out
    assert "kill -" not in out  # no kill command, for it or anything else here
    assert "STUCK: 1 stuck process (1 unkillable: kill will not help)." in out

    in_d.release()  # its call returns: an active process again, nothing stuck
    assert wait_until(lambda: state_letter(in_d.pid) != "D")
    code = main(["doctor", "--scenario", str(scenario), "--dev-dir", str(dev)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "OK: nothing stuck." in out


def test_json_lists_the_state(
    box: tuple[InD, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    in_d, _, scenario = box
    # A reading long enough before: the one-shot sees a wait that lasts, as the dashboard would.
    proc_lookup.read_proc(in_d.pid)
    time.sleep(BLOCKED_AFTER_S * 1.2)
    code = main(["--json", "--scenario", str(scenario)])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    (row,) = [p for p in data["processes"] if p["pid"] == in_d.pid]
    assert row["states"] == ["unkillable", "active"]
    assert row["stuck"] is True
    assert row["info"]["status"] == "disk-sleep"
    assert row["info"]["blocked"] is not None
