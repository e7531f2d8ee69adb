"""GputopApp: composes the dashboard, bridges the sampler thread, routes keys to actions."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.driver import Driver
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from gputop.engine.history import History
from gputop.engine.kill import Killer, KillResult
from gputop.engine.model import ProcessRow, Snapshot
from gputop.engine.source import Source
from gputop.ui import rows as R
from gputop.ui import text
from gputop.ui.bridge import SamplerFactory, SamplerLike, current_user, default_sampler
from gputop.ui.keys import APP_BINDINGS, MOVEMENT_HELP
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.confirm_kill import ConfirmKill
from gputop.ui.screens.gpu_detail import GpuDetailScreen
from gputop.ui.screens.help import HelpScreen, key_rows
from gputop.ui.screens.process_detail import ProcessDetailScreen
from gputop.ui.widgets.gpu_grid import GpuGrid
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.header import HeaderBar
from gputop.ui.widgets.process_table import ProcessTable

# The -/+ keys walk these; each lies within the bounds every interval obeys (argtypes, tested).
INTERVAL_STEPS_S = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)
MIN_SIZE = (60, 16)  # below this the app shows a "terminal too small" message until resized
STALE_AFTER_INTERVALS = 2.5
STALE_MIN_S = 3.0
SORT_ORDER = tuple(R.Column)
# Actions on the main view: off while a detail screen or dialog is on top of it.
MAIN_VIEW_ACTIONS = frozenset(
    {
        "kill",
        "filter",
        "sort",
        "reverse",
        "only_mine",
        "tree",
        "focus_gpu",
        "gpu_detail",
        "clear_filter",
    }
)


class MainScreen(Screen[None]):
    """The dashboard itself: header, GPU panels, processes, footer (widgets owned by the app)."""

    def compose(self) -> ComposeResult:
        app = self.app
        assert isinstance(app, GputopApp)
        yield app.header
        yield app.grid
        yield app.table
        yield app.unattributed
        yield app.filter_box
        yield app.too_small
        yield Footer(compact=True)

    def on_resize(self, event: events.Resize) -> None:
        app = self.app
        assert isinstance(app, GputopApp)
        app.apply_size(event.size.width, event.size.height)


class GputopApp(App[int]):
    """The interactive dashboard. Build it with make_app()."""

    CSS_PATH = "gputop.tcss"
    TITLE = "gputop"
    ENABLE_COMMAND_PALETTE = False
    # Ctrl-C quits, as in htop (Textual's own binding only says how to quit). A priority binding:
    # it quits from the filter box and from dialogs too.
    BINDINGS = [
        *APP_BINDINGS,
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit gputop"),
    ]

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
    ) -> None:
        super().__init__()
        self.source = source
        self.interval_s = interval_s
        self.readonly = readonly
        self.killer = None if readonly else Killer(audit_log=audit_log)
        self.requested_theme = theme
        self.sampler_factory = sampler_factory or default_sampler
        self.start_sampler = start_sampler
        self.clock = clock
        self.sampler: SamplerLike | None = None
        self.history = History(maxlen=600)
        self.snapshot: Snapshot | None = None
        self.paused = False
        self.user = current_user()
        self._table_title: str | None = None  # last texts shown, to skip no-op repaints
        self._unattributed_body = ""
        self._started_at = clock()
        # Kept as attributes: per-tick code must not search the DOM (nor fail during shutdown).
        self.header = HeaderBar(id="header")
        self.grid = GpuGrid(id="gpus")
        self.table = ProcessTable(id="processes")
        self.unattributed = Static("", id="unattributed")
        self.filter_box = Input(placeholder="filter: pid, user, command or state", id="filter")
        self.too_small = Static("", id="too-small")

    def get_driver_class(self) -> type[Driver]:
        driver = super().get_driver_class()
        if driver.__module__ != "textual.drivers.linux_driver":
            return driver  # Windows, or a driver chosen with TEXTUAL_DRIVER
        # Textual's Linux input thread wakes ten times a second even when nobody types.
        from gputop.ui.paint.driver import CalmLinuxDriver  # imports termios: Unix only

        return CalmLinuxDriver

    # -- layout -------------------------------------------------------------------------
    def get_default_screen(self) -> Screen[Any]:
        return MainScreen()

    def on_mount(self) -> None:
        if self.requested_theme:
            self.theme = self.requested_theme
        header = self.header
        header.interval_s, header.readonly = self.interval_s, self.readonly
        self._update_table_title()
        self.table.focus()
        self.set_interval(1.0, self.check_stale)
        if self.start_sampler and self.source is not None:
            self.sampler = self.sampler_factory(self.source, self._from_sampler, self.interval_s)
            self.sampler.start()

    def _from_sampler(self, snapshot: Snapshot) -> None:
        # Called on the sampler thread: post_message is thread-safe; can_replace drops backlog.
        self.post_message(SnapshotReady(snapshot))

    def on_unmount(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()

    def apply_size(self, width: int, height: int) -> None:
        """Fit the main screen to the terminal: panel density, table columns, or 'too small'."""
        tiny = width < MIN_SIZE[0] or height < MIN_SIZE[1]
        self.screen_stack[0].set_class(tiny, "-tiny")
        self.too_small.update(
            f"terminal too small: {width}x{height}\n"
            f"gputop needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]}: enlarge the window"
        )
        self.grid.relayout(width, height)
        self.table.set_wide(width >= R.WIDE_MIN_COLUMNS)
        self._update_table_title()  # the sort column may have been hidden or shown

    # -- data ---------------------------------------------------------------------------
    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        if self.paused:
            return  # frozen display; the sampler is paused too
        snap = message.snapshot
        fresh = snap.stale_s is None and (self.snapshot is None or snap.seq != self.snapshot.seq)
        if fresh:
            self.history.append(snap)
        self.snapshot = snap
        with self.batch_update():
            self.header.snapshot = snap
            grid = self.grid
            grid.update_snapshot(snap, self.history)  # relayouts itself when GPUs come or go
            self.table.update_snapshot(snap)
            self._update_unattributed(snap)
            self._update_table_title()
            self.check_stale()
            self._update_screens(snap)

    def _update_screens(self, snap: Snapshot) -> None:
        screen = self.screen
        if isinstance(screen, GpuDetailScreen):
            screen.update(snap, self.history, self.interval_s)
        elif isinstance(screen, ProcessDetailScreen):
            row = next((r for r in snap.processes if R.row_key(r) == R.row_key(screen.row)), None)
            screen.update_row(row, snap.taken_at_wall, self.killer.log if self.killer else None)

    def _update_unattributed(self, snap: Snapshot) -> None:
        parts = [f"GPU {i}: {text.size(b)}" for i, b in snap.unattributed_memory_bytes]
        lines = []
        if parts:
            lines.append("unattributed GPU memory (no listed process owns it): " + ", ".join(parts))
        if snap.holder_scan_note:
            lines.append(f"holder scan: {snap.holder_scan_note}")
        widget = self.unattributed
        body = "\n".join(lines)
        # Static.update() relayouts the screen; skip it when nothing changed.
        if body != self._unattributed_body:
            self._unattributed_body = body
            widget.update(Text(body))
        if widget.display != bool(lines):
            widget.display = bool(lines)

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
        stale = not self.paused and age > self.stale_threshold_s()
        self.header.stale_s = age if stale else None

    # -- view actions -------------------------------------------------------------------
    def _set_view(self, **changes: Any) -> None:
        self.table.set_view(replace(self.table.view, **changes))
        self._update_table_title()

    def _update_table_title(self) -> None:
        table = self.table
        view = table.view
        parts = [f"Processes ({len(table.visible_keys())})"]
        if view.sort not in R.columns(table.wide):  # its header marker is not on screen
            parts.append(f"sorted by {table.header_label(view.sort)}")
        if view.gpu is not None:
            parts.append(f"GPU {view.gpu} only")
        if view.filter_text:
            parts.append(f"filter '{view.filter_text}'")
        if view.only_user is not None:
            parts.append(f"user {view.only_user}")
        if view.tree:
            parts.append("tree")
        if table.tags:
            parts.append(f"{len(table.tags)} tagged")
        title = " · ".join(parts)
        # Setting border_title repaints the whole table; only do it when the text changed.
        if title != self._table_title:
            self._table_title = title
            table.border_title = Text(title)  # Text: a filter like "[x" is not markup

    def on_process_table_tags_changed(self) -> None:
        self._update_table_title()

    def action_sort(self, step: int) -> None:
        # Only the columns on screen: a sort by a hidden column would show no marker at all.
        shown = R.columns(self.table.wide)
        view = self.table.view
        if view.sort in shown:
            column = shown[(shown.index(view.sort) + step) % len(shown)]
        else:  # sorted by a column the terminal became too narrow for
            later = [c for c in shown if SORT_ORDER.index(c) > SORT_ORDER.index(view.sort)]
            column = (later or shown)[0] if step > 0 else shown[-1]
        self._set_view(sort=column, reverse=column in R.NUMERIC)

    def action_reverse(self) -> None:
        self._set_view(reverse=not self.table.view.reverse)

    def action_only_mine(self) -> None:
        self._set_view(only_user=None if self.table.view.only_user else self.user)

    def action_tree(self) -> None:
        self._set_view(tree=not self.table.view.tree)

    def action_focus_gpu(self) -> None:
        indices = [g.index for g in self.snapshot.gpus] if self.snapshot else []
        current = self.table.view.gpu
        if current is None or current not in indices:
            nxt = indices[0] if indices else None
        else:
            pos = indices.index(current) + 1
            nxt = indices[pos] if pos < len(indices) else None
        self._set_view(gpu=nxt)

    def action_filter(self) -> None:
        box = self.filter_box
        box.add_class("-open")
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.filter_box
        box.value = ""
        box.remove_class("-open")
        self._set_view(filter_text="")
        self.table.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self._set_view(filter_text=event.value)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        event.input.set_class(bool(event.value), "-open")
        self.table.focus()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self.sampler is not None:
            self.sampler.paused = self.paused
        self.header.paused = self.paused
        self.check_stale()

    def action_interval(self, step: int) -> None:
        self.interval_s = next_interval(self.interval_s, step)
        if self.sampler is not None:
            self.sampler.interval_s = self.interval_s
        self.header.interval_s = self.interval_s
        self.notify(f"sampling every {self.interval_s:g} s", timeout=2)

    def action_help(self) -> None:
        bindings = [*self.BINDINGS, *ProcessTable.BINDINGS]
        shown = [
            b
            for b in bindings
            if isinstance(b, Binding) and not (self.readonly and b.action == "kill")
        ]
        rows = [
            *MOVEMENT_HELP,
            *key_rows(shown, lambda key: self.get_key_display(Binding(key, ""))),
        ]
        self.push_screen(HelpScreen(rows, readonly=self.readonly))

    # -- screens ------------------------------------------------------------------------
    def action_gpu_detail(self, index: int | None = None) -> None:
        if index is None:
            focused = self.focused
            if isinstance(focused, GpuPanel):
                index = focused.index
            elif self.table.view.gpu is not None:
                index = self.table.view.gpu
            elif (row := self.table.current) is not None and row.gpu_indices:
                index = row.gpu_indices[0]
            elif self.snapshot is not None and self.snapshot.gpus:
                index = self.snapshot.gpus[0].index
        if index is None:
            return
        self.push_screen(GpuDetailScreen(index, self.snapshot, self.history, self.interval_s))

    def on_gpu_panel_selected(self, message: GpuPanel.Selected) -> None:
        self.action_gpu_detail(message.index)

    def on_process_table_row_chosen(self, event: ProcessTable.RowChosen) -> None:
        row = self.table.row(event.key)
        if row is None:
            return
        self.push_screen(
            ProcessDetailScreen(
                row,
                dev_dir=getattr(self.source, "dev_dir", "/dev"),
                signal_log=self.killer.log if self.killer else None,
                now_wall=self.snapshot.taken_at_wall if self.snapshot else time.time(),
                can_kill=self.killer is not None,
            )
        )

    # -- signals ------------------------------------------------------------------------
    def on_process_detail_screen_kill_requested(
        self, message: ProcessDetailScreen.KillRequested
    ) -> None:
        self.kill_rows([message.row])

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "kill" and self.killer is None:
            return False  # --readonly: the key does nothing and the footer does not show it
        return action not in MAIN_VIEW_ACTIONS or len(self.screen_stack) == 1

    def action_kill(self) -> None:
        rows = self.table.tagged_rows()
        if not rows and (current := self.table.current) is not None:
            rows = [current]
        self.kill_rows(rows)

    def kill_rows(self, rows: list[ProcessRow]) -> None:
        """Open the kill dialog for these processes (never in --readonly)."""
        if self.killer is None:
            return
        if not rows:
            self.notify("no process selected", severity="warning")
            return
        self.push_screen(ConfirmKill(rows, self.killer), self._after_kill)

    def _after_kill(self, results: list[KillResult] | None) -> None:
        done = {r.pid for r in results or [] if r.ok}
        table = self.table
        if done:
            table.tags -= {k for k in table.tags if int(k.split(":", 1)[0]) in done}
            if self.snapshot is not None:
                table.update_snapshot(self.snapshot)
            self._update_table_title()


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
) -> GputopApp:
    """The dashboard app, as the CLI and the tests build it."""
    return GputopApp(
        source,
        interval_s=interval_s,
        readonly=readonly,
        audit_log=audit_log,
        theme=theme,
        sampler_factory=sampler_factory,
        start_sampler=start_sampler,
        clock=clock,
    )
