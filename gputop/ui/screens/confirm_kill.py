"""The kill dialog: pick TERM/KILL/INT (and children), see each result, escalate to KILL."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, RadioButton, RadioSet, Static

from gputop import units
from gputop.engine.kill import GRACE_S, Killer, KillResult, ProcIdentity, Signal
from gputop.engine.model import ProcessRow
from gputop.ui.plain import plain

# The signals the dialog offers, in its order: the key that chooses each, and what it does.
CHOICES = (
    (Signal.TERM, "t", "ask to exit"),
    (Signal.KILL, "k", "force"),
    (Signal.INT, "i", "like Ctrl-C"),
)
ORDER = tuple(signal for signal, _, _ in CHOICES)


def identity(row: ProcessRow) -> ProcIdentity:
    """The identity the user saw: PID and start time (a reused PID is refused)."""
    return ProcIdentity(pid=row.pid, create_time=row.info.create_time)


def targets_table(rows: list[ProcessRow]) -> Table:
    """The processes, one per row: the whole command, wrapped in its column, so the arguments
    that tell two workers apart are on screen even at 80 columns."""
    table = Table.grid(padding=(0, 1))
    for justify in ("right", "left", "left", "right"):  # PID, user, state, GPU memory
        table.add_column(justify=justify, no_wrap=True)
    table.add_column(overflow="fold", ratio=1)  # fold: a long path breaks instead of hiding
    for r in rows:
        user = units.NA if r.info.user is None else r.info.user
        mem = units.short_size(r.used_memory_bytes)
        # Text cells: a str cell is markup to Rich, and a user named "[/]" crashes the dialog.
        cells = (str(r.pid), user, r.state.value, mem, r.info.command)
        table.add_row(*(plain(cell) for cell in cells))
    return table


def choice_label(signal: Signal, key: str, meaning: str) -> Text:
    """'t  TERM  ask to exit', the key marked: it chooses the signal."""
    return Text.assemble((key, "bold underline"), f"  {signal.value:<5} {meaning}")


class ConfirmKill(ModalScreen[list[KillResult]]):
    """Signals the listed processes, each checked on its own by the Killer; shows the results.

    The focus starts on Send: Enter sends the chosen signal. t, k, i (or the arrows) choose the
    signal first; the Send button names it. One send per dialog, then KILL for those still running.
    """

    BINDINGS = [
        Binding("escape", "close", "Close", tooltip="close the dialog"),
        *(
            Binding(
                f"{key},{key.upper()}",
                f"choose('{signal}')",
                signal,
                tooltip=f"{signal}: {meaning}",  # markup: source
            )
            for signal, key, meaning in CHOICES
        ),
        Binding("c,C", "children", "Children", tooltip="with / without the children"),
        Binding("up", "step(-1)", "Previous", show=False, tooltip="the previous / next signal"),
        Binding("down", "step(1)", "Next", show=False, tooltip="the previous / next signal"),
    ]

    def __init__(
        self,
        rows: list[ProcessRow],
        killer: Killer,
        *,
        signal: Signal = Signal.TERM,
        grace_s: float = GRACE_S,
    ) -> None:
        super().__init__()
        self.rows = rows
        self.killer = killer
        self.signal = signal
        self.grace_s = grace_s
        self.sent = False  # the choice is locked once a signal went out
        self.results: list[KillResult] = []
        self.suggested_parent: ProcIdentity | None = None

    def compose(self) -> ComposeResult:
        count = len(self.rows)
        with Vertical(id="kill-dialog") as box:
            box.border_title = plain(f"Signal {count} process{'es' if count != 1 else ''}")
            with VerticalScroll(id="kill-targets", can_focus=False):
                yield Static(targets_table(self.rows), id="kill-target-rows")
            with Horizontal(id="kill-options"):
                choices = RadioSet(id="kill-signal")
                choices.can_focus = False  # the keys choose: t k i and the arrows, from anywhere
                with choices:
                    for signal, key, meaning in CHOICES:
                        yield RadioButton(
                            choice_label(signal, key, meaning),
                            value=signal is self.signal,
                            id=f"sig-{signal.value}",
                        )
                yield Checkbox(
                    Text.assemble(("c", "bold underline"), "  with children"), id="kill-children"
                )
            yield Static(
                plain(
                    f"Checked again right before sending; gputop then waits {self.grace_s:g} s "
                    "to see it exit."
                ),
                id="kill-hint",
            )
            yield Static("", id="kill-result")
            with Horizontal(id="kill-buttons"):
                yield Button(plain(f"Send {self.signal}"), variant="error", id="kill-send")
                yield Button("Send KILL", variant="error", id="kill-escalate", classes="-hidden")
                yield Button(
                    "Signal parent", variant="warning", id="kill-parent", classes="-hidden"
                )
                yield Button("Close", id="kill-close")

    def on_mount(self) -> None:
        self.query_one("#kill-send", Button).focus()

    @property
    def chosen_signal(self) -> Signal:
        """The signal Send sends."""
        return self.signal

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Once a signal went out the choice stays what was sent (Signal parent sends it too).
        return not (self.sent and action in ("choose", "step"))

    def action_choose(self, name: str) -> None:
        self._choose(Signal(name))

    def action_children(self) -> None:
        box = self.query_one("#kill-children", Checkbox)
        box.value = not box.value

    def action_step(self, step: int) -> None:
        index = ORDER.index(self.signal) + step
        self._choose(ORDER[max(0, min(index, len(ORDER) - 1))])

    def _choose(self, signal: Signal) -> None:
        # Kept here, not read back from the radio buttons: their change arrives as a message,
        # after an Enter typed right behind the key.
        self.signal = signal
        self.query_one(f"#sig-{signal.value}", RadioButton).value = True
        send = self.query_one("#kill-send", Button)
        send.label = plain(f"Send {signal}")
        send.focus()  # Enter sends what was just chosen, wherever the focus was

    @on(RadioSet.Changed, "#kill-signal")
    def _clicked(self, event: RadioSet.Changed) -> None:
        # A click. The keys set the signal themselves; the change they caused, or a stale one
        # (a button unpressed since by a later key), must not undo a later choice.
        chosen = Signal((event.pressed.id or "sig-TERM").removeprefix("sig-"))
        if event.pressed.value and chosen is not self.signal:
            self._choose(chosen)

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
        self.sent = True
        self.query_one("#kill-signal", RadioSet).disabled = True
        for button in self.query(Button):
            button.disabled = True
        self.query_one("#kill-result", Static).update(plain(f"sending SIG{signal.value}…"))
        with_children = self.query_one("#kill-children", Checkbox).value
        self._send(targets, signal, with_children)

    @work(thread=True, group="kill", exit_on_error=False)
    def _send(self, targets: list[ProcIdentity], signal: Signal, with_children: bool) -> None:
        # Each process is checked on its own by the Killer right before its signal; the audit
        # log gets the command this dialog showed for it beside the one read at that check.
        shown = {identity(r): r.info.command for r in self.rows}
        results = [
            self.killer.send(
                t,
                signal,
                with_children=with_children,
                grace_s=self.grace_s,
                command_shown=shown.get(t),
            )
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
            parent.label = plain(f"Signal parent {self.suggested_parent.pid}")
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
