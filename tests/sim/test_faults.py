"""Scenario [[fault]] tables: a call that hangs for a while, a call that crashes the process."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gputop import sim
from gputop.engine.nvml import NvmlSource
from gputop.errors import UsageError
from gputop.sim.scenario import Scenario

ROOT = Path(__file__).resolve().parents[2]


def _box(*faults: dict[str, object]) -> Scenario:
    return Scenario.from_dict({"gpu": [{"name": "NVIDIA T4", "count": 2}], "fault": list(faults)})


def test_a_hang_lasts_until_the_scenario_says_the_driver_is_back() -> None:
    clock = sim.ManualClock(0.0)
    scenario = _box(
        {"call": "nvmlDeviceGetPowerUsage", "kind": "hang", "gpu": 1, "after_s": 5, "until_s": 9}
    )
    lib = sim.install(scenario, clock)
    try:
        source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
        assert source.snapshot().gpus[1].power_draw_mw is not None  # before the window: fine
        clock.set(5.0)
        done = threading.Event()
        threading.Thread(target=lambda: (source.snapshot(), done.set()), daemon=True).start()
        assert not done.wait(0.5), "the call should hang inside the window"
        clock.set(9.0)
        assert done.wait(5), "the call should return when the window ends"
        source.close()
    finally:
        sim.uninstall()


def test_a_fault_on_one_gpu_leaves_the_others_alone() -> None:
    clock = sim.ManualClock(1.0)
    lib = sim.install(_box({"call": "nvmlDeviceGetPowerUsage", "kind": "hang", "gpu": 1}), clock)
    try:
        source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
        progress: list[object] = []
        threading.Thread(target=source.snapshot, args=(progress,), daemon=True).start()
        time.sleep(0.3)
        assert len(progress) == 1  # GPU 0 answered, GPU 1 hangs
        clock.set(1e9)
    finally:
        sim.uninstall()


def test_a_crash_fault_kills_the_process_with_sigsegv() -> None:
    code = (
        "from gputop import sim\n"
        "from gputop.engine.nvml import NvmlSource\n"
        "from gputop.sim.scenario import Scenario\n"
        "s = Scenario.from_dict({'gpu': [{'name': 'T4'}], 'fault': [\n"
        "    {'call': 'nvmlDeviceGetTemperature', 'kind': 'crash'}]})\n"
        "lib = sim.install(s)\n"
        "NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir).snapshot()\n"
        "print('survived')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert out.returncode == -11
    assert b"survived" not in out.stdout


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ({"kind": "hang"}, "needs a call"),
        ({"call": "nvmlInitWithFlags", "kind": "explode"}, "kind must be one of hang, crash"),
        ({"call": "nvmlInitWithFlags", "gpu": 2}, "no gpu 2 (the scenario has 2)"),
        ({"call": "nvmlInitWithFlags", "when": 1}, "unknown keys ['when']"),
    ],
)
def test_bad_fault_tables_are_one_line_errors(fault: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=re.escape(message)):
        _box(fault)


def test_the_shipped_flaky_box_hangs_then_crashes_then_recovers() -> None:
    flaky = sim.load_scenario("flaky")
    by_kind = {f.kind: f for f in flaky.faults}
    hang, crash = by_kind["hang"], by_kind["crash"]
    assert hang.until_s is not None and crash.until_s is not None
    assert hang.until_s <= crash.after_s  # one trouble at a time, as the robustness guide tells it
    assert not any(f.active(crash.until_s) for f in flaky.faults)  # well again afterwards
