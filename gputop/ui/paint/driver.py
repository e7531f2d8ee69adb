"""Textual's Linux driver with an input thread that sleeps until there is input.

Textual's own input thread wakes every 0.1 s (to notice a lone Esc and to check for exit): ten
wake-ups a second, about 0.15 % of a core on a dashboard nobody is typing into. Here the thread
waits without a timeout, except while the parser holds the start of a possible escape
sequence, and ``disable_input()`` wakes it through a pipe so quitting stays instant.

Where the terminal cannot carry Unicode (an ISO-8859-1 or ASCII locale, PYTHONIOENCODING=ascii),
write() turns each character it cannot encode into an ASCII stand-in of the same width: Textual
draws box-drawing borders, scrollbars and block characters of its own, which would otherwise
come out as ``\\u2500`` (stderr's backslashreplace) or not at all.

The calm thread needs Textual's private parser (gputop.ui.textual_private, feature-tested at
import); without it, or with ``GPUTOP_PLAIN_TEXTUAL=1`` (``gputop.ui.paint.PLAIN_TEXTUAL``),
Textual's own input thread runs.

Stopping and continuing (SIGSTOP or SIGTSTP, then SIGCONT, any number of times) is handled here
whatever PLAIN_TEXTUAL says: it is a fix, not a faster path. Textual's own SIGCONT handler started
application mode again even when nothing had stopped it (a plain SIGSTOP): a second writer and a
second input thread, the first one never woken again, so ``q`` left the process hanging at exit
with a blank screen. And Textual did that work inside the signal handler, which may interrupt the
event loop while it holds the writer queue's lock. Here both handlers only queue the work on the
event loop; SIGCONT starts application mode again only after a SIGTSTP stopped it, otherwise it
takes the terminal back (raw mode, alternate screen, mouse), and either way the whole screen is
painted again. Only public paths: the app, ``debug`` and ``mouse`` are the constructor's own
arguments, ``no_automatic_restart()`` is counted as it is entered, and a start that Textual
refused (in the background) is one that wrote nothing.
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
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from gputop import glyphs
from gputop.ui import paint, textual_private

if TYPE_CHECKING:
    from textual.app import App

# Used when the parser is waiting for the rest of an escape sequence, or when a future Textual
# no longer tells us (then this is Textual's own behaviour).
PENDING_POLL_S = 0.1

# What Textual's start_application_mode() turns on, written again after a plain SIGSTOP:
# alternate screen, cursor hidden, focus events, bracketed paste, no line wrap; the mouse.
TAKE_BACK = "\x1b[?1049h\x1b[?25l\x1b[?1004h\x1b[?2004h\x1b[?7l"
MOUSE_ON = "\x1b[?1000h\x1b[?1003h\x1b[?1015h\x1b[?1006h"


def read_input(
    fileno: int,
    wake_fd: int,
    stop: threading.Event,
    parser: textual_private.InputParser,
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
            events = selector.select(
                PENDING_POLL_S if textual_private.parser_pending(parser) else None
            )
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
        except textual_private.INPUT_END_ERRORS:
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

    def __init__(
        self,
        app: App[Any],
        *,
        debug: bool = False,
        mouse: bool = True,
        size: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(app, debug=debug, mouse=mouse, size=size)
        # Our own copies of what Textual keeps in private fields: its constructor's arguments.
        self._calm_app = app
        self._calm_debug = debug
        self._calm_mouse = mouse
        self._restart_paused = 0  # inside no_automatic_restart(): SIGTSTP only stops
        self._starting = False  # inside start_application_mode()
        self._wrote = False  # ... and it wrote to the terminal: application mode started
        # Textual's disable_input() sets exit_event, then joins the input thread.
        self.exit_event: WakingEvent = WakingEvent()
        # None where the terminal takes Unicode (UTF-8): then write() costs nothing more.
        # LinuxDriver writes to sys.__stderr__ (its writer thread is given no other stream).
        self._to_terminal = glyphs.translator(glyphs.output_encoding(sys.__stderr__))
        self._app_loop: asyncio.AbstractEventLoop | None = None  # the app's, once started
        self._mode_on = False  # application mode is on: the terminal is ours
        self._stopped_by_tstp = False  # SIGTSTP ended application mode: SIGCONT starts it
        self._continued = False  # a SIGCONT came after the last SIGTSTP
        self._raw_attrs: list[Any] | None = None  # the terminal modes application mode set
        # Textual's __init__ installed its own handlers for these two; see the module docstring.
        signal.signal(signal.SIGTSTP, self._on_sigtstp)
        signal.signal(signal.SIGCONT, self._on_sigcont)

    def calm_input(self) -> bool:
        """Whether run_input_thread() runs the calm thread (else Textual's own)."""
        return textual_private.CALM_INPUT and not paint.PLAIN_TEXTUAL

    def write(self, data: str) -> None:
        if self._starting:
            self._wrote = True
        to_terminal = self._to_terminal
        super().write(data if to_terminal is None else to_terminal(data))

    def start_application_mode(self) -> None:
        self._app_loop = asyncio.get_running_loop()
        self._starting, self._wrote = True, False
        try:
            super().start_application_mode()  # type: ignore[no-untyped-call]
        finally:
            self._starting = False
        # Textual returns without starting anything when a background job may not touch the
        # terminal (it stops the process instead): then it wrote nothing (not even the
        # alternate screen's switch, its first write).
        self._mode_on = self._wrote
        self._raw_attrs = None
        if self._mode_on:
            with contextlib.suppress(termios.error):
                self._raw_attrs = termios.tcgetattr(self.fileno)

    @contextlib.contextmanager
    def no_automatic_restart(self) -> Iterator[None]:
        # Textual's App.suspend() runs a program in the terminal inside this: a SIGTSTP then
        # only stops the process (as Textual's own handler), it does not leave the terminal.
        self._restart_paused += 1
        try:
            with super().no_automatic_restart():
                yield
        finally:
            self._restart_paused -= 1

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
        if self._mode_on and not self._restart_paused:
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
        # The screen may be blank (a new alternate screen) or show the shell's lines.
        self._calm_app.refresh(layout=True)

    def _take_terminal_back(self) -> None:
        """Application mode's terminal state again, after a SIGSTOP that Textual never saw.

        The shell that got the terminal meanwhile may have put back its own modes (cooked,
        echoing). Threads and Kitty's pushed key flags are left as they are: both still hold.
        """
        if self._raw_attrs is not None:
            # In the background this stops the process (SIGTTOU) until it is in front again.
            with contextlib.suppress(termios.error):
                termios.tcsetattr(self.fileno, termios.TCSANOW, self._raw_attrs)
        mouse = MOUSE_ON if self._calm_mouse else ""
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
                textual_private.xterm_parser(self._calm_debug),
                self.process_message,
            )
        finally:
            self.exit_event.attach(None)
            os.close(wake_r)
            os.close(wake_w)
