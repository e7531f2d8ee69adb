"""GputopApp: the sampler link, the keys that work on every screen, and the shared state.

The main view is a screen of its own (gputop.ui.screens.main). Each screen draws the app's
``snapshot`` itself: they watch it, and the app sets it once per tick.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events
from textual.app import App
from textual.binding import Binding, BindingType
from textual.driver import Driver
from textual.geometry import Size
from textual.reactive import var
from textual.screen import Screen

from gputop.engine.audit_log import check_audit_log
from gputop.engine.history import History
from gputop.engine.model import Snapshot
from gputop.engine.source import Source
from gputop.ui import collect_closed_screen, paint
from gputop.ui.bridge import SamplerFactory, SamplerLike, default_sampler
from gputop.ui.keys import APP_BINDINGS
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.main import MainScreen
from gputop.ui.screens.too_small import TooSmallScreen, too_small
from gputop.ui.textual_private import prune_closed_watchers, stop_styles_cache_leak

if TYPE_CHECKING:  # imported when first opened (the help, a process's detail): not at start
    from gputop.engine.kill import Killer
    from gputop.ui.screens.process_detail import ProcessDetailScreen

# The -/+ keys walk these; each lies within the bounds every interval obeys (argtypes, tested).
INTERVAL_STEPS_S = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
STALE_AFTER_INTERVALS = 2.5
STALE_MIN_S = 3.0


class GputopApp(App[int]):
    """The interactive dashboard. Build it with make_app()."""

    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [*APP_BINDINGS]

    # What the screens show; they watch these. var: setting one repaints nothing by itself.
    snapshot: var[Snapshot | None] = var(None, always_update=True)  # no deep compare per tick
    interval_s: var[float] = var(1.0)
    paused: var[bool] = var(False)
    stale_s: var[float | None] = var(None)  # seconds without a fresh sample, once too many

    def __init__(
        self,
        source: Source | None,
        *,
        interval_s: float = 1.0,
        readonly: bool = False,
        audit_log: str | Path | None = None,
        theme: str | None = None,
        sampler_factory: SamplerFactory | None = None,
        start_sampler: bool = True,
        clock: Callable[[], float] = time.monotonic,
        table_refresh_s: float | None = None,
    ) -> None:
        super().__init__()
        if not paint.PLAIN_TEXTUAL:
            stop_styles_cache_leak()  # every screen opened kept its widgets' rendered lines
        self.source = source
        self.interval_s = interval_s
        self.readonly = readonly
        self.audit_log = audit_log
        self._killer: Killer | None = None  # built when first needed: see killer
        if not readonly and audit_log is not None:
            check_audit_log(audit_log)  # an unwritable log fails now, not at the first kill
        self.requested_theme = theme
        self.clock = clock
        self._started_at = clock()
        # Time paused since the reading on screen was taken: not stale time. Right after a
        # resume that reading is as fresh as when the pause began (the sampler reads at once).
        self._paused_s = 0.0
        self._paused_at: float | None = None
        self.sampler: SamplerLike | None = None
        if start_sampler and source is not None:
            factory = sampler_factory or default_sampler
            self.sampler = factory(source, self._from_sampler, interval_s)
        # One history: the sampler's. Without one, whoever posts SnapshotReady (tests, the
        # screenshot scenes) stands in for it, and the app records what they post.
        self.history = self.sampler.history if self.sampler else History()
        self.main_screen = MainScreen(
            history=self.history,
            killer=None if readonly else self._the_killer,
            # No source (scenes, tests posting snapshots): no box, so no device folder to read.
            # Asked when needed: the driver may not have said yet, and a restart may move it.
            dev_dir=(lambda: source.dev_dir) if source is not None else (lambda: os.devnull),
            table_refresh_s=table_refresh_s,
        )

    @property
    def killer(self) -> Killer | None:
        """What sends signals; None in --readonly."""
        return None if self.readonly else self._the_killer()

    def _the_killer(self) -> Killer:
        # Built, and gputop.engine.kill imported (0.65 MiB of imports), when first needed:
        # drawing the dashboard never needs it (issue 42).
        if self._killer is None:
            from gputop.engine.kill import Killer

            self._killer = Killer(audit_log=self.audit_log)
        return self._killer

    def get_driver_class(self) -> type[Driver]:
        driver = super().get_driver_class()
        if driver.__module__ != "textual.drivers.linux_driver":
            return driver  # Windows, or a driver chosen with TEXTUAL_DRIVER
        # Textual's Linux input thread wakes ten times a second even when nobody types.
        from gputop.ui.paint.driver import CalmLinuxDriver  # imports termios: Unix only

        return CalmLinuxDriver

    def get_default_screen(self) -> Screen[Any]:
        return self.main_screen

    def on_mount(self) -> None:
        if self.requested_theme:
            self.theme = self.requested_theme
        self.set_interval(1.0, self.check_stale)
        self.screen_change_signal.subscribe(self, self._screen_changed)
        if self.sampler is not None:
            self.sampler.start()

    def _screen_changed(self, _screen: Screen[Any]) -> None:
        # A dialog opened while the window is too small is covered at once (after the push).
        self.call_later(self.fit_size)
        # A closed screen's watches of the app (GpuDetailScreen watches interval_s) would keep
        # it, and all it shows, alive until that attribute changed (Textualize/textual#6666).
        if not paint.PLAIN_TEXTUAL:
            self.call_after_refresh(prune_closed_watchers, self)
        self.call_after_refresh(collect_closed_screen)

    def _from_sampler(self, snapshot: Snapshot) -> None:
        # Called on the sampler thread: post_message is thread-safe; can_replace drops backlog.
        self.post_message(SnapshotReady(snapshot))

    def on_unmount(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def on_resize(self, event: events.Resize) -> None:
        self.fit_size(event.size)  # called before Textual's own handler sets self.size

    def fit_size(self, size: Size | None = None) -> None:
        """Below the smallest size a dialog is covered by the "too small" message, and shown
        again as it was once the window grows (the main screen covers its own widgets)."""
        width, height = size or self.size
        tiny, top = too_small(width, height), self.screen
        if isinstance(top, TooSmallScreen):
            if tiny:
                top.show_size(width, height)
            else:
                self.pop_screen()
        elif tiny and top is not self.main_screen:
            self.push_screen(TooSmallScreen(width, height))

    # -- data ---------------------------------------------------------------------------
    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if self.paused:
            return  # frozen display; the sampler is paused too
        snap = message.snapshot
        if self.snapshot is None or snap.taken_at_mono != self.snapshot.taken_at_mono:
            self._paused_s = 0.0  # a fresh reading: no pause to discount
        if self.sampler is None:
            self._record(snap)
        with self.batch_update():
            self.snapshot = snap  # every screen that shows it draws it now (they watch it)
            self.check_stale()

    def _record(self, snap: Snapshot) -> None:
        # What the sampler does with its history: fresh readings only, each once.
        last = self.snapshot
        if snap.stale_s is None and (last is None or snap.seq != last.seq):
            self.history.append(snap)

    def stale_threshold_s(self) -> float:
        """Seconds without a fresh sample before the header says STALE."""
        return max(STALE_MIN_S, STALE_AFTER_INTERVALS * self.interval_s)

    def check_stale(self) -> None:
        """Show 'STALE n s' when the newest reading is too old (works while the driver hangs)."""
        now = self.clock()
        snap = self.snapshot
        age = now - (snap.taken_at_mono if snap is not None else self._started_at)
        if snap is not None and snap.stale_s is not None:
            age = max(age, snap.stale_s)
        age -= self._paused_s
        stale = not self.paused and age > self.stale_threshold_s()
        self.stale_s = age if stale else None

    # -- keys on every screen -----------------------------------------------------------
    def action_pause(self) -> None:
        self.paused = not self.paused
        now = self.clock()
        if self.paused:
            self._paused_at = now
        elif self._paused_at is not None:
            self._paused_s += max(0.0, now - self._paused_at)
            self._paused_at = None
        if self.sampler is not None:
            self.sampler.paused = self.paused
        self.check_stale()

    def action_interval(self, step: int) -> None:
        self.interval_s = next_interval(self.interval_s, step)
        if self.sampler is not None:
            self.sampler.interval_s = self.interval_s
        self.notify(f"sampling every {self.interval_s:g} s", timeout=2, markup=False)

    def action_help(self) -> None:
        # Every key of every screen, whatever screen is on top.
        from gputop.ui.screens.help import HelpScreen, key_sections  # when first opened

        sections = key_sections(self.key_label, readonly=self.readonly)
        self.push_screen(HelpScreen(sections, readonly=self.readonly))

    def key_label(self, key: str) -> str:
        """A key as the help shows it: as the footer does."""
        return self.get_key_display(Binding(key, ""))

    def get_key_display(self, binding: Binding) -> str:
        # F9, F10 as htop writes them (Textual writes f9, f10).
        shown = super().get_key_display(binding)
        return shown.upper() if re.fullmatch(r"f\d+", shown) else shown

    def on_process_detail_screen_kill_requested(
        self, message: ProcessDetailScreen.KillRequested
    ) -> None:
        # The kill dialog is the main view's: it untags the processes that ended.
        self.main_screen.kill_rows([message.row], message.signal)


def next_interval(current: float, step: int) -> float:
    """The next step slower (``step`` > 0) or faster than ``current``, which may be off the list.

    Past either end of the list the interval stays where it is, so the result is within the
    interval bounds: the steps are, and ``current`` passed --interval's check.
    """
    tolerance = 1e-9 * current  # 0.1 + 0.15 need not equal 0.25 exactly
    if step > 0:
        slower = [s for s in INTERVAL_STEPS_S if s > current + tolerance]
        chosen = slower[0] if slower else current
    else:
        faster = [s for s in INTERVAL_STEPS_S if s < current - tolerance]
        chosen = faster[-1] if faster else current
    return chosen


def make_app(
    source: Source | None,
    *,
    interval_s: float = 1.0,
    readonly: bool = False,
    audit_log: str | Path | None = None,
    theme: str | None = None,
    sampler_factory: SamplerFactory | None = None,
    start_sampler: bool = True,
    clock: Callable[[], float] = time.monotonic,
    table_refresh_s: float | None = None,
) -> GputopApp:
    """The dashboard app, as the CLI and the tests build it. ``table_refresh_s``: the process
    table's numbers at most this often (None: process_table.TABLE_REFRESH_S; 0: every snapshot).
    """
    return GputopApp(
        source,
        interval_s=interval_s,
        readonly=readonly,
        audit_log=audit_log,
        theme=theme,
        sampler_factory=sampler_factory,
        start_sampler=start_sampler,
        clock=clock,
        table_refresh_s=table_refresh_s,
    )
