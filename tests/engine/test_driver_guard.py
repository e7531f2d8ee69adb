"""The last-resort guard: gputop dies with the dashboard up, its driver process mends the terminal.

The real dashboard on a pseudo-terminal (tests/pty_terminal.py): Textual puts it in raw mode, the
alternate screen and mouse tracking; then gputop is killed (SIGKILL) or crashes (SIGSEGV), so
Textual never gets to undo any of it.
"""

from __future__ import annotations

import os
import signal
import termios
from pathlib import Path

import psutil

from gputop.engine.terminal_guard import TERMINAL_RESET
from tests.processes import gone_within
from tests.pty_terminal import Terminal, clean_env, on_terminal


def _driver_process(term: Terminal) -> int:
    for child in psutil.Process(term.proc.pid).children():
        if "gputop.engine.child" in " ".join(child.cmdline()):
            return child.pid
    raise AssertionError("the dashboard runs no driver process")


def _kill_the_dashboard(how: signal.Signals, state: Path) -> tuple[str, int]:
    """Run the dashboard, kill it with ``how``; (what the terminal got after, driver PID)."""
    env = {**clean_env(), "XDG_STATE_HOME": str(state)}
    with on_terminal("--demo=dgx", env=env) as term:
        term.wait_for(b"DEMO")
        raw = termios.tcgetattr(term.master)  # the pty's modes are the master's too
        driver = _driver_process(term)
        assert not raw[3] & termios.ICANON  # raw, as Textual set it
        before = len(term.output)
        os.kill(term.proc.pid, how)
        term.proc.wait(timeout=10)
        term.wait_for(b"gputop ", timeout_s=5)
        term.read_for(0.5)  # the rest of the guard's line
        mended = termios.tcgetattr(term.master)
        assert mended[3] & termios.ICANON and mended[3] & termios.ECHO, "still in raw mode"
        return bytes(term.output[before:]).decode("utf-8", "replace"), driver


def test_sigkill_leaves_a_working_terminal(tmp_path: Path) -> None:
    after, driver = _kill_the_dashboard(signal.SIGKILL, tmp_path)
    assert TERMINAL_RESET in after  # mouse off, cursor on, main screen back
    assert "terminal was put back" in after
    assert not any(tmp_path.iterdir()), "no crash report for a kill"
    assert gone_within(driver, 3)


def test_a_crash_of_gputop_goes_to_a_file_named_in_one_line(tmp_path: Path) -> None:
    after, driver = _kill_the_dashboard(signal.SIGSEGV, tmp_path)
    assert TERMINAL_RESET in after
    assert "Fatal Python error" not in after, "the dump went over the screen"
    reports = list((tmp_path / "gputop").glob("crash-*.txt"))
    assert len(reports) == 1
    line = after[after.index("gputop crashed") :].splitlines()[0]
    assert line.startswith("gputop crashed (Segmentation fault); the report is in ")
    assert str(reports[0]) in line
    assert "Fatal Python error: Segmentation fault" in reports[0].read_text()
    assert gone_within(driver, 3)


def test_a_clean_quit_leaves_the_terminal_to_textual(tmp_path: Path) -> None:
    env = {**clean_env(), "XDG_STATE_HOME": str(tmp_path)}
    with on_terminal("--demo=dgx", env=env) as term:
        term.wait_for(b"DEMO")
        driver = _driver_process(term)
        term.type(b"q")
        assert term.read_to_end() == 0
    assert TERMINAL_RESET.encode() not in term.output  # the guard wrote nothing
    assert b"gputop ended" not in term.output and not any(tmp_path.iterdir())
    assert gone_within(driver, 3)
