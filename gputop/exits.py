"""How gputop ends: exit signals that run every cleanup, and errors as one line.

Used by the command line and the dashboard alike (the dashboard turns the first exit signal into a
request to quit, so Textual restores the terminal); no Textual here.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from gputop.engine.sanitize import clean

# Exit statuses: the one table that the commands return and their --help (gputop.cli.HELP_EXTRAS)
# documents. 1 and 2 as most Unix tools; doctor's "something is stuck" is 1, as grep's "found".
EXIT_OK = 0
EXIT_FAILURE = (
    1  # output could not be written, Prometheus could not be asked, the dashboard crashed
)
EXIT_STUCK = 1  # doctor: a process holds a GPU without working, or memory nobody accounts for
EXIT_USAGE = 2  # bad input, or a driver that cannot be used (gputop.errors.GputopError)
EXIT_TIMEOUT = 3  # a GPU did not answer within --timeout, or the driver process crashed
EXIT_FLEET_STUCK = 4  # fleet: stuck processes, unattributed memory, Xid errors or a sick GPU
EXIT_FLEET_BLIND = 5  # fleet: a host down or stale, a GPU lost or not responding, a driver gputop
# cannot read, or a host up without GPU series
EXIT_FLEET_STUCK_AND_BLIND = 6  # fleet: both
SIGNAL_EXIT_BASE = 128  # ended by signal N: 128+N, as a shell reports it


def signal_exit(signum: int) -> int:
    """The exit status after signal ``signum`` (SIGHUP 129, SIGINT 130, SIGTERM 143)."""
    return SIGNAL_EXIT_BASE + signum


# Errors a write gives (on stdout, usually) without naming a file.
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def describe_os_error(exc: OSError) -> str:
    """An OSError in words: ``FILE: reason``, ``cannot write: reason`` or the bare reason."""
    reason = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{os.fsdecode(exc.filename)}: {reason}"
    if exc.errno in _WRITE_ERRNOS:
        return f"cannot write: {reason}"
    return reason


def say(message: str) -> None:
    """``gputop: message`` on stderr (cleaned: it may quote other users' strings); never raises."""
    try:
        print(f"gputop: {clean(message)}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        silence(sys.stderr)


def silence_if_broken(stream: Any) -> None:
    """Point ``stream`` at /dev/null when it can no longer be flushed."""
    try:
        stream.flush()
    except (OSError, ValueError):
        silence(stream)


@contextlib.contextmanager
def reader_may_leave(stream: Any) -> Iterator[None]:
    """Write a one-shot's output inside the block: a reader that stops early ends the output,
    not the command, whose exit code stays its verdict.

    ``gputop doctor | head -c1`` must still exit 1 when something is stuck: scripts read the
    code. The pipe closing is no error either (no line, no exit 1): what was written is whole.
    """
    try:
        yield
        stream.flush()
    except BrokenPipeError:
        silence(stream)  # Python's flush at exit would fail on the same pipe


def silence(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null.

    Python flushes stdout and stderr again at exit; on a full disk or a closed pipe that would
    print "Exception ignored ..." after our one line.
    """
    with contextlib.suppress(OSError, ValueError, AttributeError):
        fd = stream.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)


EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _raise_interrupt(_signum: int) -> None:
    raise KeyboardInterrupt


class ExitSignals:
    """SIGTERM, SIGHUP and SIGINT end every mode the way Ctrl-C does, with their own exit code.

    The first of them runs ``on_first`` (default: raise KeyboardInterrupt in the main thread, so
    every loop ends and every finally-block runs: the demo's processes stop, its folder goes).
    Later ones are only noted: cleaning up takes a bounded few seconds and must not be cut short.
    The dashboard replaces ``on_first`` with a request to quit the app, which restores the
    terminal itself.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.on_first: Callable[[int], None] = _raise_interrupt

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        """The signal handler (runs in the main thread, between two bytecodes)."""
        if self.received is not None:
            return
        self.received = signum
        self.on_first(signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[ExitSignals]:
        """Handle the exit signals inside the block; the previous handlers come back after."""
        with handling(EXIT_SIGNALS, self.handle):
            yield self


SignalHandler = Callable[[int, FrameType | None], None]


@contextlib.contextmanager
def handling(signals: tuple[int, ...], handler: SignalHandler) -> Iterator[None]:
    """``handler`` for ``signals`` inside the block, the previous handlers again after it.

    Outside the main thread nothing is installed (signal.signal works only there).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            if old is not None:  # None: set outside Python, nothing to put back
                signal.signal(sig, old)
