"""The interactive Textual dashboard (`gputop` with no arguments)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
from typing import TYPE_CHECKING

from gputop.errors import UsageError

if TYPE_CHECKING:
    from gputop.exits import ExitSignals
    from gputop.ui.app import GputopApp

NEEDS_TERMINAL = "the dashboard needs a terminal; use --once, --json or query for scripts"


def ensure_terminal() -> None:
    """Give the dashboard a terminal to read keys from (fd 0) and draw on (fd 2, Textual's).

    ``echo | gputop`` or ``gputop 2>log``: the controlling terminal, /dev/tty, takes the place of
    the redirected end, as less and vim do. With no terminal at all (cron, a service, setsid)
    UsageError: the dashboard would only write escape codes into a file until killed.
    """
    redirected = [fd for fd in (0, 1, 2) if not os.isatty(fd)]
    if not redirected:
        return
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise UsageError(NEEDS_TERMINAL) from None
    try:
        for fd in redirected:
            if fd != 1:  # nothing is written on stdout: `gputop >file` may keep its file
                os.dup2(tty, fd)
    finally:
        os.close(tty)


def run_dashboard(args: argparse.Namespace, *, signals: ExitSignals | None = None) -> int:
    """Open the source the options ask for (the demo when there is no driver) and run the app.

    A too-small terminal is not an error: the app says so until the window is resized.
    ``--no-color`` sets NO_COLOR for this process, which Textual honours natively.
    With ``signals``, SIGTERM/SIGHUP/SIGINT quit the app the way the q key does.
    Returns the app's exit code (1 after a crash Textual reported).
    """
    from gputop.engine.source import source_from_args

    # The driver process starts first: it opens the driver while Textual is being imported.
    # If gputop dies without closing the dashboard, it puts the terminal back.
    source = source_from_args(args, fallback_to_demo=True, guard_terminal=True)
    try:
        from textual.theme import BUILTIN_THEMES

        from gputop.ui.app import make_app

        if getattr(args, "no_color", False):
            os.environ["NO_COLOR"] = "1"
        theme = getattr(args, "theme", None)
        if theme is not None and theme not in BUILTIN_THEMES:
            known = ", ".join(sorted(BUILTIN_THEMES))
            raise UsageError(f"unknown theme {theme!r}; known: {known}")
        _opened(source)
        app = make_app(
            source,
            interval_s=getattr(args, "interval", 1.0),
            readonly=getattr(args, "readonly", False),
            audit_log=getattr(args, "audit_log", None),
            theme=theme,
        )
        if signals is not None:
            signals.on_first = lambda signum: _quit_from_signal(app)
        _settle_heap()
        app.run()
    finally:
        source.close()
    return app.return_code or 0


DRIVER_OPEN_WAIT_S = 2.0  # then the dashboard starts anyway and says what the driver is doing


def _opened(source: object) -> None:
    """Fail now, with the driver's own one-line error, if the driver cannot be opened.

    A driver that is merely slow to open (a hung nvmlInit) does not hold the dashboard back:
    after a short wait it starts, and its header says which call is not answering.
    """
    wait_ready = getattr(source, "wait_ready", None)
    if wait_ready is not None:
        wait_ready(DRIVER_OPEN_WAIT_S)


def _quit_from_signal(app: GputopApp) -> None:
    """Ask the app to quit: its own shutdown leaves the alternate screen, shows the cursor, ...

    This runs in a signal handler, between two bytecodes of the event loop's thread: only
    call_soon_threadsafe is safe there. Outside the app's loop (starting, or already closing)
    KeyboardInterrupt unwinds through the finally-blocks instead.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    # A closed terminal sends SIGHUP and then SIGCONT; Textual's SIGCONT handler would start
    # application mode again (new input and writer threads that nobody stops, and the process
    # never exits). We are quitting: nothing is to be resumed.
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
    loop.call_soon_threadsafe(app.exit)


def _settle_heap() -> None:
    """Keep the garbage collector off the startup heap and run it less often.

    The dashboard lives for hours; the ~75,000 objects of its imports never die, yet every full
    collection walked them again (about 45 ms each), and each tick's few thousand short-lived
    objects set off a young collection every few hundred milliseconds. Measured on the dgx demo,
    this cuts the collector's share of the CPU from about 3 ms to under 1 ms a second.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 20)


__all__ = ["ensure_terminal", "run_dashboard"]
