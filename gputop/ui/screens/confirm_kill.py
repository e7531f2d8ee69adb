"""The kill dialog: pick TERM/KILL/INT (and children), see each result, escalate to KILL.

After a signal it follows the GPU memory of the processes signalled on the app's snapshots
(gputop.engine.kill.MemoryWatch) and says whether it was released, or who still holds it; a
toast says it too, also when the dialog was closed meanwhile. A process in uninterruptible
sleep (state D) is offered no signal: it would act on none.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, Checkbox, RadioButton, RadioSet, Static

from gputop import units
from gputop.engine.kill import (
    FOLLOW_S,
    GRACE_S,
    Killer,
    KillResult,
    MemoryWatch,
    ProcIdentity,
    Release,
    Signal,
    unkillable_reason,
)
from gputop.engine.model import ProcessRow, Snapshot
from gputop.ui.plain import plain

# The signals the dialog offers, in its order: the key that chooses each, and what it does.
CHOICES = (
    (Signal.TERM, "t", "ask to exit"),
    (Signal.KILL, "k", "force"),
    (Signal.INT, "i", "like Ctrl-C"),
)
ORDER = tuple(signal for signal, _, _ in CHOICES)
FOLLOW_EVERY_S = 0.25  # how often the aftermath looks at the newest snapshot


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
    ``snapshot`` gives the newest reading (the app's), which the aftermath follows.
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
        snapshot: Callable[[], Snapshot | None] = lambda: None,
        follow_s: float = FOLLOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.rows = rows
        self.snapshot = snapshot
        self.follow_s = follow_s
        self.clock = clock
        # Rows no signal is offered for, with the reason (shown at once, never sent).
        self.refused = {r.pid: why for r in rows if (why := unkillable_reason(r)) is not None}
        self.memory_watch: MemoryWatch | None = None
        self.aftermath: tuple[Release, ...] | None = None
        self._following: Timer | None = None
        self._before: Snapshot | None = None
        self._sent_at = 0.0
        self._lines: list[str] = [f"✗ refused: {why}" for why in self.refused.values()]
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
            yield Static(Text("\n".join(self._lines)), id="kill-result")
            with Horizontal(id="kill-buttons"):
                yield Button(plain(f"Send {self.signal}"), variant="error", id="kill-send")
                yield Button("Send KILL", variant="error", id="kill-escalate", classes="-hidden")
                yield Button(
                    "Signal parent", variant="warning", id="kill-parent", classes="-hidden"
                )
                yield Button("Close", id="kill-close")

    def on_mount(self) -> None:
        send = self.query_one("#kill-send", Button)
        if len(self.refused) == len(self.rows):  # nothing to signal: no signal is offered
            send.add_class("-hidden")
            self.query_one("#kill-signal", RadioSet).disabled = True
            self.query_one("#kill-close", Button).focus()
        else:
            send.focus()

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
            targets = [
                identity(r)
                for r in self.rows
                if r.pid not in self.refused and (not only_running or r.pid in running)
            ]
        self.sent = True
        self._before, self._sent_at = self.snapshot(), self.clock()
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
        lines = [f"✗ refused: {why}" for why in self.refused.values()]
        for r in results:
            lines.append(("✓ " if r.ok else "✗ refused: ") + r.message)
            self.app.notify(
                r.message,
                title=f"SIG{r.signal.value}" if r.ok else "Refused",
                severity="information" if r.ok else "error",
                markup=False,  # the message names processes: "[" in a name is not markup
            )
        self._lines = lines
        self._follow_memory(results)
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

    # -- aftermath ------------------------------------------------------------------------
    def _follow_memory(self, results: list[KillResult]) -> None:
        """Follow the memory of the processes just signalled (a later send replaces the watch)."""
        if self._following is not None:
            self._following.stop()
            self._following = None
        watch = MemoryWatch(
            self._before, results, sent_at_mono=self._sent_at, follow_s=self.follow_s
        )
        self.memory_watch, self.aftermath = watch, None
        if watch.following:
            self._lines.append(f"following their GPU memory for {self.follow_s:g} s…")
            # The app's timer: it goes on when the dialog is closed, and the toast still comes.
            self._following = self.app.set_interval(FOLLOW_EVERY_S, self._look)
        self._draw()

    def _look(self) -> None:
        watch = self.memory_watch
        verdict = watch.observe(self.snapshot(), self.clock()) if watch is not None else ()
        if verdict is None:
            return
        if self._following is not None:
            self._following.stop()
            self._following = None
        self.aftermath = verdict
        if self._lines and self._lines[-1].startswith("following their GPU memory"):
            self._lines.pop()
        for release in verdict:
            self._lines.append(release.line)
            self.app.notify(
                release.line,
                title="GPU memory",
                severity="information" if release.released else "warning",
                timeout=8 if release.released else 30,  # what to do next takes reading
                markup=False,  # it names processes: "[" in a name is not markup
            )
        self._draw()

    def _draw(self) -> None:
        if self.is_attached:  # closed meanwhile: the toast alone tells
            self.query_one("#kill-result", Static).update(Text("\n".join(self._lines)))
