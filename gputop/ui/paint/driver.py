"""Textual's Linux driver with an input thread that sleeps until there is input.

Textual's own input thread wakes every 0.1 s (to notice a lone Esc and to check for exit): ten
wake-ups a second, about 0.15 % of a core on a dashboard nobody is typing into. Here the thread
waits without a timeout, except while the parser holds the start of a possible escape
sequence, and ``disable_input()`` wakes it through a pipe so quitting stays instant.

Where the terminal cannot carry Unicode (an ISO-8859-1 or ASCII locale, PYTHONIOENCODING=ascii),
write() turns each character it cannot encode into an ASCII stand-in of the same width: Textual
draws box-drawing borders, scrollbars and block characters of its own, which would otherwise
come out as ``\\u2500`` (stderr's backslashreplace) or not at all.

Private Textual names, each with Textual's own input thread as the fallback: the parser
(``textual._parser``, ``textual._xterm_parser``: imported if there), the parser's
``_timeout_time`` (missing: poll every 0.1 s, as Textual does) and the driver's ``_debug`` and
``_file`` (missing: no debug, stderr, as Textual's LinuxDriver). ``GPUTOP_PLAIN_TEXTUAL=1``
(``gputop.ui.paint.PLAIN_TEXTUAL``) runs Textual's input thread.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import sys
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from typing import Any

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from gputop import glyphs
from gputop.ui import paint

try:  # Textual's private parser (textual>=8,<9 has it here); pyproject pins that range
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser
except ImportError:  # pragma: no cover - a Textual that moved it: its own input thread then
    ParseError = EOFError  # type: ignore[misc,assignment]
    XTermParser = None  # type: ignore[misc,assignment]

# Used when the parser is waiting for the rest of an escape sequence, or when a future Textual
# no longer tells us (then this is Textual's own behaviour).
PENDING_POLL_S = 0.1


def _pending(parser: Any) -> bool:
    """True when the parser waits on a timeout (a lone Esc becomes a key only after it)."""
    return getattr(parser, "_timeout_time", 0.0) is not None


def read_input(
    fileno: int,
    wake_fd: int,
    stop: threading.Event,
    parser: Any,  # textual._xterm_parser.XTermParser
    deliver: Callable[[Message], None],
) -> None:
    """Feed what arrives on ``fileno`` to ``parser`` and each event to ``deliver`` until ``stop``
    or the end of input.

    Sleeps in select() with no timeout while nothing is pending; a byte on ``wake_fd`` (or
    input) wakes it.
    """
    decode = getincrementaldecoder("utf-8")().decode
    selector = selectors.SelectSelector()  # as Textual: select() works for every tty kind
    selector.register(fileno, selectors.EVENT_READ)
    selector.register(wake_fd, selectors.EVENT_READ)
    try:
        while not stop.is_set():
            events = selector.select(PENDING_POLL_S if _pending(parser) else None)
            for key, _ in events:
                if key.fd == wake_fd:
                    os.read(wake_fd, 64)  # it only wakes the loop to look at ``stop``
                    continue
                try:
                    raw = os.read(fileno, 4096)
                except OSError:  # EIO: the terminal hung up (its window or SSH session closed)
                    raw = b""
                if not raw:
                    # End of input: nothing more can come, so the thread ends. Waiting for a
                    # stop that a hung-up terminal may never bring kept gputop alive: this is
                    # not a daemon thread, and the interpreter waits for it at exit.
                    return
                for event in parser.feed(decode(raw)):
                    deliver(event)
            for event in parser.tick():
                deliver(event)
    finally:
        selector.close()
        try:
            for _ in parser.feed(""):
                pass
        except (EOFError, ParseError):
            pass


class WakingEvent(threading.Event):
    """An Event whose set() also writes a byte to a pipe, waking a select() on its other end."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._wake_fd: int | None = None

    def attach(self, wake_fd: int | None) -> None:
        """Write to ``wake_fd`` on each set() from now on (None: stop writing)."""
        with self._lock:
            self._wake_fd = wake_fd

    def set(self) -> None:
        super().set()
        with self._lock:
            if self._wake_fd is not None:
                with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
                    os.write(self._wake_fd, b"\0")


class CalmLinuxDriver(LinuxDriver):
    """LinuxDriver whose input thread sleeps while no key arrives; see the module docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Textual's disable_input() sets exit_event, then joins the input thread.
        self.exit_event: WakingEvent = WakingEvent()
        # None where the terminal takes Unicode (UTF-8): then write() costs nothing more.
        self._to_terminal = glyphs.translator(glyphs.output_encoding(self._output()))

    def _output(self) -> Any:
        """The stream Textual writes to: its private ``_file``, else stderr (as LinuxDriver)."""
        if not paint.PLAIN_TEXTUAL:
            output = getattr(self, "_file", None)
            if output is not None:
                return output
        return sys.__stderr__

    def calm_input(self) -> bool:
        """Whether run_input_thread() runs the calm thread (else Textual's own)."""
        return XTermParser is not None and not paint.PLAIN_TEXTUAL

    def write(self, data: str) -> None:
        to_terminal = self._to_terminal
        super().write(data if to_terminal is None else to_terminal(data))

    def run_input_thread(self) -> None:
        if not self.calm_input():
            super().run_input_thread()  # Textual's own: wakes ten times a second, works the same
            return
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        self.exit_event.attach(wake_w)
        try:
            read_input(
                self.fileno,
                wake_r,
                self.exit_event,
                XTermParser(bool(getattr(self, "_debug", False))),
                self.process_message,
            )
        finally:
            self.exit_event.attach(None)
            os.close(wake_r)
            os.close(wake_w)
