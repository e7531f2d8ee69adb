"""The real dashboard on a pty, stopped and continued (SIGSTOP or SIGTSTP, then SIGCONT) many times.

After each SIGCONT the whole screen is painted again and the keys still work; then ``q`` quits at
once with exit 0 and the terminal restored. Before the fix the first SIGCONT started a second pair
of input/writer threads: the screen went blank and gputop never exited.
"""

from __future__ import annotations

import os
import signal
import termios
import time
from pathlib import Path

import pytest

from tests.pty_terminal import EXIT_TIMEOUT_S, Terminal, on_terminal
from tests.ui.test_signals import assert_demo_gone, assert_terminal_restored, demo_of

# The process table's column titles: drawn in full frames, not rewritten by a steady tick.
FULL_FRAME = b"GPU-MEM"
ENTER_ALT_SCREEN = b"\x1b[?1049h"
QUIT_WITHIN_S = 5.0


def _state(pid: int) -> str:
    """The process's state letter from /proc (R, S, T, Z, ...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def _until_state(term: Terminal, states: str, timeout_s: float = 10.0) -> None:
    """Read the terminal until the process is in one of ``states`` (it keeps writing meanwhile)."""
    deadline = time.monotonic() + timeout_s
    while _state(term.proc.pid) not in states:
        if time.monotonic() > deadline:
            pytest.fail(f"process {term.proc.pid} not in {states!r} after {timeout_s} s")
        term.read(0.05)


def _repainted_after(term: Terminal, mark: int, timeout_s: float = 10.0) -> None:
    """A full frame was written after ``mark`` (bytes of output)."""
    deadline = time.monotonic() + timeout_s
    while FULL_FRAME not in term.output[mark:]:
        if time.monotonic() > deadline or not term.read(0.1):
            pytest.fail(f"no repaint after SIGCONT: {bytes(term.output[mark:][-300:])!r}")


def _quit_with_q(term: Terminal) -> bytes:
    """Type q; the process must exit 0 within QUIT_WITHIN_S. What it wrote meanwhile."""
    mark = len(term.output)
    started = time.monotonic()
    term.type(b"q")
    assert term.read_to_end(QUIT_WITHIN_S) == 0
    assert time.monotonic() - started < QUIT_WITHIN_S
    return bytes(term.output[mark:])


def test_a_steady_tick_does_not_redraw_the_column_titles() -> None:
    """The repaint checks below mean something only if a steady tick leaves the titles alone."""
    with on_terminal("--demo") as term:
        term.wait_for(FULL_FRAME)
        # The demo settles first: its processes start, die and leave holders, the notes come
        # and the layout moves (whole repaints, the titles with them). Under load that takes a
        # few seconds; after it, ticks leave the titles alone. Every tick redrawing them fails.
        for _ in range(8):
            mark = len(term.output)
            term.read_for(2.5)
            assert len(term.output) > mark, "the demo ticked"
            if FULL_FRAME not in term.output[mark:]:
                break
        else:
            pytest.fail("every 2.5 s of ticks redrew the column titles, for 20 s")
        _quit_with_q(term)


def test_sigstop_sigcont_many_times_then_q_quits_at_once() -> None:
    with on_terminal("--demo") as term:
        term.wait_for(FULL_FRAME)
        demo = demo_of(term.proc.pid)
        term.read_for(1.0)
        for _ in range(4):
            os.kill(term.proc.pid, signal.SIGSTOP)
            _until_state(term, "T")
            mark = len(term.output)
            os.kill(term.proc.pid, signal.SIGCONT)
            _repainted_after(term, mark)
        assert_terminal_restored(_quit_with_q(term))
    assert_demo_gone(demo)


def test_sigcont_takes_back_a_terminal_the_shell_made_cooked() -> None:
    """A shell that got the terminal while gputop was stopped puts back echo and line mode."""
    with on_terminal("--demo") as term:
        term.wait_for(FULL_FRAME)
        term.read_for(1.0)
        os.kill(term.proc.pid, signal.SIGSTOP)
        _until_state(term, "T")
        attrs = termios.tcgetattr(term.master)
        attrs[3] |= termios.ECHO | termios.ICANON  # the shell's modes
        termios.tcsetattr(term.master, termios.TCSANOW, attrs)
        mark = len(term.output)
        os.kill(term.proc.pid, signal.SIGCONT)
        _repainted_after(term, mark)
        lflag = termios.tcgetattr(term.master)[3]
        assert not lflag & (termios.ECHO | termios.ICANON)
        # In line mode a lone q would wait for Enter and never reach gputop.
        assert_terminal_restored(_quit_with_q(term))


def test_sigtstp_sigcont_like_ctrl_z_and_fg_then_q_quits() -> None:
    """SIGTSTP leaves the terminal as it was and stops; SIGCONT comes back into the dashboard."""
    with on_terminal("--demo") as term:
        term.wait_for(FULL_FRAME)
        demo = demo_of(term.proc.pid)
        term.read_for(1.0)
        for _ in range(3):
            mark = len(term.output)
            os.kill(term.proc.pid, signal.SIGTSTP)
            _until_state(term, "T")
            term.read_for(0.2)
            assert_terminal_restored(bytes(term.output[mark:]))
            mark = len(term.output)
            os.kill(term.proc.pid, signal.SIGCONT)
            term.wait_for(ENTER_ALT_SCREEN)
            _repainted_after(term, mark)
            assert ENTER_ALT_SCREEN in term.output[mark:]
        assert_terminal_restored(_quit_with_q(term))
    assert_demo_gone(demo)


def test_a_sigcont_while_leaving_the_terminal_does_not_leave_gputop_stopped() -> None:
    """SIGTSTP, then SIGCONT before gputop has left the terminal: it must not stop after all.

    Leaving waits for the writer thread, here held by a full pty nobody reads (a slow terminal):
    the SIGCONT comes in the meantime, and a stop after it would wait for one more forever.
    """
    with on_terminal("--demo", size=(250, 80)) as term:  # a full frame overfills the pty
        term.wait_for(FULL_FRAME)
        term.read_for(1.0)
        for _ in range(2):
            os.kill(term.proc.pid, signal.SIGTSTP)
            _until_state(term, "T")
            os.kill(term.proc.pid, signal.SIGCONT)
            time.sleep(0.5)  # unread: the repaint fills the pty and the writer waits
            os.kill(term.proc.pid, signal.SIGTSTP)
            time.sleep(0.5)  # leaving the terminal waits on that writer
            mark = len(term.output)
            os.kill(term.proc.pid, signal.SIGCONT)
            _repainted_after(term, mark)
            term.read_for(1.0)
            assert _state(term.proc.pid) != "T"
        assert_terminal_restored(_quit_with_q(term))


def test_sigcont_alone_changes_nothing_and_q_quits() -> None:
    """``kill -CONT`` of a running gputop: a repaint, then it quits as usual."""
    with on_terminal("--demo") as term:
        term.wait_for(FULL_FRAME)
        term.read_for(1.0)
        mark = len(term.output)
        os.kill(term.proc.pid, signal.SIGCONT)
        _repainted_after(term, mark)
        assert_terminal_restored(_quit_with_q(term))
        assert term.proc.wait(timeout=EXIT_TIMEOUT_S) == 0
