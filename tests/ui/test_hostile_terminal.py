"""The bytes the real dashboard writes to its terminal carry no hostile byte from a process.

The dashboard runs in a pty, as a person would run it, on a scenario listing a real process whose
argv, environment and zombie child's name hold terminal escapes, C1, bidi and newlines; the test
opens that process's detail and environment, quits, and reads everything written to the terminal.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import HostileBox, hostile_box

COLS, ROWS = 200, 50


class Terminal:
    """A process on a pty of COLS x ROWS; everything it writes is kept in ``written``."""

    def __init__(self, argv: list[str]) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLS), "LINES": str(ROWS)}
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
        )
        os.close(slave)
        self.written = b""

    def read_until(self, needle: bytes, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while needle not in self.written:
            assert time.monotonic() < deadline, f"{needle!r} never appeared"
            self._read(0.1)

    def settle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._read(0.05)

    def type(self, keys: bytes, pause_s: float = 0.4) -> None:
        os.write(self.master, keys)
        self.settle(pause_s)

    def finish(self, timeout_s: float = 15.0) -> int:
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        self.settle(0.2)
        rc = self.proc.poll()
        assert rc is not None, "the dashboard did not exit"
        return rc

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        os.close(self.master)

    def _read(self, wait_s: float) -> None:
        ready, _, _ = select.select([self.master], [], [], wait_s)
        if ready:
            try:
                self.written += os.read(self.master, 65536)
            except OSError:  # EIO: the other side closed
                time.sleep(wait_s)


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[HostileBox]:
    with hostile_box(tmp_path) as box:
        yield box


def test_dashboard_writes_no_hostile_byte_to_the_terminal(
    hostile: HostileBox,
) -> None:
    scenario, pid = hostile.scenario, hostile.pid
    term = Terminal([sys.executable, "-m", "gputop", "--scenario", str(scenario)])
    try:
        term.read_until(str(pid).encode())  # the process table shows the hostile process
        term.settle(1.5)
        term.type(b"/" + str(pid).encode() + b"\r")  # filter to it, then open its detail
        term.type(b"\r", 1.0)
        term.read_until(b"Parent chain")
        term.type(b"e", 1.0)  # its environment
        term.read_until(b"GPUTOP_EVIL")
        term.type(b"q")  # back to the table
        term.type(b"\x1b", 1.0)  # clear the filter
        term.type(b"q")
        assert term.finish() == 0
    finally:
        term.close()
    out = term.written
    # The hostile text is there, written out as visible escapes...
    assert b"\\x1b]0;OWNED\\x07" in out
    assert b"=\\x1b]0;ENV\\x07\\u202e" in out  # GPUTOP_EVIL, after its bold name
    assert b"\\x1b]0;PWN\\x07" in out  # the zombie's name
    assert b"A100\\x1b]0;GPU\\x07" in out
    # ...and never as the bytes themselves: no title change, no C1 CSI, no bidi override.
    assert b"]0;OWNED" not in out.replace(b"\\x1b]0;OWNED", b"")
    assert b"]0;ENV" not in out.replace(b"\\x1b]0;ENV", b"")
    assert b"]0;PWN" not in out.replace(b"\\x1b]0;PWN", b"")
    assert b"\x07" not in re.sub(rb"\x1b\]22;[a-z-]*\x07", b"", out)  # but Textual's pointer shape
    assert b"\xc2\x9b" not in out
    assert b"\xe2\x80\xae" not in out
