"""The exporter, as a real process on a simulated box whose GPU 1 hangs mid-session: over real
HTTP, GPU 1 is ``gputop_gpu_responding 0`` with no DCGM_FI_* series while GPU 0 stays fresh."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.export.conftest import REPO, SERVING, free_port, http_get, samples, stop_process

BOX = """
name = "hung"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
count = 2
[[fault]]
call = "nvmlDeviceGetTemperature"
kind = "hang"
gpu = 1
after_s = 3.0
"""
INTERVAL_S = 0.5


def _dcgm_gpus(text: str) -> set[str]:
    """The ``gpu`` labels of every DCGM_FI_* sample."""
    return {
        line.split('gpu="', 1)[1].split('"', 1)[0]
        for line in text.splitlines()
        if line.startswith("DCGM_FI_") and 'gpu="' in line
    }


def _responding(text: str) -> dict[str, float]:
    return {labels["gpu"]: value for labels, value in samples(text, "gputop_gpu_responding")}


def test_a_gpu_hung_mid_session_is_not_responding_and_its_dcgm_series_go(tmp_path: Path) -> None:
    box = tmp_path / "hung.toml"
    box.write_text(BOX, encoding="utf-8")
    listen = f"127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "gputop", "export", "--scenario", str(box)]
    proc = subprocess.Popen(
        [*cmd, "--listen", listen, "--interval", str(INTERVAL_S)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert SERVING.search(line), line
        url = f"http://{listen}/metrics"
        before = http_get(url)
        assert _responding(before) == {"0": 1.0, "1": 1.0}
        assert _dcgm_gpus(before) == {"0", "1"}
        deadline = time.monotonic() + 15
        text = before
        while time.monotonic() < deadline and _responding(text).get("1") != 0.0:
            time.sleep(0.2)
            text = http_get(url)
        assert _responding(text) == {"0": 1.0, "1": 0.0}
        # GPU 1's readings are not served as current; GPU 0's are, and stay fresh.
        for _ in range(4):
            time.sleep(INTERVAL_S)
            text = http_get(url)
            assert _dcgm_gpus(text) == {"0"}
            assert _responding(text) == {"0": 1.0, "1": 0.0}
            ages = [value for _, value in samples(text, "gputop_sample_age_seconds")]
            assert ages and max(ages) < 3 * INTERVAL_S + 1.0, ages
        assert samples(text, "gputop_driver_up") == [({}, 1.0)]
    finally:
        stop_process(proc)
