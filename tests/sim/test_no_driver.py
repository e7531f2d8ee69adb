"""No NVIDIA driver: one clear line, exit code 2, never a traceback."""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.pty_terminal import START_TIMEOUT_S, clean_env, on_terminal

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


# The NVIDIA library is there but NVML will not start: pynvml.nvmlInit answers this error.
FAILING_INIT = """
import pynvml

def failing_init(*args, **kwargs):
    raise pynvml.NVMLError(pynvml.{error})

pynvml.nvmlInit = failing_init
"""


@pytest.mark.parametrize(
    ("error", "message"),
    [
        ("NVML_ERROR_DRIVER_NOT_LOADED", "the NVIDIA kernel driver is not loaded"),
        ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", "NVIDIA driver/library version mismatch"),
        ("NVML_ERROR_NO_PERMISSION", "no permission to use the NVIDIA driver"),
    ],
)
def test_dashboard_shows_a_broken_driver_not_the_demo(
    error: str, message: str, tmp_path: Path
) -> None:
    (tmp_path / "sitecustomize.py").write_text(FAILING_INIT.format(error=error))
    env = clean_env()
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{env['PYTHONPATH']}"
    with on_terminal(env=env) as term:
        code = term.read_to_end(timeout_s=START_TIMEOUT_S)
    text = term.output.decode("utf-8", "replace")
    assert code == 2, text
    assert f"gputop: {message}" in text
    assert "DEMO" not in text
    assert text.strip().count("\n") == 0  # one line


def test_dashboard_falls_back_to_the_demo_only_without_the_library() -> None:
    from gputop import sim, sources
    from gputop.engine import nvml
    from gputop.errors import DriverError, DriverMissing

    def opener(error: DriverError) -> object:
        def fail(**kwargs: object) -> object:
            if not kwargs.get("simulated"):
                raise error
            return "demo"

        return fail

    with pytest.MonkeyPatch.context() as mp:
        box = types.SimpleNamespace(dev_dir="/nonexistent-sim-dev")  # the sim is not started
        mp.setattr(sim, "install", lambda *a, **k: box)
        mp.setattr(sim, "load_scenario", lambda name: name)
        mp.setattr(nvml, "NvmlSource", opener(DriverMissing("no library")))
        assert sources.open_source(fallback_to_demo=True, environ={}) == "demo"
        mp.setattr(nvml, "NvmlSource", opener(DriverError("version mismatch")))
        with pytest.raises(DriverError, match="version mismatch"):
            sources.open_source(fallback_to_demo=True, environ={})
