"""The fleet overview's screen: a header line (with STALE), the host table (sortable,
filterable, a utilisation and a memory sparkline per host; Enter drills into a host), and the
stuck-process report under it."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Input, Static

from gputop.fleet.model import HISTORY_POINTS, HISTORY_STEP_S, Fleet, FleetHost, HostHistory
from gputop.fleet.text import (
    COLUMNS,
    RIGHT,
    host_cells,
    render_health_report,
    render_stuck_report,
)
from gputop.ui.fleet.host_table import HostRow, HostTable
from gputop.ui.fleet.poller import FleetPoller, stale_s
from gputop.ui.plain import plain
from gputop.ui.text import sparkline
from gputop.ui.widgets.footer import Footer

_WINDOW = f"{(HISTORY_POINTS - 1) * HISTORY_STEP_S / 60:.0f}m"
# the sparklines of the last minutes (not sortable): mean GPU utilisation, GPU memory used
SPARK_COLUMNS = (f"UTIL {_WINDOW}", f"MEM {_WINDOW}")


def _number(value: float | int | None) -> float | None:
    return None if value is None else float(value)


# column -> what it sorts by (None: not known, always last)
SORT_KEYS: dict[str, Callable[[FleetHost], str | float | None]] = {
    "HOST": lambda h: h.name.lower(),
    "GPUS": lambda h: float(len(h.gpus)),
    # the most trouble first when reversed: what cannot be seen, then Xid errors
    "HEALTH": lambda h: (
        None
        if h.down
        else float(
            2 * len(h.lost) + 2 * len(h.not_responding) + 2 * len(h.needs_action) + len(h.xid)
        )
        + 10.0 * (h.driver_up is False or h.no_gpu_series)
    ),
    "UTIL": lambda h: _number(h.util_percent),
    "MEMORY": lambda h: _number(h.memory_used_bytes),
    "POWER": lambda h: _number(h.power_w),
    "TEMP": lambda h: _number(h.temperature_max_c),
    "STUCK": lambda h: _number(h.stuck_total),
    "UNATTR": lambda h: _number(h.unattributed_bytes),
    "AGE": lambda h: math.inf if h.down else _number(h.age_s),
}


def sort_hosts(hosts: tuple[FleetHost, ...], column: str, reverse: bool) -> list[FleetHost]:
    """``hosts`` by ``column``; hosts without a value last, either way; then by name."""
    key = SORT_KEYS[column]
    known = [h for h in hosts if key(h) is not None]
    unknown = [h for h in hosts if key(h) is None]
    known.sort(key=lambda h: h.name)
    known.sort(key=lambda h: key(h), reverse=reverse)  # type: ignore[arg-type,return-value]
    return known + sorted(unknown, key=lambda h: h.name)


def matches(host: FleetHost, text: str) -> bool:
    """The filter: the host's name, a target's address or job, a GPU model, or a state word
    (``down``, ``stuck``, ``sick``: a GPU lost, not responding, Xid errors...)."""
    needle = text.strip().lower()
    if not needle:
        return True
    if needle == "down":
        return host.down
    if needle == "stuck":
        return host.troubled
    if needle == "sick":
        return not host.down and (host.blind or bool(host.xid))
    haystack = [host.name, *(t.instance for t in host.targets), *(t.job for t in host.targets)]
    haystack += [g.model for g in host.gpus]
    return any(needle in item.lower() for item in haystack)


def header_text(
    source: str,
    fleet: Fleet | None,
    stale: float | None,
    error: str | None,
    shown: int,
    shown_gpus: int | None = None,
) -> Text:
    """The header line: the hosts and GPUs the table shows (``3/5 hosts  12/16 GPUs`` under a
    filter), the time of the read, STALE."""
    text = Text("gputop fleet", style="bold")
    text.append(f"  {source}")
    if fleet is None:
        text.append("  waiting for Prometheus…" if error is None else "  no data")
    else:
        down = sum(h.down for h in fleet.hosts)
        hosts = f"{shown}/{len(fleet.hosts)}" if shown != len(fleet.hosts) else len(fleet.hosts)
        text.append(f"  {hosts} hosts")
        if down:
            text.append(f" ({down} down)", style="bold red")
        gpus = fleet.gpu_count if shown_gpus is None else shown_gpus
        text.append(
            f"  {gpus}/{fleet.gpu_count} GPUs" if gpus != fleet.gpu_count else f"  {gpus} GPUs"
        )
        skipped = sum(fleet.skipped.values())
        if skipped:  # why, at the end of the stuck report
            text.append(f"  {skipped} series skipped", style="bold yellow")
        text.append(f"  {time.strftime('%H:%M:%S', time.localtime(fleet.at))}")
    if stale is not None:
        text.append("  ")
        text.append(f" STALE {stale:.0f} s ", style="bold reverse red")
    return text


def _report(fleet: Fleet | None) -> str:
    """The stuck report, then what was skipped as unbelievable and why (one line)."""
    if fleet is None:
        return ""
    lines = (
        [render_stuck_report(fleet).rstrip(), render_health_report(fleet).rstrip()]
        if fleet.hosts
        else []
    )
    note = fleet.skipped_note()
    if note is not None:
        lines.append(f"Note: {note}.")
    return "\n".join(lines)


class FleetScreen(Screen[None]):
    """Every host, one row each; read-only."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "app.quit", "Quit"),
        Binding("s,greater_than_sign", "sort(1)", "Sort"),
        Binding("less_than_sign", "sort(-1)", "Sort back", show=False),
        Binding("r", "reverse", "Reverse"),
        # Priority: handled as it arrives, so the keys typed right after it (fast, or pasted)
        # go to the filter box, not to the table. In the box itself it is just a "/".
        Binding("slash", "filter", "Filter", priority=True),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("f5,ctrl+r", "refresh", "Refresh"),
    ]

    def __init__(self, poller: FleetPoller, *, source: str) -> None:
        super().__init__()
        self.poller = poller
        self.source = source
        self.sort_column = "HOST"
        self.sort_reverse = False
        self.filter_text = ""
        self.shown_gpus: int | None = None
        self._header = Text()

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-header")
        yield Static(id="fleet-error")
        yield HostTable((*COLUMNS, *SPARK_COLUMNS), right=RIGHT, id="fleet-hosts")
        yield Input(
            placeholder="filter: host, address, job, GPU model, down, stuck, sick",
            id="fleet-filter",
        )
        yield Static(id="fleet-stuck")
        yield Footer()

    def on_mount(self) -> None:
        self.show_state()
        self.set_interval(1.0, self.show_header)
        self.poller.start()  # after the table: its first news finds it ready

    # -- showing --------------------------------------------------------------------------
    def show_state(self) -> None:
        """The poller's newest state: the table, the report, the header."""
        state = self.poller.state
        fleet = state.fleet
        hosts = (
            [] if fleet is None else sort_hosts(fleet.hosts, self.sort_column, self.sort_reverse)
        )
        hosts = [h for h in hosts if matches(h, self.filter_text)]
        self.shown_gpus = sum(len(h.gpus) for h in hosts) if fleet is not None else None
        history = fleet.history if fleet is not None else {}
        labels = [
            column + ((" ▼" if self.sort_reverse else " ▲") if column == self.sort_column else "")
            for column in COLUMNS
        ]
        table = self.query_one("#fleet-hosts", HostTable)
        table.show([_row(h, history.get(h.name)) for h in hosts], [*labels, *SPARK_COLUMNS])
        report = self.query_one("#fleet-stuck", Static)
        # Host names and Prometheus's error texts are other machines' words: never markup.
        report.update(plain(_report(fleet)))
        # Textual (8.2) lays the report out again only on the next refresh: its first text
        # after the mount kept the height of none, and the report was cut to one line.
        self.call_after_refresh(report.refresh, layout=True)
        error = self.query_one("#fleet-error", Static)
        error.update(plain(state.error or ""))
        error.set_class(state.error is not None, "shown")
        self.show_header()

    def show_header(self) -> None:
        state = self.poller.state
        stale = stale_s(state, time.monotonic(), self.poller.interval_s)
        shown = self.query_one("#fleet-hosts", HostTable).row_count
        text = header_text(self.source, state.fleet, stale, state.error, shown, self.shown_gpus)
        if text != self._header:  # asked every second: most seconds it says the same
            self._header = text
            self.query_one("#fleet-header", Static).update(text)

    # -- keys -------------------------------------------------------------------------------
    def action_sort(self, step: int) -> None:
        index = COLUMNS.index(self.sort_column)
        self.sort_column = COLUMNS[(index + step) % len(COLUMNS)]
        self.show_state()

    def action_reverse(self) -> None:
        self.sort_reverse = not self.sort_reverse
        self.show_state()

    def on_host_table_header_clicked(self, event: HostTable.HeaderClicked) -> None:
        column = event.column
        if column not in SORT_KEYS:  # a sparkline
            return
        if column == self.sort_column:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_column, self.sort_reverse = column, False
        self.show_state()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "filter":  # a priority key: in the filter box it is a character
            return self.focused is not self.query_one("#fleet-filter", Input)
        return True

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.add_class("shown")
        # At once, not on the next idle as focus() does: keys typed right after "/" (fast, or
        # pasted) are already queued and go to whatever has the focus when they are handled.
        self.set_focus(box)

    def action_clear_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = ""
        box.remove_class("shown")
        self.filter_text = ""
        self.query_one("#fleet-hosts", HostTable).focus()
        self.show_state()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.show_state()

    def on_input_submitted(self, _event: Input.Submitted) -> None:
        if not self.filter_text:
            self.query_one("#fleet-filter", Input).remove_class("shown")
        self.query_one("#fleet-hosts", HostTable).focus()

    def action_refresh(self) -> None:
        self.poller.refresh()

    def on_host_table_row_chosen(self, event: HostTable.RowChosen) -> None:
        """Enter on a host row: its GPUs and processes."""
        self.app.show_host(event.name)  # type: ignore[attr-defined]


def _row(host: FleetHost, history: HostHistory | None) -> HostRow:
    """A host's cells (the sparklines last) and its row's look."""
    cells = host_cells(host)
    empty = (None,) * HISTORY_POINTS
    trends = (empty, empty) if history is None else (history.util_percent, history.memory_percent)
    state = "down" if host.down or host.blind else ("stuck" if host.troubled else "")
    return HostRow(
        name=host.name,
        cells=(
            *(cells[c] for c in COLUMNS),
            *(sparkline(values, HISTORY_POINTS, top=100.0) for values in trends),
        ),
        state=state,
    )
