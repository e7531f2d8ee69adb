"""The interactive Textual dashboard (`gputop` with no arguments)."""

from __future__ import annotations

import argparse
import gc
import os
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputop.errors import UsageError
from gputop.ui.terminal_kind import INSTEAD

if TYPE_CHECKING:
    from gputop.engine.history import History
    from gputop.engine.model import Snapshot
    from gputop.engine.sampler import Sampler
    from gputop.engine.source import Source
    from gputop.exits import ExitSignals
    from gputop.ui.app import GputopApp

NEEDS_TERMINAL = "the dashboard needs a terminal; {instead} for scripts"

# The driver textual-serve (`gputop web`) starts each browser session with: keys and frames
# travel as packets on stdin/stdout, so the session has no terminal and needs none.
WEB_DRIVER = "textual.drivers.web_driver:WebDriver"


def served_to_browser() -> bool:
    """Whether Textual will draw for a browser (textual-serve's web driver), not a terminal."""
    return os.environ.get("TEXTUAL_DRIVER") == WEB_DRIVER


def ensure_terminal(instead: str = INSTEAD) -> None:
    """Give the dashboard a terminal to read keys from (fd 0) and draw on (fd 2, Textual's).

    ``echo | gputop`` or ``gputop 2>log``: the controlling terminal, /dev/tty, takes the place of
    the redirected end, as less and vim do. With no terminal at all (cron, a service, setsid)
    UsageError: the dashboard would only write escape codes into a file until killed. The same,
    before any escape code, for a terminal that cannot draw one (TERM=dumb, unset, unknown:
    :mod:`gputop.ui.terminal_kind`). ``instead``: what each refusal points to ("use --once, …").
    Nothing of this when served to a browser: its web driver draws on stdout, a pipe.
    """
    if served_to_browser():
        return
    _take_terminal(instead)
    from gputop.ui.terminal_kind import refusal

    why = refusal(os.environ.get("TERM"), instead=instead)
    if why is not None:
        raise UsageError(why)


def _take_terminal(instead: str) -> None:
    """/dev/tty in place of each redirected standard fd but stdout; UsageError without one."""
    redirected = [fd for fd in (0, 1, 2) if not os.isatty(fd)]
    if not redirected:
        return
    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise UsageError(NEEDS_TERMINAL.format(instead=instead)) from None
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

    The first frame comes early because the work before it runs side by side: the driver process
    starts first and opens the driver on the other core while this one imports Textual, and the
    sampler starts before that import, so its first snapshot (read, enriched) is waiting when the
    app mounts (:class:`EarlySampler`). The collector stays off during the imports (their objects
    live as long as gputop: collecting them while they are made is wasted work), and the one
    collection before the heap is frozen runs while the driver may still be opening.
    """
    from gputop.sources import SLOW_EVERY_S, source_from_args

    collecting = gc.isenabled()
    gc.disable()  # until _settle_heap has collected once and frozen what is left
    try:
        # If gputop dies without closing the dashboard, the driver process puts the terminal back.
        source = source_from_args(
            args, fallback_to_demo=True, guard_terminal=True, slow_every_s=SLOW_EVERY_S
        )
        early: EarlySampler | None = None
        try:
            early = EarlySampler(source, interval_s=getattr(args, "interval", 1.0))
            from textual.theme import BUILTIN_THEMES

            from gputop.ui.app import make_app

            if getattr(args, "no_color", False):
                os.environ["NO_COLOR"] = "1"
            theme = getattr(args, "theme", None)
            if theme is not None and theme not in BUILTIN_THEMES:
                known = ", ".join(sorted(BUILTIN_THEMES))
                raise UsageError(f"unknown theme {theme!r}; known: {known}")
            # The imports are done: settle their heap now, while the driver may still be
            # opening (the wait below is then free), not between the app and its first frame.
            _settle_heap()
            if collecting:
                gc.enable()
            _opened(source)
            app = make_app(
                source,
                interval_s=getattr(args, "interval", 1.0),
                table_refresh_s=getattr(args, "table_refresh", None),
                readonly=getattr(args, "readonly", False),
                audit_log=getattr(args, "audit_log", None),
                theme=theme,
                sampler_factory=early.factory,
            )
            if signals is not None:
                signals.on_first = lambda signum: _quit_from_signal(app)
            app.run()
        finally:
            if early is not None:
                early.stop()
            source.close()
    finally:
        if collecting:
            gc.enable()
    return app.return_code or 0


class EarlySampler:
    """The dashboard's sampler, sampling from before Textual is imported until the app stops.

    The app gets it from :meth:`factory` and starts it on mount (:meth:`start`). Until then the
    newest snapshot it emitted is held back, and :meth:`start` hands it over at once: the app's
    first frame shows data instead of waiting a driver reading and an enrichment more. Behaves
    as a :class:`gputop.ui.bridge.SamplerLike` (pause, interval, history, stop).
    """

    def __init__(self, source: Source, *, interval_s: float) -> None:
        from gputop.engine.sampler import Sampler

        self._lock = threading.Lock()
        self._deliver: Callable[[Snapshot], None] | None = None  # the app's, once started
        self._target: Callable[[Snapshot], None] | None = None  # the app's, once built
        self._held: Snapshot | None = None
        self.sampler: Sampler = Sampler(source, on_snapshot=self._relay, interval_s=interval_s)
        self.sampler.start()

    def factory(
        self, source: Source, on_snapshot: Callable[[Snapshot], None], interval_s: float
    ) -> EarlySampler:
        """The app's sampler factory (gputop.ui.bridge.SamplerFactory): this sampler."""
        self._target = on_snapshot
        self.sampler.interval_s = interval_s
        return self

    @property
    def interval_s(self) -> float:
        return self.sampler.interval_s

    @interval_s.setter
    def interval_s(self, value: float) -> None:
        self.sampler.interval_s = value

    @property
    def paused(self) -> bool:
        return self.sampler.paused

    @paused.setter
    def paused(self, value: bool) -> None:
        self.sampler.paused = value

    @property
    def history(self) -> History:
        return self.sampler.history

    def start(self) -> None:
        """The app is up: hand it the snapshot held for it, and from now on every one."""
        with self._lock:
            self._deliver = self._target
            held, self._held = self._held, None
            if held is not None and self._deliver is not None:
                self._deliver(held)  # under the lock: before any newer one

    def stop(self, timeout: float = 1.0) -> None:
        with self._lock:
            self._deliver = self._target = self._held = None
        self.sampler.stop(timeout)

    def _relay(self, snapshot: Snapshot) -> None:
        # On the sampler thread.
        with self._lock:
            deliver = self._deliver
            if deliver is None:
                self._held = snapshot
                return
        deliver(snapshot)


DRIVER_OPEN_WAIT_S = 2.0  # then the dashboard starts anyway and says what the driver is doing


def _opened(source: Source) -> None:
    """Fail now, with the driver's own one-line error, if the driver cannot be opened.

    A driver that is merely slow to open (a hung nvmlInit) does not hold the dashboard back:
    after a short wait it starts, and its header says which call is not answering. Nor does a
    driver process that crashed opening it: that is shown and restarted, as a later crash is.
    """
    from gputop.engine.deadline import not_open_within

    # Not open in time, or crashed opening it: the header says so; the sampler goes on.
    not_open_within(source, DRIVER_OPEN_WAIT_S)


def _quit_from_signal(app: GputopApp) -> None:
    """Ask the app to quit: its own shutdown leaves the alternate screen, shows the cursor, ...

    This runs in a signal handler, between two bytecodes of the event loop's thread: only
    call_soon_threadsafe is safe there. Outside the app's loop (starting, or already closing)
    KeyboardInterrupt unwinds through the finally-blocks instead.
    """
    import asyncio  # loaded by Textual by then

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        raise KeyboardInterrupt from None
    # A closed terminal sends SIGHUP and then SIGCONT; the driver's SIGCONT handler would take
    # the terminal back and paint it all again (Textual's own started application mode again:
    # threads nobody stopped). We are quitting: nothing is to be resumed.
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


def collect_closed_screen() -> None:
    """Collect the garbage a closed screen left, now: its widgets are cycles, and under the
    thresholds _settle_heap sets a full collection comes only after hundreds of thousands of
    allocations, so before, each GPU detail screen opened and closed added 2.4 MiB of garbage
    (10 opened: 39 -> 67 MiB) until one came. A full collection of what is not frozen, that
    garbage included, takes 17 ms (median; 37 at most, 40 screen changes on dgx), once per
    screen change."""
    gc.collect()


__all__ = [
    "EarlySampler",
    "collect_closed_screen",
    "ensure_terminal",
    "run_dashboard",
    "served_to_browser",
]
