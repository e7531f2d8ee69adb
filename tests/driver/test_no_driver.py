"""No NVIDIA driver: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys

import pytest

MESSAGE = "gputop: NVIDIA driver not found (libnvidia-ml.so.1). Try: gputop --demo"

# pynvml's CDLL("libnvidia-ml.so.1") fails as on a machine without the driver, even on a GPU box.
NO_LIBRARY = """
import pynvml
real = pynvml.CDLL
def fake(name, *a, **k):
    if "nvidia-ml" in str(name):
        raise OSError(name + ": cannot open shared object file")
    return real(name, *a, **k)
pynvml.CDLL = fake
from gputop.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


def run(args: list[str], code: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "GPUTOP_DEMO"}
    cmd = (
        [sys.executable, "-c", "import sys\n" + code, *args]
        if code
        else [sys.executable, "-m", "gputop", *args]
    )
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)


@pytest.mark.parametrize("args", [["--once"], ["--json"], ["doctor"]])
def test_no_driver_one_line_exit_2(args: list[str]) -> None:
    result = run(args, NO_LIBRARY)
    assert result.returncode == 2
    assert result.stderr.strip() == MESSAGE
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


@pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has an NVIDIA driver"
)
def test_no_driver_on_this_machine() -> None:
    result = run(["--once"])
    assert result.returncode == 2
    assert result.stderr.strip() == MESSAGE


def test_demo_needs_no_driver() -> None:
    result = run(["--demo", "--json"], NO_LIBRARY)
    assert result.returncode == 0, result.stderr
    assert '"simulated": true' in result.stdout


def test_unknown_demo_scenario_is_one_line() -> None:
    result = run(["--demo=nope", "--once"])
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "no scenario 'nope'" in result.stderr
