"""The main view: header, GPU panels, processes and filter; its keys and what they do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.screen import Screen
from textual.widgets import Input, Static

from gputop import units
from gputop.engine.history import History
from gputop.engine.model import ProcessRow, Snapshot
from gputop.ui import rows as R
from gputop.ui.bridge import current_user
from gputop.ui.keys import MAIN_BINDINGS
from gputop.ui.plain import plain
from gputop.ui.screens import too_small as TOO_SMALL
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.gpu_grid import GpuGrid
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.header import HeaderBar
from gputop.ui.widgets.process_table import ProcessTable

if TYPE_CHECKING:
    from gputop.engine.kill import Killer, KillResult, Signal

SORT_ORDER = tuple(R.Column)


class MainScreen(Screen[None]):
    """The dashboard itself: it draws the app's snapshot; its keys act on the process table.

    It watches the app's ``snapshot``, ``interval_s``, ``paused`` and ``stale_s``. ``killer``
    gives the app's Killer (built when first asked); None in --readonly: then the kill key does
    nothing and is not shown.
    """

    BINDINGS: ClassVar[list[BindingType]] = [*MAIN_BINDINGS]

    def __init__(
        self,
        *,
        history: History,
        killer: Callable[[], Killer] | None,
        dev_dir: Callable[[], str],
        table_refresh_s: float | None = None,
    ) -> None:
        super().__init__()
        self.history = history
        self.killer = killer
        self.dev_dir = dev_dir  # where the process detail looks for device files, now
        self.user = current_user()
        self.snapshot: Snapshot | None = None
        self._table_title: str | None = None  # last texts shown, to skip no-op repaints
        self._unattributed_body = ""
        # Kept as attributes: per-tick code must not search the DOM (nor fail during shutdown).
        self.header = HeaderBar(id="header")
        self.grid = GpuGrid(id="gpus")
        self.table = ProcessTable(id="processes", table_refresh_s=table_refresh_s)
        self.unattributed = Static("", id="unattributed")
        self.filter_box = Input(
            placeholder="filter: pid, user, command, state, container or pod", id="filter"
        )
        self.too_small = Static("", id="too-small")

    def compose(self) -> ComposeResult:
        yield self.header
        yield self.grid
        yield self.table
        yield self.unattributed
        yield self.filter_box
        yield self.too_small
        yield Footer(compact=True)

    def on_mount(self) -> None:
        # The first snapshot may come before the first Resize (the sampler starts early):
        # lay out for the real size now, not for the 80x24 the grid assumes until then.
        self.apply_size(*self.app.size)
        self.header.readonly = self.killer is None
        self._update_table_title()
        self.table.focus()
        app = self.app
        self.watch(app, "interval_s", self._show_interval)
        self.watch(app, "paused", self._show_paused)
        self.watch(app, "stale_s", self._show_stale)
        self.watch(app, "snapshot", self.show_snapshot)

    @property
    def layers(self) -> tuple[str, ...]:
        # Textual's own layers (notifications, tooltips) come after the screen's: the message
        # covers them only on a layer after theirs.
        return (*super().layers, TOO_SMALL.LAYER)

    def on_resize(self, event: events.Resize) -> None:
        self.apply_size(event.size.width, event.size.height)

    def apply_size(self, width: int, height: int) -> None:
        """Fit the screen to the terminal: panel density, table columns, or 'too small'."""
        tiny = TOO_SMALL.too_small(width, height)
        if tiny and self.focused is not None:
            self._focus_before_tiny = self.focused  # hidden with the rest: given back below
        elif not tiny and self.has_class("-tiny"):
            back = getattr(self, "_focus_before_tiny", None) or self.table

            def refocus() -> None:  # once the widgets are displayed again
                if back.is_attached and back.focusable:
                    self.set_focus(back)
                if self.focused is None:
                    self.set_focus(self.table)

            self.call_after_refresh(refocus)
        self.set_class(tiny, "-tiny")
        self.too_small.update(plain(TOO_SMALL.message(width, height)))
        self.grid.relayout(width, height)
        self.table.set_wide(width >= R.WIDE_MIN_COLUMNS)
        self._update_table_title()  # the sort column may have been hidden or shown

    # -- data ---------------------------------------------------------------------------
    def show_snapshot(self, snap: Snapshot | None) -> None:
        """Draw a new snapshot (the app's, on every tick unless paused)."""
        if snap is None:
            return
        self.snapshot = snap
        self.header.snapshot = snap
        self.header.driver_note = snap.driver_note  # gone with the first snapshot without one
        self.grid.update_snapshot(snap, self.history)  # relayouts itself when GPUs come or go
        self.table.update_snapshot(snap)
        self._update_unattributed(snap)
        self._update_table_title()

    def _show_interval(self, interval_s: float) -> None:
        self.header.interval_s = interval_s

    def _show_paused(self, paused: bool) -> None:
        self.header.paused = paused

    def _show_stale(self, stale_s: float | None) -> None:
        self.header.stale_s = stale_s

    def _update_unattributed(self, snap: Snapshot) -> None:
        parts = [f"GPU {i}: {units.short_size(b)}" for i, b in snap.unattributed_memory_bytes]
        lines = []
        if parts:
            lines.append("unattributed GPU memory (no listed process owns it): " + ", ".join(parts))
        if snap.hidden_pids_note:  # gputop in a container that cannot see the host's PIDs: the
            lines.append(snap.hidden_pids_note)  # why of the rows and of the notes after it
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

    # -- view actions -------------------------------------------------------------------
    def _set_view(self, **changes: Any) -> None:
        self.table.set_view(replace(self.table.view, **changes))
        self._update_table_title()

    def _update_table_title(self) -> None:
        table = self.table
        view = table.view
        parts = [f"Processes ({len(table.visible_keys())})"]
        if table.stuck_count:
            parts.append(f"{table.stuck_count} stuck")
        if view.sort not in table.columns:  # its header marker is not on screen
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
        shown = self.table.columns
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
        # At once, not on the next idle as focus() does: keys typed right after "/" (fast, or
        # pasted) are already queued and go to whatever has the focus when they are handled.
        self.set_focus(box)

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

    # -- detail screens -----------------------------------------------------------------
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
        # The detail and kill screens are imported when first opened, not at start: most runs
        # never open them, and their modules stay in memory as long as the dashboard does.
        from gputop.ui.screens.gpu_detail import GpuDetailScreen

        self.app.push_screen(GpuDetailScreen(index, self.history))

    def on_gpu_panel_selected(self, message: GpuPanel.Selected) -> None:
        self.action_gpu_detail(message.index)

    def on_process_table_row_chosen(self, event: ProcessTable.RowChosen) -> None:
        row = self.table.row(event.key)
        if row is not None:
            self._open_process(row)

    def action_environment(self) -> None:
        # nvitop's `e`: the process detail, on its environment.
        if (row := self.table.current) is not None:
            self._open_process(row, show_env=True)

    def _open_process(self, row: ProcessRow, *, show_env: bool = False) -> None:
        from gputop.ui.screens.process_detail import ProcessDetailScreen  # when first opened

        self.app.push_screen(
            ProcessDetailScreen(
                row,
                dev_dir=self.dev_dir(),
                killer=None if self.killer is None else self.killer(),
                show_env=show_env,
            )
        )

    # -- focus: two regions, the GPU panels and the processes ---------------------------
    _last_panel: int | None = None  # GPU index of the panel that last had the focus

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        if isinstance(event.widget, GpuPanel):
            self._last_panel = event.widget.index

    def action_switch_region(self) -> None:
        """Tab: from the processes to the GPU panel last focused (or the first), and back."""
        panels = self.grid.panels
        if self.focused is not self.table or not panels:
            self.table.focus()
            return
        last = next((p for p in panels if p.index == self._last_panel), panels[0])
        last.focus()

    def action_panel_move(self, dx: int, dy: int) -> None:
        """Arrows on a GPU panel: the next one in reading order, or the one above or below."""
        panels = self.grid.panels
        focused = self.focused
        if not isinstance(focused, GpuPanel) or focused not in panels:
            return
        plan = self.grid.layout_plan
        columns = plan.columns if plan is not None else 1
        target = panels.index(focused) + dx + dy * columns
        if 0 <= target < len(panels):
            panels[target].focus()

    # -- signals ------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.app.screen is not self:
            # Under a dialog its keys do nothing: its dimmed footer shows the app's keys only.
            return False
        if action == "filter":  # a priority key: in the filter box it is a character
            return self.focused is not self.filter_box
        on_panel = isinstance(self.focused, GpuPanel)
        if action == "panel_move":  # not on a panel: the arrows go on to the table or filter
            return on_panel
        if action == "environment":  # a process's: not on the GPU panels (nor in the footer)
            return not on_panel
        # --readonly: the signal keys do nothing and the footer does not show them.
        return not (action == "kill" and self.killer is None)

    def action_kill(self, signal: str | None = None) -> None:
        rows = self.table.tagged_rows()
        if not rows and (current := self.table.current) is not None:
            rows = [current]
        from gputop.engine.kill import Signal  # with the dialog: not needed to draw

        self.kill_rows(rows, Signal(signal) if signal else None)

    def kill_rows(self, rows: list[ProcessRow], signal: Signal | None = None) -> None:
        """Open the kill dialog for these processes, on ``signal`` (default TERM); never in
        --readonly. Nothing is sent until the user confirms in the dialog."""
        if self.killer is None:
            return
        if not rows:
            self.app.notify("no process selected", severity="warning")
            return
        from gputop.engine.kill import Signal
        from gputop.ui.screens.confirm_kill import ConfirmKill  # when first opened

        dialog = ConfirmKill(
            rows,
            self.killer(),
            signal=signal or Signal.TERM,
            snapshot=lambda: self.snapshot,  # the aftermath follows the memory on these
        )
        self.app.push_screen(dialog, self._after_kill)

    def _after_kill(self, results: list[KillResult] | None) -> None:
        done = {r.pid for r in results or [] if r.ok}
        table = self.table
        if done:
            table.tags -= {k for k in table.tags if int(k.split(":", 1)[0]) in done}
            if self.snapshot is not None:
                table.update_snapshot(self.snapshot, now=True)  # the ended ones untagged now
            self._update_table_title()
