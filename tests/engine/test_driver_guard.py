"""The last-resort guard: gputop dies with the dashboard up, its driver process mends the terminal.

A real pseudo-terminal: a gputop-like process puts it in raw mode, the alternate screen and
mouse tracking, as Textual does, and is then killed (SIGKILL) or crashes (SIGSEGV).
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

from gputop.engine.child import TERMINAL_RESET

ROOT = Path(__file__).resolve().parents[2]

DASHBOARD_LIKE = """
import os, sys, time, tty
from gputop.engine.source import open_source
source = open_source(demo="dgx", isolated=True, guard_terminal=True)
source.snapshot()
tty.setraw(2)
os.write(2, b"\\x1b[?1049h\\x1b[?1000h\\x1b[?1003h\\x1b[?25l")
print(source.pid, flush=True)
time.sleep(60)
"""


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    seen = b""
    end = time.monotonic() + seconds
    while needle not in seen and time.monotonic() < end:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _run_and_kill(how: signal.Signals, env: dict[str, str]) -> tuple[bytes, list[int], int]:
    master, slave = pty.openpty()
    before = termios.tcgetattr(slave)
    proc = subprocess.Popen(
        [sys.executable, "-c", DASHBOARD_LIKE],
        cwd=ROOT,
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=slave,
        env=env,
        text=True,
    )
    try:
        assert proc.stdout is not None
        driver_pid = int(proc.stdout.readline())
        assert not termios.tcgetattr(slave)[3] & termios.ICANON  # raw, as a dashboard leaves it
        os.kill(proc.pid, how)
        proc.wait(timeout=10)
        output = _read_until(master, b"\r\n", 5)
        # The guard writes its line last; give it a moment to finish the whole message.
        output += _read_until(master, b"\n", 0.5)
        after = termios.tcgetattr(slave)
        assert after[3] == before[3], "the terminal's local modes were not put back"
        return output, after, driver_pid
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
        os.close(slave)


def _gone(pid: int, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_sigkill_leaves_a_working_terminal(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    output, _, driver = _run_and_kill(signal.SIGKILL, env)
    assert TERMINAL_RESET.encode() in output  # mouse off, cursor on, main screen back
    assert b"terminal was put back" in output
    assert not any(tmp_path.iterdir()), "no crash report for a kill"
    assert _gone(driver, 3)


def test_a_crash_of_gputop_goes_to_a_file_named_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path)}
    output, _, driver = _run_and_kill(signal.SIGSEGV, env)
    assert TERMINAL_RESET.encode() in output
    text = output.decode("utf-8", "replace")
    assert "Fatal Python error" not in text, "the dump went over the screen"
    reports = list((tmp_path / "gputop").glob("crash-*.txt"))
    assert len(reports) == 1
    line = text[text.index("gputop crashed") :].splitlines()[0]
    assert line.startswith("gputop crashed (Segmentation fault); the report is in ")
    assert str(reports[0]) in line
    assert "Fatal Python error: Segmentation fault" in reports[0].read_text()
    assert _gone(driver, 3)


def test_a_clean_exit_leaves_the_terminal_alone() -> None:
    master, slave = pty.openpty()
    code = (
        "from gputop.engine.source import open_source\n"
        "s = open_source(demo='dgx', isolated=True, guard_terminal=True)\n"
        "s.snapshot()\n"
        "s.close()\n"
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, stdin=slave, stderr=slave, timeout=60
        )
        assert proc.returncode == 0
        assert _read_until(master, b"\x1b", 1.0) == b""  # not one escape code written
    finally:
        os.close(master)
        os.close(slave)
