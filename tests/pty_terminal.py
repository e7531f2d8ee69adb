"""A program on a pseudo-terminal, as a person runs it: what it writes there is read back.

Used by the tests that must see the bytes a terminal receives (signals, hostile strings, ASCII
terminals, the quiet input thread), never the widgets' text.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the checkout
START_TIMEOUT_S = 30.0  # a loaded 2-core box imports Textual slowly; usually 1-2 s
EXIT_TIMEOUT_S = 10.0


def clean_env() -> dict[str, str]:
    """The environment without anything that changes how gputop or Textual start."""
    drop = ("GPUTOP", "TEXTUAL", "NO_COLOR", "COLUMNS", "LINES")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "TERM": "xterm-256color", "PYTHONPATH": str(ROOT)}


def _take_terminal() -> None:
    """In the child, after setsid(): make the pty (its stdout) the controlling terminal."""
    fcntl.ioctl(1, termios.TIOCSCTTY, 0)


@dataclass
class Terminal:
    """A gputop process on a pty; ``output`` is everything it wrote there so far."""

    proc: subprocess.Popen[bytes]
    master: int
    output: bytearray = field(default_factory=bytearray)

    def read(self, timeout_s: float) -> bool:
        """Read what is there within ``timeout_s``; False at end of file (no writer left)."""
        ready, _, _ = select.select([self.master], [], [], timeout_s)
        if not ready:
            return True
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every writer closed the terminal
            return False
        self.output += data
        return bool(data)

    def wait_for(self, marker: bytes, timeout_s: float = START_TIMEOUT_S) -> None:
        """Read until ``marker`` was written; fail after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while marker not in self.output:
            if time.monotonic() > deadline or not self.read(0.1):
                pytest.fail(f"no {marker!r} within {timeout_s} s: {bytes(self.output[-500:])!r}")

    def read_to_end(self, timeout_s: float = EXIT_TIMEOUT_S) -> int:
        """Read until end of file and the process has exited; its exit status."""
        deadline = time.monotonic() + timeout_s
        while self.read(0.1):
            if time.monotonic() > deadline:
                pytest.fail(f"still writing after {timeout_s} s")
        return self.proc.wait(timeout=max(0.1, deadline - time.monotonic()))

    def read_for(self, seconds: float) -> None:
        """Read whatever is written during ``seconds`` (stops early at end of file)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and self.read(0.05):
            pass

    def type(self, keys: bytes) -> None:
        """Type ``keys`` on the terminal."""
        os.write(self.master, keys)

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does."""
        os.close(self.master)
        self.master = -1


@contextlib.contextmanager
def on_terminal(
    *argv: str,
    stdin: int | IO[Any] | None = None,
    size: tuple[int, int] = (100, 30),
    env: dict[str, str] | None = None,
) -> Iterator[Terminal]:
    """``python -m gputop ARGV`` in a new session on a pty of ``size`` (its controlling tty).

    stdin is the pty too unless given; ``env`` defaults to :func:`clean_env`. The whole process
    group is killed at the end.
    """
    master, slave = pty.openpty()
    columns, rows = size
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", *argv],
        stdin=slave if stdin is None else stdin,
        stdout=slave,
        stderr=slave,
        env=clean_env() if env is None else env,
        cwd=ROOT,
        start_new_session=True,
        preexec_fn=_take_terminal,  # the test process starts no threads
    )
    os.close(slave)
    term = Terminal(proc, master)
    try:
        yield term
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
        if term.master >= 0:
            os.close(term.master)
