"""How the command-line modes end: signals, bad intervals, unwritable output.

Every end is one line at most and an exit code, never a traceback: 128+N after signal N (the
exporter: 0 after SIGTERM, a service's normal stop), 2 for an interval out of bounds, 1 when the
output cannot be written. The looping commands run on a pty, as from a shell, so that the demo's
actor processes would share the terminal's foreground process group.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.argtypes import INTERVAL_BOUNDS_HELP
from tests.pty_terminal import ROOT, Terminal, clean_env, on_terminal
from tests.ui.test_signals import assert_demo_gone, demo_of

QUERY = ("query", "--demo", "--query-gpu=index,utilization.gpu", "-l", "1")
DMON = ("dmon", "--demo")
EXPORT = ("export", "--demo", "--listen", "127.0.0.1:0", "--interval", "1")
# What each writes once it runs.
# dmon's header is two lines, maybe written apart: wait for the second (units) one.
STARTED = {QUERY: b"index, utilization.gpu", DMON: b"# Idx", EXPORT: b"/metrics"}


def after_interrupt(term: Terminal, signum: int, *, group: bool) -> tuple[int, bytes]:
    """Send ``signum`` (to the whole process group, as the terminal's Ctrl-C does, with
    ``group``); the exit status and what was written after it."""
    written = len(term.output)
    if group:
        os.killpg(term.proc.pid, signum)
    else:
        os.kill(term.proc.pid, signum)
    status = term.read_to_end(timeout_s=5.0)
    return status, bytes(term.output[written:])


@pytest.mark.parametrize(
    ("argv", "status"), [(QUERY, 130), (DMON, 130), (EXPORT, 130)], ids=["query", "dmon", "export"]
)
def test_ctrl_c_ends_quietly_and_removes_the_demo(argv: tuple[str, ...], status: int) -> None:
    with on_terminal(*argv) as term:
        term.wait_for(STARTED[argv])
        demo = demo_of(term.proc.pid)
        code, after = after_interrupt(term, signal.SIGINT, group=True)
    assert b"Traceback" not in after and b"KeyboardInterrupt" not in after, after
    # The rows of a tick under way may still come (dmon's repeat its '#' header at a page's
    # start); anything else is one line at most.
    said = [line for line in after.splitlines() if not re.match(rb"\s*[\d#]", line)]
    assert len(said) <= 1, after
    assert code == status
    assert_demo_gone(demo)


@pytest.mark.parametrize(
    ("argv", "signum", "status"),
    [
        (DMON, signal.SIGTERM, 143),  # `timeout 3 gputop dmon`
        (DMON, signal.SIGHUP, 129),  # the terminal closed
        (QUERY, signal.SIGTERM, 143),
        (EXPORT, signal.SIGTERM, 0),  # systemctl stop: a clean stop
        (EXPORT, signal.SIGHUP, 129),
    ],
    ids=["dmon-term", "dmon-hup", "query-term", "export-term", "export-hup"],
)
def test_a_signal_ends_a_loop_with_its_exit_code(
    argv: tuple[str, ...], signum: int, status: int
) -> None:
    with on_terminal(*argv) as term:
        term.wait_for(STARTED[argv])
        demo = demo_of(term.proc.pid)
        code, after = after_interrupt(term, signum, group=False)
    assert b"Traceback" not in after, after
    assert code == status
    assert_demo_gone(demo)


def slow_demo(folder: Path) -> Path:
    """The demo scenario with a driver call that takes 30 s: a one-shot that is still running."""
    text = (ROOT / "gputop/sim/scenarios/demo.toml").read_text()
    slow = "[[gpu]]\nslow_calls = { nvmlDeviceGetPowerUsage = 30.0 }\n"
    path = folder / "slow.toml"
    path.write_text(text.replace("[[gpu]]\n", slow, 1))
    return path


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_ends_a_one_shot(tmp_path: Path, signum: int, status: int) -> None:
    with on_terminal("--once", "--scenario", str(slow_demo(tmp_path))) as term:
        demo = demo_of(term.proc.pid)
        code, after = after_interrupt(term, signum, group=signum == signal.SIGINT)
    assert after == b""
    assert code == status
    assert_demo_gone(demo)


def gputop(*argv: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=ROOT,
        timeout=60,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("--demo", "--interval", "1e-9"),
        ("--demo", "--interval", "inf"),
        ("--demo", "--interval", "nan"),
        ("--demo", "--interval", "86401"),
        ("dmon", "--demo", "-d", "inf"),
        ("dmon", "--demo", "-d", "0.01"),
        ("export", "--demo", "--interval", "1e-9"),
    ],
)
def test_an_interval_out_of_bounds_is_refused(argv: tuple[str, ...]) -> None:
    result = gputop(*argv)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()  # one line: no usage block before it
    assert f"{argv[-1]!r} (see gputop" in line
    assert INTERVAL_BOUNDS_HELP in line


@pytest.mark.parametrize("option", [("--interval",), ("dmon", "-d"), ("export", "--interval")])
def test_help_states_the_interval_bounds(option: tuple[str, ...]) -> None:
    *command, _ = option
    result = gputop(*command, "--help")
    assert " ".join(result.stdout.split()).count(INTERVAL_BOUNDS_HELP) == 1


@pytest.mark.parametrize(
    "argv",
    [("--once", "--demo"), ("--json", "--demo"), ("dmon", "--demo", "-c", "1")],
    ids=["once", "json", "dmon"],
)
def test_a_full_disk_is_one_line(argv: tuple[str, ...]) -> None:
    with open("/dev/full", "w") as full:
        result = gputop(*argv, stdout=full.fileno())
    assert result.returncode == 1
    assert result.stderr == "gputop: cannot write: No space left on device\n"


def test_a_closed_pipe_is_still_quiet_and_exit_0() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "--json", "--demo"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        cwd=ROOT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # `| head -0`
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 0
    assert err == b""
