"""The Python API reads the driver in a process of its own: a driver call that crashes or hangs is
an exception in the caller's code (the interpreter lives), and the next call reads again once the
driver process is back. ``use_driver(in_process=True)`` is the old way, and dies with the driver.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import gputop
from gputop import api
from gputop.engine.model import Snapshot

ROOT = Path(__file__).resolve().parent.parent

GPUS = """
name = "crashy"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
"""


def crash_scenario(tmp_path: Path, until_s: float, call: str = "nvmlDeviceGetPowerUsage") -> Path:
    """GPU 0's ``call`` SIGSEGVs the calling process from the start until ``until_s``."""
    path = tmp_path / "crash.toml"
    fault = (
        f'[[fault]]\ncall = "{call}"\nkind = "crash"\ngpu = 0\nafter_s = 0\nuntil_s = {until_s}\n'
    )
    path.write_text(GPUS + fault)
    return path


def hang_scenario(tmp_path: Path) -> Path:
    """GPU 1's temperature call hangs from the start, for 20 s: longer than any test here waits."""
    path = tmp_path / "hang.toml"
    fault = (
        '[[fault]]\ncall = "nvmlDeviceGetTemperature"\nkind = "hang"\ngpu = 1\n'
        "after_s = 0\nuntil_s = 20\n"
    )
    path.write_text(GPUS + fault)
    return path


# The user's script: read while the driver crashes, say what each call raised, until one reads.
SCRIPT = """
import sys, time
import gputop

if sys.argv[2] == "in-process":
    gputop.use_driver(in_process=True)
gputop.use_demo(sys.argv[1])
crashes = 0
deadline = time.monotonic() + 30
while True:
    try:
        gpus = gputop.devices()
    except gputop.DriverCrashed as e:
        crashes += 1
        if crashes == 1:
            print("raised:", type(e).__name__, isinstance(e, gputop.GputopError), e, flush=True)
        assert time.monotonic() < deadline, "the driver never came back"
        time.sleep(0.2)
        continue
    break
print("crashes:", crashes, flush=True)
print("read:", [g["index"] for g in gpus], gpus[0]["state"], gpus[0]["power_draw_mw"], flush=True)
"""


def run_script(scenario: Path, how: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_")}
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, str(scenario), how],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env=env,
    )


def test_a_crashing_driver_is_an_exception_and_the_next_call_reads(tmp_path: Path) -> None:
    run = run_script(crash_scenario(tmp_path, until_s=1.5), "driver-process")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("raised: DriverCrashed True DRIVER CRASHED (SIGSEGV"), run.stdout
    assert "Traceback" not in run.stderr
    assert int(lines[1].split()[1]) >= 1
    # After the fault window: a whole reading again, GPU 0's power (the call that crashed) too.
    index, state, power = lines[2].rsplit(" ", 2)
    assert (index, state) == ("read: [0, 1]", "ok") and int(power) > 0, lines[2]


def test_in_process_the_same_crash_ends_the_interpreter(tmp_path: Path) -> None:
    """What the driver process prevents: in-process, the SIGSEGV kills the caller itself."""
    run = run_script(crash_scenario(tmp_path, until_s=1.5), "in-process")
    assert run.returncode == -11
    assert "raised:" not in run.stdout


def test_a_hung_gpu_is_a_timeout_within_the_time_limit(tmp_path: Path) -> None:
    gputop.use_demo(str(hang_scenario(tmp_path)))
    t0 = time.monotonic()
    with pytest.raises(gputop.DriverTimeout) as raised:
        gputop.devices(timeout_s=1.0)
    assert time.monotonic() - t0 < 4.0  # the driver process's start and the 1 s wait
    line = str(raised.value)
    assert "\n" not in line
    assert line.startswith("GPU 1 NOT RESPONDING: nvmlDeviceGetTemperature (GPU 1)"), line
    # The shared driver process is still there, still stuck on GPU 1: a timeout again, in time.
    t0 = time.monotonic()
    with pytest.raises(gputop.DriverTimeout):
        gputop.show(timeout_s=0.5)
    assert time.monotonic() - t0 < 2.0


def test_the_light_read_has_a_time_limit_too(tmp_path: Path) -> None:
    """The notebook's per-cell read (a PID's memory) while the driver hangs opening."""
    path = tmp_path / "init.toml"
    path.write_text(
        GPUS + '[[fault]]\ncall = "nvmlInitWithFlags"\nkind = "hang"\nafter_s = 0\nuntil_s = 20\n'
    )
    gputop.use_demo(str(path))
    t0 = time.monotonic()
    with pytest.raises(gputop.DriverTimeout):
        api.read_pids(None, [os.getpid()], timeout_s=0.5)
    assert time.monotonic() - t0 < 2.0


def test_own_sources_subclass_source_base() -> None:
    from gputop.engine.model import SystemInfo

    class Empty(gputop.SourceBase):
        simulated = True
        dev_dir = os.devnull

        def snapshot(self) -> Snapshot:
            return Snapshot(
                seq=1,
                taken_at_wall=0.0,
                taken_at_mono=0.0,
                system=SystemInfo(hostname="x"),
                gpus=(),
            )

    assert gputop.devices(source=Empty()) == []
    assert api.read_pids(Empty(), [os.getpid()]).total_bytes == 0


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has an NVIDIA driver"
)
def test_no_driver_through_the_driver_process_is_driver_missing_for_python_code(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GPUTOP_DEMO", raising=False)
    monkeypatch.delenv("GPUTOP_IN_PROCESS", raising=False)
    gputop.use_demo(None)
    gputop.use_driver()  # the default: the driver process is the one that finds no driver
    for call in (gputop.show, gputop.devices, lambda: gputop.Device(0)):
        with pytest.raises(gputop.DriverMissing) as raised:
            call()
        assert str(raised.value) == (
            "NVIDIA driver not found (libnvidia-ml.so.1): "
            "call gputop.use_demo() to try gputop on simulated GPUs"
        )
