"""One host of the fleet, drilled into: its GPUs as panels (from the overview's newest read), what
is wrong with them (lost, not responding, Xid errors, the driver), and its processes
(gputop_process_gpu_memory_bytes, one query at each refresh while shown, on a worker thread).
Read-only: a signal is sent on the box itself.

The panels never crowd the processes off the screen: where they would take more than what is
left after the header, the process table's first rows and the hint, each GPU is one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Container
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from gputop.errors import GputopError
from gputop.fleet.model import FleetGpu, FleetHost, FleetProcess
from gputop.fleet.text import gib, health_words, stuck_words
from gputop.ui.fleet.gpu_card import CARD_HEIGHT, CARD_WIDTH, GpuCard
from gputop.ui.fleet.poller import FleetPoller
from gputop.ui.plain import plain
from gputop.ui.widgets.footer import Footer

ReadProcesses = Callable[[FleetHost], "tuple[FleetProcess, ...] | None"]

PROCESS_COLUMNS = ("GPU", "PID", "USER", "COMMAND", "CONTAINER", "GPU MEMORY")
# Rows the rest of the screen needs: header, health, processes title, the table's header and
# five of its rows, the hint (two lines: a long host name wraps it), the footer.
RESERVED_ROWS = 12
RIGHT = frozenset({"GPU", "PID", "GPU MEMORY"})


def signal_hint(host: str) -> Text:
    """Where to send a signal from (the host's name is a label: shown as written)."""
    return plain(f"read-only: signals are sent on the box: ssh {host} gputop")


class HostScreen(Screen[None]):
    """``host``'s GPUs and processes; Escape goes back to the overview."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("q", "app.quit", "Quit"),
    ]

    class ProcessesRead(Message):
        """A processes read ended: what it found (None: no gputop exporter), or its error."""

        def __init__(self, processes: tuple[FleetProcess, ...] | None, error: str | None) -> None:
            super().__init__()
            self.processes = processes
            self.error = error

    def __init__(self, poller: FleetPoller, host: str, read_processes: ReadProcesses) -> None:
        super().__init__()
        self.poller = poller
        self.host_name = host
        self.read_processes = read_processes
        self.processes: tuple[FleetProcess, ...] | None = None
        self.processes_error: str | None = None
        self.processes_read = False
        self.down = False

    def compose(self) -> ComposeResult:
        yield Static(id="host-header")
        yield Static(id="host-health")
        yield Container(id="host-gpus")
        yield Static(id="host-processes-title")
        processes: DataTable[Text] = DataTable(
            id="host-processes", cursor_type="row", zebra_stripes=True
        )
        yield processes
        yield Static(signal_hint(self.host_name), id="host-hint")
        yield Footer()

    def on_mount(self) -> None:
        for column in PROCESS_COLUMNS:
            self.query_one("#host-processes", DataTable).add_column(plain(column), key=column)
        self.show_state()
        self.query_one("#host-processes", DataTable).focus()

    def host(self) -> FleetHost | None:
        fleet = self.poller.state.fleet
        if fleet is None:
            return None
        return next((h for h in fleet.hosts if h.name == self.host_name), None)

    def show_state(self) -> None:
        """The poller's newest read of the host, and a new read of its processes."""
        host = self.host()
        header = Text(self.host_name, style="bold")
        health = self.query_one("#host-health", Static)
        sick: list[str] = []
        if host is None:
            header.append("  no longer in the fleet")
        else:
            header.append(f"  {len(host.gpus)} GPUs")
            models = sorted({g.model for g in host.gpus if g.model})
            if len(models) == 1:  # compact GPU lines leave the model out
                header.append(f" · {models[0]}")
            if host.down:
                header.append("  DOWN", style="bold red")
            words = stuck_words(host)
            if words:
                header.append(f"  {', '.join(words)}", style="bold yellow")
            # Host names and Xid codes are other machines' words: plain text, never markup.
            sick = health_words(host)
            self.down = host.down
            self.show_gpus(host.gpus)
            self.read(host)
        health.update(plain("; ".join(sick), style="bold red"))
        self.call_after_refresh(health.refresh, layout=True)  # as FleetScreen's report
        health.set_class(bool(sick), "shown")
        self.query_one("#host-header", Static).update(header)
        self.show_processes()

    def on_resize(self) -> None:
        # As many columns of panels as fit (two on an 80-column terminal, three at 120).
        box = self.query_one("#host-gpus", Container)
        box.styles.grid_size_columns = self.columns()
        host = self.host()
        if host is not None:
            self.show_gpus(host.gpus)

    def columns(self) -> int:
        return max(1, self.size.width // CARD_WIDTH)

    def compact(self, count: int) -> bool:
        """Whether ``count`` panels would leave too few rows for the processes."""
        rows = -(-count // self.columns())
        return rows * CARD_HEIGHT > self.size.height - RESERVED_ROWS

    def show_gpus(self, gpus: tuple[FleetGpu, ...]) -> None:
        """A panel per GPU: the same panels take new readings; other GPUs, new panels."""
        box = self.query_one("#host-gpus", Container)
        compact = self.compact(len(gpus))
        box.set_class(compact, "compact")
        cards = list(box.query(GpuCard))
        if [c.gpu.uuid or c.gpu.gpu for c in cards] == [g.uuid or g.gpu for g in gpus]:
            for card, gpu in zip(cards, gpus, strict=True):
                card.show(gpu, compact)
            return
        box.remove_children()
        box.mount_all(GpuCard(gpu, compact=compact) for gpu in gpus)

    @work(thread=True, exclusive=True, group="processes")
    def read(self, host: FleetHost) -> None:
        """Off the UI thread: the host's processes, handed over as a message."""
        try:
            found = self.read_processes(host)
        except GputopError as exc:
            self.post_message(self.ProcessesRead(None, str(exc)))
        except Exception as exc:  # noqa: BLE001 - the drill-down stays up, and says why
            self.post_message(self.ProcessesRead(None, f"{type(exc).__name__}: {exc}"))
        else:
            self.post_message(self.ProcessesRead(found, None))

    def on_host_screen_processes_read(self, message: ProcessesRead) -> None:
        self.processes, self.processes_error = message.processes, message.error
        self.processes_read = True
        self.show_processes()

    def show_processes(self) -> None:
        title = self.query_one("#host-processes-title", Static)
        table: DataTable[Text] = self.query_one("#host-processes", DataTable)
        table.clear()
        if self.processes_error is not None:
            title.update(plain(f"Processes: {self.processes_error}", style="bold red"))
        elif not self.processes_read:
            title.update("Processes: reading…")
        elif self.down:  # whatever serves it, nothing answers now
            title.update(
                plain("Processes: not known: the host is down (its last scrape failed)", "bold red")
            )
        elif self.processes is None:
            title.update("Processes: not known (dcgm-exporter only: run gputop export there)")
        else:
            title.update(plain(f"Processes ({len(self.processes)})"))
            for proc in self.processes:
                cells = {
                    "GPU": proc.gpu,
                    "PID": proc.pid,
                    "USER": proc.user or "-",
                    "COMMAND": proc.command or "-",
                    "CONTAINER": proc.container or "-",
                    "GPU MEMORY": f"{gib(proc.memory_bytes)} GiB",
                }
                table.add_row(*(self._cell(c, cells[c]) for c in PROCESS_COLUMNS))

    @staticmethod
    def _cell(column: str, value: str) -> Text:
        return plain(value, justify="right" if column in RIGHT else "left")
