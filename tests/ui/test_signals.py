"""The real dashboard on a pseudo-terminal: signals and Ctrl-C quit cleanly, stdin may be a pipe.

Each test starts ``python -m gputop --demo`` as the leader of a new session whose controlling
terminal is a pty, waits for the first frame, then quits it some way and checks that the terminal
was restored (alternate screen left, cursor shown, mouse tracking off), the exit status, and that
the demo's actor processes and their folder are gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from tests.pty_terminal import (
    EXIT_TIMEOUT_S,
    ROOT,
    START_TIMEOUT_S,
    clean_env,
    on_terminal,
)


@dataclass(frozen=True)
class Demo:
    """The demo's real processes of one gputop run, and their folder."""

    pids: tuple[int, ...]
    folder: Path


def demo_of(pid: int, timeout_s: float = START_TIMEOUT_S) -> Demo:
    """The actor processes of gputop ``pid``: its driver process started them (they name their
    owner in their environment)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        owners = {str(pid)}
        with contextlib.suppress(psutil.Error):
            owners |= {str(child.pid) for child in psutil.Process(pid).children()}
        actors = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if proc.environ().get("GPUTOP_ACTOR_OWNER") in owners:
                    actors.append(proc)
        folders = set()
        for proc in actors:
            with contextlib.suppress(psutil.Error):
                folders.add(Path(proc.cwd()))
        if actors and len(folders) == 1:
            return Demo(tuple(p.pid for p in actors), folders.pop())
        time.sleep(0.1)
    pytest.fail(f"no demo actors of {pid} found")


def assert_demo_gone(demo: Demo, timeout_s: float = 5.0) -> None:
    """Every actor has exited and the folder is removed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [p for p in demo.pids if _running(p)]
        if not alive and not demo.folder.exists():
            return
        time.sleep(0.1)
    assert not alive, f"demo actors still running: {alive}"
    assert not demo.folder.exists(), f"{demo.folder} left behind"


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# What Textual writes when it leaves application mode.
LEAVE_ALT_SCREEN = b"\x1b[?1049l"
SHOW_CURSOR = b"\x1b[?25h"
MOUSE_OFF = b"\x1b[?1000l"


def assert_terminal_restored(output: bytes) -> None:
    """Textual left application mode: alternate screen off, cursor shown, mouse off."""
    for sequence in (LEAVE_ALT_SCREEN, SHOW_CURSOR, MOUSE_OFF):
        assert sequence in output, f"{sequence!r} not written after quitting"
    assert b"Traceback" not in output


@pytest.mark.parametrize(
    ("signum", "status"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_quits_the_dashboard_cleanly(signum: int, status: int) -> None:
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        demo = demo_of(term.proc.pid)
        drawn = len(term.output)
        os.kill(term.proc.pid, signum)
        assert term.read_to_end() == status
        assert_terminal_restored(bytes(term.output[drawn:]))
    assert_demo_gone(demo)


def test_a_closed_terminal_ends_the_dashboard() -> None:
    """The kernel sends SIGHUP and then SIGCONT; Textual must not start again on the SIGCONT."""
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        demo = demo_of(term.proc.pid)
        term.hang_up()
        assert term.proc.wait(timeout=EXIT_TIMEOUT_S) == 129
    assert_demo_gone(demo)


def test_sigcont_after_sighup_does_not_start_the_dashboard_again() -> None:
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        demo = demo_of(term.proc.pid)
        os.kill(term.proc.pid, signal.SIGHUP)
        os.kill(term.proc.pid, signal.SIGCONT)
        assert term.read_to_end() == 129
    assert_demo_gone(demo)


def test_ctrl_c_key_quits() -> None:
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        demo = demo_of(term.proc.pid)
        drawn = len(term.output)
        term.type(b"\x03")
        assert term.read_to_end() == 0
        assert_terminal_restored(bytes(term.output[drawn:]))
    assert_demo_gone(demo)


def test_ctrl_c_quits_from_the_filter_box() -> None:
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        term.type(b"/")
        term.wait_for(b"filter:")
        term.type(b"\x03")
        assert term.read_to_end() == 0


def test_keys_come_from_the_terminal_when_stdin_is_a_pipe() -> None:
    read_end, write_end = os.pipe()
    try:
        with on_terminal("--demo", stdin=read_end) as term:
            os.close(read_end)
            os.write(write_end, b"\n")  # `echo | gputop`: the pipe ends at once
            os.close(write_end)
            term.wait_for(b"DEMO")
            demo = demo_of(term.proc.pid)
            term.type(b"q")
            assert term.read_to_end() == 0
            assert_terminal_restored(bytes(term.output))
        assert_demo_gone(demo)
    finally:
        for fd in (read_end, write_end):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_no_terminal_at_all_is_one_line_and_exit_2(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.run(
            [sys.executable, "-m", "gputop", "--demo"],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            env=clean_env(),
            cwd=ROOT,
            start_new_session=True,  # no controlling terminal: /dev/tty cannot be opened
            timeout=60,
        )
    assert proc.returncode == 2
    assert out.read_bytes() == b""
    assert err.read_text() == (
        "gputop: the dashboard needs a terminal; use --once, --json or query for scripts\n"
    )


def test_ctrl_c_is_a_quit_key_in_the_help() -> None:
    from textual.binding import Binding

    from gputop.ui.app import GputopApp
    from gputop.ui.screens.help import key_rows

    bindings = [b for b in GputopApp.BINDINGS if isinstance(b, Binding)]
    assert any(b.key == "ctrl+c" and b.action == "quit" and b.priority for b in bindings)
    rows = dict(key_rows(bindings, lambda key: key))
    assert rows["q f10 ctrl+c"] == "quit gputop"


@pytest.mark.parametrize(
    ("current", "step", "expected"),
    [
        (1.0, 1, 2.0),
        (1.0, -1, 0.5),
        (7.0, 1, 10.0),  # off the list (--interval 7): the next step each way
        (7.0, -1, 5.0),
        (100.0, 1, 100.0),  # past the slowest step: + keeps it, - comes back to the list
        (100.0, -1, 10.0),
        (0.1, -1, 0.1),  # the fastest allowed stays
        (0.1, 1, 0.25),
        (0.25, -1, 0.25),
        (86_400.0, 1, 86_400.0),
    ],
)
def test_interval_keys_step_within_the_bounds(current: float, step: int, expected: float) -> None:
    from gputop.argtypes import MAX_INTERVAL_S, MIN_INTERVAL_S
    from gputop.ui.app import INTERVAL_STEPS_S, next_interval

    assert all(MIN_INTERVAL_S <= s <= MAX_INTERVAL_S for s in INTERVAL_STEPS_S)
    assert next_interval(current, step) == expected
