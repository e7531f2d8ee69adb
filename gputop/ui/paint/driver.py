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

Stopping and continuing (SIGSTOP or SIGTSTP, then SIGCONT, any number of times) is handled here
whatever PLAIN_TEXTUAL says: it is a fix, not a faster path. Textual's own SIGCONT handler started
application mode again even when nothing had stopped it (a plain SIGSTOP): a second writer and a
second input thread, the first one never woken again, so ``q`` left the process hanging at exit
with a blank screen. And Textual did that work inside the signal handler, which may interrupt the
event loop while it holds the writer queue's lock. Here both handlers only queue the work on the
event loop; SIGCONT starts application mode again only after a SIGTSTP stopped it, otherwise it
takes the terminal back (raw mode, alternate screen, mouse), and either way the whole screen is
painted again. Private names again, looked up with a default: the driver's ``_app``,
``_writer_thread``, ``_auto_restart`` and ``_mouse``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import sys
import termios
import threading
from codecs import getincrementaldecoder
from collections.abc import Callable
from types import FrameType
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

_MISSING = object()  # a private Textual name that a future Textual no longer has

# What Textual's start_application_mode() turns on, written again after a plain SIGSTOP:
# alternate screen, cursor hidden, focus events, bracketed paste, no line wrap; the mouse.
TAKE_BACK = "\x1b[?1049h\x1b[?25l\x1b[?1004h\x1b[?2004h\x1b[?7l"
MOUSE_ON = "\x1b[?1000h\x1b[?1003h\x1b[?1015h\x1b[?1006h"


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
        self._app_loop: asyncio.AbstractEventLoop | None = None  # the app's, once started
        self._mode_on = False  # application mode is on: the terminal is ours
        self._stopped_by_tstp = False  # SIGTSTP ended application mode: SIGCONT starts it
        self._continued = False  # a SIGCONT came after the last SIGTSTP
        self._raw_attrs: list[Any] | None = None  # the terminal modes application mode set
        # Textual's __init__ installed its own handlers for these two; see the module docstring.
        signal.signal(signal.SIGTSTP, self._on_sigtstp)
        signal.signal(signal.SIGCONT, self._on_sigcont)

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

    def start_application_mode(self) -> None:
        self._app_loop = asyncio.get_running_loop()
        writer = getattr(self, "_writer_thread", _MISSING)
        super().start_application_mode()  # type: ignore[no-untyped-call]
        # Textual returns without starting anything when a background job may not touch the
        # terminal (it stops the process instead): then there is no new writer thread.
        started = getattr(self, "_writer_thread", _MISSING)
        self._mode_on = started is _MISSING or started is not writer
        self._raw_attrs = None
        if self._mode_on:
            with contextlib.suppress(termios.error):
                self._raw_attrs = termios.tcgetattr(self.fileno)

    def stop_application_mode(self) -> None:
        self._mode_on = False
        super().stop_application_mode()

    def _on_sigtstp(self, _signum: int, _frame: FrameType | None) -> None:
        """SIGTSTP (``kill -TSTP``, Textual's suspend_process): leave the terminal, then stop."""
        self._continued = False
        if not self._on_loop(self._suspend_and_stop):
            os.kill(os.getpid(), signal.SIGSTOP)  # no app running: nothing to put back

    def _on_sigcont(self, _signum: int, _frame: FrameType | None) -> None:
        """SIGCONT, after SIGTSTP or a plain SIGSTOP: take the terminal back and repaint."""
        self._continued = True
        self._on_loop(self._continue)

    def _on_loop(self, work: Callable[[], None]) -> bool:
        """Run ``work`` on the app's event loop; False when there is none (not yet, or no more).

        Called from a signal handler: call_soon_threadsafe is all that is safe there.
        """
        loop = self._app_loop
        if loop is None or loop.is_closed():
            return False
        try:
            loop.call_soon_threadsafe(work)
        except RuntimeError:  # closed meanwhile
            return False
        return True

    def _suspend_and_stop(self) -> None:
        if self._mode_on and getattr(self, "_auto_restart", True):
            self.suspend_application_mode()  # the terminal as before gputop; threads ended
            self._stopped_by_tstp = True
        # Leaving the terminal can wait on a slow one; a SIGCONT that came meanwhile already
        # undid this stop (stopping now would wait for one more that nobody sends).
        if not self._continued:
            os.kill(os.getpid(), signal.SIGSTOP)

    def _continue(self) -> None:
        if self._stopped_by_tstp:
            self.resume_application_mode()
            if not self._mode_on:
                return  # still in the background: Textual stopped the process again
            self._stopped_by_tstp = False
        elif self._mode_on:
            self._take_terminal_back()
        else:
            return  # quitting, or never started: nothing to resume
        app = getattr(self, "_app", None)
        if app is not None:
            # The screen may be blank (a new alternate screen) or show the shell's lines.
            app.refresh(layout=True)

    def _take_terminal_back(self) -> None:
        """Application mode's terminal state again, after a SIGSTOP that Textual never saw.

        The shell that got the terminal meanwhile may have put back its own modes (cooked,
        echoing). Threads and Kitty's pushed key flags are left as they are: both still hold.
        """
        if self._raw_attrs is not None:
            # In the background this stops the process (SIGTTOU) until it is in front again.
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self._raw_attrs)
        mouse = MOUSE_ON if getattr(self, "_mouse", True) else ""
        self.write(TAKE_BACK + mouse)
        self.flush()

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
