"""Logging loops (``dmon``, ``query -l``) on a real driver process whose GPU 1 hangs: the other
GPU keeps printing readings, and the last line names GPU 1 and the call that hung, not GPU 0."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALL = "nvmlDeviceGetTemperature"
BOX = f"""
name = "hung"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 2
[[fault]]
call = "{CALL}"
kind = "hang"
gpu = 1
after_s = {{after}}
"""


def _box(tmp_path: Path, after: float) -> str:
    path = tmp_path / "hung.toml"
    path.write_text(BOX.format(after=after), encoding="utf-8")
    return str(path)


def _gputop(*argv: str) -> list[str]:
    return [sys.executable, "-m", "gputop", *argv]


def _assert_names_gpu_1(stderr: str) -> None:
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("gputop: GPU 1 NOT RESPONDING: "), stderr
    assert f"{CALL} (GPU 1)" in last and "GPU 0" not in last, last


def test_dmon_names_the_hung_gpu_and_call_and_the_other_gpu_keeps_its_rows(
    tmp_path: Path,
) -> None:
    out = subprocess.run(
        _gputop("dmon", "--scenario", _box(tmp_path, 0.0), "-s", "p", "-c", "4", "-d", "1"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 3, out.stderr
    _assert_names_gpu_1(out.stderr)
    rows = [line.split() for line in out.stdout.splitlines() if not line.startswith("#")]
    gpu0 = [row for row in rows if row[0] == "0"]
    gpu1 = [row for row in rows if row[0] == "1"]
    assert len(gpu0) == 4 and len(gpu1) == 4
    assert all(row[1] != "-" for row in gpu0), out.stdout  # a reading in every row
    assert all(set(row[1:]) == {"-"} for row in gpu1), out.stdout


def test_query_loop_names_the_hung_gpu_and_call(tmp_path: Path) -> None:
    argv = ["query", "--scenario", _box(tmp_path, 1.5), "--query-gpu=index,temperature.gpu"]
    proc = subprocess.Popen(
        _gputop(*argv, "--format=csv,noheader", "-l", "1"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    # Rows until GPU 1 has failed to answer in two of them and GPU 0 answered after that.
    while time.monotonic() < deadline:
        lines.append(proc.stdout.readline().strip())
        silent = [i for i, line in enumerate(lines) if line.startswith("1,") and "Error" in line]
        if len(silent) >= 2 and any(
            line.startswith("0,") and line != "0, [Unknown Error]" for line in lines[silent[1] :]
        ):
            break
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert len(silent) >= 2, lines
    _assert_names_gpu_1(stderr)
