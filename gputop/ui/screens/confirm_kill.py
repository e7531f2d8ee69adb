"""The kill dialog: pick TERM/KILL/INT (and children), see each result, escalate to KILL."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, RadioButton, RadioSet, Static

from gputop import units
from gputop.engine.kill import Killer, KillResult, ProcIdentity, Signal
from gputop.engine.model import ProcessRow

GRACE_S = 2.0  # how long to wait for a process to exit before reporting "still running"


def identity(row: ProcessRow) -> ProcIdentity:
    """The identity the user saw: PID and start time (a reused PID is refused)."""
    return ProcIdentity(pid=row.pid, create_time=row.info.create_time)


def target_line(row: ProcessRow) -> str:
    """'PID user state GPU-mem command' for the dialog's list."""
    return (
        f"{row.pid:>7} {units.NA if row.info.user is None else row.info.user:<10} "
        f"{row.state.value:<8} {units.short_size(row.used_memory_bytes):>6}  {row.info.command}"
    )


class ConfirmKill(ModalScreen[list[KillResult]]):
    """Signals the listed processes, each checked on its own by the Killer; shows the results."""

    BINDINGS = [Binding("escape", "close", "Close")]

    def __init__(self, rows: list[ProcessRow], killer: Killer, *, grace_s: float = GRACE_S) -> None:
        super().__init__()
        self.rows = rows
        self.killer = killer
        self.grace_s = grace_s
        self.results: list[KillResult] = []
        self.suggested_parent: ProcIdentity | None = None

    def compose(self) -> ComposeResult:
        count = len(self.rows)
        with Vertical(id="kill-dialog") as box:
            box.border_title = f"Signal {count} process{'es' if count != 1 else ''}"
            yield Static(
                Text(
                    "\n".join(target_line(r) for r in self.rows), no_wrap=True, overflow="ellipsis"
                ),
                id="kill-targets",
            )
            with Horizontal(id="kill-options"):
                with RadioSet(id="kill-signal"):
                    yield RadioButton("TERM  ask to exit", value=True, id="sig-TERM")
                    yield RadioButton("KILL  force", id="sig-KILL")
                    yield RadioButton("INT   like Ctrl-C", id="sig-INT")
                yield Checkbox("with children", id="kill-children")
            yield Static("", id="kill-result")
            with Horizontal(id="kill-buttons"):
                yield Button("Send", variant="error", id="kill-send")
                yield Button("Send KILL", variant="error", id="kill-escalate", classes="-hidden")
                yield Button(
                    "Signal parent", variant="warning", id="kill-parent", classes="-hidden"
                )
                yield Button("Close", id="kill-close")

    def on_mount(self) -> None:
        self.query_one("#kill-send", Button).focus()

    @property
    def chosen_signal(self) -> Signal:
        pressed = self.query_one("#kill-signal", RadioSet).pressed_button
        return Signal((pressed.id or "sig-TERM").removeprefix("sig-")) if pressed else Signal.TERM

    @on(Button.Pressed, "#kill-send")
    def _send_chosen(self) -> None:
        self._start(self.chosen_signal)

    @on(Button.Pressed, "#kill-escalate")
    def _send_kill(self) -> None:
        self._start(Signal.KILL, only_running=True)

    @on(Button.Pressed, "#kill-parent")
    def _send_parent(self) -> None:
        if self.suggested_parent is not None:
            self._start(self.chosen_signal, targets=[self.suggested_parent])

    @on(Button.Pressed, "#kill-close")
    def action_close(self) -> None:
        self.dismiss(self.results)

    def _start(
        self,
        signal: Signal,
        *,
        only_running: bool = False,
        targets: list[ProcIdentity] | None = None,
    ) -> None:
        if targets is None:
            running = {pid for r in self.results for pid in r.still_running}
            targets = [identity(r) for r in self.rows if not only_running or r.pid in running]
        for button in self.query(Button):
            button.disabled = True
        self.query_one("#kill-result", Static).update(f"sending SIG{signal.value}…")
        with_children = self.query_one("#kill-children", Checkbox).value
        self._send(targets, signal, with_children)

    @work(thread=True, group="kill", exit_on_error=False)
    def _send(self, targets: list[ProcIdentity], signal: Signal, with_children: bool) -> None:
        # Each process is checked on its own by the Killer right before its signal.
        results = [
            self.killer.send(t, signal, with_children=with_children, grace_s=self.grace_s)
            for t in targets
        ]
        self.app.call_from_thread(self._show, results)

    def _show(self, results: list[KillResult]) -> None:
        self.results.extend(results)
        lines = []
        for r in results:
            lines.append(("✓ " if r.ok else "✗ refused: ") + r.message)
            self.app.notify(
                r.message,
                title=f"SIG{r.signal.value}" if r.ok else "Refused",
                severity="information" if r.ok else "error",
                markup=False,  # the message names processes: "[" in a name is not markup
            )
        self.query_one("#kill-result", Static).update(Text("\n".join(lines)))
        running = any(r.still_running for r in results)
        escalate = self.query_one("#kill-escalate", Button)
        escalate.set_class(not running, "-hidden")
        # A defunct process cannot be killed: offer its parent (the one not reaping it).
        self.suggested_parent = next(
            (r.refusal.suggest for r in results if r.refusal and r.refusal.suggest), None
        )
        parent = self.query_one("#kill-parent", Button)
        parent.set_class(self.suggested_parent is None, "-hidden")
        if self.suggested_parent is not None:
            parent.label = f"Signal parent {self.suggested_parent.pid}"
        for button in self.query(Button):
            button.disabled = False
        self.query_one("#kill-send", Button).disabled = True  # one send per choice; close or KILL
        focus = (
            escalate
            if running
            else parent
            if self.suggested_parent
            else self.query_one("#kill-close", Button)
        )
        focus.focus()
