"""Hostile strings from real processes never reach any output: every one-shot view and /metrics.

The process (ours, so every field is readable) and its zombie child come from tests/hostile.py;
the zombie has no argv, so views show its hostile name (prctl PR_SET_NAME).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

from tests.hostile import HostileBox, hostile_box

# Raw bytes no output may carry: ESC and BEL (title/OSC), the C1 CSI (as UTF-8), RLO and LRI
# (bidi), the Unicode line separator, and a newline inside a value.
FORBIDDEN = {
    "ESC": b"\x1b",
    "BEL": b"\x07",
    "C1 CSI": b"\xc2\x9b",
    "RLO": b"\xe2\x80\xae",
    "LRI": b"\xe2\x81\xa6",
    "LS": b"\xe2\x80\xa8",
}
CLI = (sys.executable, "-m", "gputop")


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostileBox]:
    with hostile_box(tmp_path_factory.mktemp("hostile")) as hostile:
        yield hostile


def gputop(box: HostileBox, *argv: str) -> bytes:
    """stdout and stderr of the real CLI on the box's scenario, as bytes; it must succeed.

    (doctor exits 1 when it finds a stuck process, and the zombie is one.)
    """
    done = subprocess.run(
        [*CLI, "--scenario", str(box.scenario), *argv],
        capture_output=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "400"},
    )
    assert done.returncode in ((0, 1) if "doctor" in argv else (0,)), done.stderr.decode("latin-1")
    return done.stdout + done.stderr


def assert_harmless(output: bytes) -> None:
    for name, raw in FORBIDDEN.items():
        assert raw not in output, f"{name} reached the output"


@pytest.mark.parametrize(
    "argv",
    [
        ("--once", "-c", "-p", "-u", "-F", "-P"),
        ("--json",),
        ("doctor",),
        ("query", "--query-compute-apps=pid,process_name,used_memory", "--format=csv"),
        ("query", "--query-compute-apps=pid,process_name,used_memory", "--format=json"),
        ("query", "--query-gpu=index,name,uuid", "--format=csv"),
        ("query", "--query-gpu=index,name", "--format=json"),
        ("dmon", "-c", "1"),
    ],
)
def test_no_one_shot_view_writes_a_hostile_byte(box: HostileBox, argv: tuple[str, ...]) -> None:
    assert_harmless(gputop(box, *argv))


def test_once_shows_hostile_names_escaped_on_one_line(box: HostileBox) -> None:
    out = gputop(box, "--once", "-c", "-p").decode()
    assert "\\x1b]0;GPU\\x07\\u202e" in out  # the driver's GPU name
    (line,) = [ln for ln in out.splitlines() if str(box.zombie) in ln]
    assert "\\x1b]0;PWN\\x07" in line  # -c shows the name of a process without argv


def test_json_is_valid_and_carries_the_escaped_text(box: HostileBox) -> None:
    doc = json.loads(gputop(box, "--json"))
    (row,) = [r for r in doc["processes"] if r["pid"] == box.pid]
    assert row["info"]["cmdline"][-5:] == [
        "\\x1b]0;OWNED\\x07",
        "\\x1b[2J",
        "\\x9b31mred",
        "\\u202eevil\\u2066",
        "two\\nlines\\u2028",
    ]
    (zombie,) = [r for r in doc["processes"] if r["pid"] == box.zombie]
    assert zombie["info"]["name"] == "\\x1b]0;PWN\\x07"
    assert doc["gpus"][0]["name"] == "NVIDIA A100\\x1b]0;GPU\\x07\\u202e"


def test_doctor_names_the_zombie_escaped(box: HostileBox) -> None:
    out = gputop(box, "doctor").decode()
    assert str(box.zombie) in out
    assert "\\x1b]0;PWN\\x07" in out


def test_csv_keeps_one_row_per_process(box: HostileBox) -> None:
    out = gputop(box, "query", "--query-compute-apps=pid,process_name", "--format=csv").decode()
    lines = out.splitlines()
    assert lines[0] == "pid, process_name"
    assert len(lines) == 3  # header + two processes: no value broke a row
    assert all(ln.count(", ") == 1 for ln in lines)


def test_exporter_labels_carry_no_hostile_byte(box: HostileBox) -> None:
    pytest.importorskip("prometheus_client")
    server = subprocess.Popen(
        [*CLI, "export", "--scenario", str(box.scenario), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + 30
        url = None
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            found = re.search(r"serving (http://\S+/metrics)", line)
            url = found.group(1) if found else None
            assert line, "the exporter stopped before serving"
        assert url is not None
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
    finally:
        server.terminate()
        server.wait(10)
    assert_harmless(body)
    text = body.decode()
    (sample,) = [ln for ln in text.splitlines() if f'pid="{box.zombie}"' in ln]
    # The label values, their backslashes escaped once more by the exposition format.
    assert 'command="\\\\x1b]0;PWN\\\\x07"' in sample
    assert "\\\\x1b]0;GPU\\\\x07\\\\u202e" in text
