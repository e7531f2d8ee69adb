"""`gputop --once` / `--json` end to end: the real CLI on the shipped simulated scenarios."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest

ESC = "\x1b"


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUTOP_DEMO", "NO_COLOR", "COLUMNS")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("CUDA_DEVICE_ORDER", None)
    return {**env, "COLUMNS": "200", **extra}


def gputop(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        env=clean_env(**env),
        timeout=60,
        check=False,
    )


def gputop_on_a_terminal(*args: str, **env: str) -> str:
    """stdout as a terminal sees it (so colour is on unless told otherwise)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.DEVNULL,
        env=clean_env(**env),
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        # select + poll: a lingering grandchild holding the terminal must not hang the test.
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's last writer closed it
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=10) == 0
    finally:
        os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_demo_once() -> None:
    result = gputop("--demo", "--once")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "DEMO" in lines[0]
    assert len(lines) == 5
    assert all(line.startswith("[") and "°C" in line and "MiB" in line for line in lines[1:])
    assert ESC not in result.stdout  # not a terminal: no colour


def test_dgx_once_with_process_flags() -> None:
    result = gputop("--demo=dgx", "--once", "-cpu")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "DEMO" in lines[0]
    assert len(lines) == 9
    assert all("H100" in line for line in lines[1:])
    assert all(len(line) <= 200 for line in lines)


def test_faults_once_shows_na() -> None:
    result = gputop("--demo=faults", "--once", "-F", "-P")
    assert result.returncode == 0, result.stderr
    assert "N/A" in result.stdout


@pytest.mark.parametrize("columns", [50, 80])
def test_once_fits_columns(columns: int) -> None:
    result = gputop("--demo", "--once", "-cpuFP", COLUMNS=str(columns))
    assert result.returncode == 0, result.stderr
    assert all(len(line) <= columns for line in result.stdout.splitlines())


def test_cuda_visible_devices_changes_the_labels() -> None:
    result = gputop("--demo", "--once", CUDA_VISIBLE_DEVICES="3", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    assert result.returncode == 0, result.stderr
    labels = [line.split(" ")[0] for line in result.stdout.splitlines()[1:]]
    assert labels == ["[0→-]", "[1→-]", "[2→-]", "[3→0]"]


def test_demo_json() -> None:
    result = gputop("--demo", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["schema"] == 1
    assert data["system"]["simulated"] is True
    assert len(data["gpus"]) == 4
    assert {g["state"] for g in data["gpus"]} == {"ok"}
    assert all(isinstance(g["memory_total_bytes"], int) for g in data["gpus"])
    assert any(g["processes"] for g in data["gpus"])
    # --json carries the exporter's counters (energy, Xid...), which the dashboard does not read.
    assert [c["index"] for c in data["counters"]] == [0, 1, 2, 3]
    assert all(c["energy_mj"] > 0 for c in data["counters"])


def test_colour_on_a_terminal() -> None:
    assert ESC + "[" in gputop_on_a_terminal("--demo", "--once")


@pytest.mark.parametrize(
    ("args", "env"),
    [(("--demo", "--once"), {"NO_COLOR": "1"}), (("--demo", "--once", "--no-color"), {})],
)
def test_no_colour_on_request(args: tuple[str, ...], env: dict[str, str]) -> None:
    text = gputop_on_a_terminal(*args, **env)
    assert "DEMO" in text
    assert ESC not in text


@pytest.mark.parametrize("command", ["query", "doctor", "dmon", "export"])
def test_bare_demo_before_a_command_is_the_demo_not_a_scenario_named_after_it(
    command: str,
) -> None:
    from gputop.cli import build_parser

    args = build_parser().parse_args(["--demo", command])
    assert args.command == command
    assert args.demo == "demo"
    named = build_parser().parse_args(["--demo", "dgx", command])
    assert (named.demo, named.command) == ("dgx", command)
