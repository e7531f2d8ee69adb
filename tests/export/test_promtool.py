"""`gputop export`'s /metrics on the dgx demo passes `promtool check metrics` (Prometheus's own
linter), but for what dcgm-exporter's names force on it: its camelCase label names (``UUID``,
``modelName``, ...) and its counters, typed counter under their exact names, without ``_total``
(one, DCGM_FI_DEV_PCIE_REPLAY_COUNTER, says "counter" in its name). gputop's own
``gputop_*`` families must pass untouched."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.export.conftest import http_get, stop_process
from tests.fleet.conftest import start_exporter

# dcgm-exporter's own names: lint lines these and only these may give.
DCGM_LINT = (
    re.compile(r"DCGM_FI_\w+ label names should be written in 'snake_case' not 'camelCase'"),
    re.compile(r'DCGM_FI_\w+ counter metrics should have "_total" suffix'),
    re.compile(r"DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'"),
)


def promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if found is None:
        pytest.skip("the `promtool` binary is not installed (Debian: prometheus package)")
    return found


def test_dgx_demo_exposition_passes_promtool() -> None:
    binary = promtool()
    proc, address = start_exporter("dgx", "dgx-box")
    try:
        text = http_get(f"http://{address}/metrics")
    finally:
        stop_process(proc)
    assert "gputop_process_gpu_memory_bytes" in text and "DCGM_FI_DEV_GPU_UTIL" in text
    done = subprocess.run(
        [binary, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    errors = [line for line in lines if "error while linting" in line or "parse" in line.lower()]
    assert errors == [], errors  # the exposition parses
    others = [line for line in lines if not any(p.fullmatch(line) for p in DCGM_LINT)]
    assert others == [], others
    # promtool exits 0 when clean, 3 for lint findings (then only dcgm's, as checked above)
    assert done.returncode in (0, 3), done.returncode
    assert not any(line.startswith("gputop_") for line in lines)
