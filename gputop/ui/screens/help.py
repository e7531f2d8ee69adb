"""The help screen: every key, built from the bindings themselves so it never drifts."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

STATES_HELP = (
    ("active", "NVML lists a GPU context for it"),
    ("holder", "holds /dev/nvidia* but has no context: a stuck worker keeping memory"),
    ("defunct", "zombie: its parent does not reap it (signal the parent)"),
    ("orphan", "its parent is gone while it still holds the GPU"),
    ("stopped", "stopped (Ctrl-Z / SIGSTOP): holds memory and does nothing"),
    ("lost-gpu", "holds a GPU the driver lost: whether it still works cannot be known"),
    ("other-ns", "a PID from another PID namespace (a container): not visible here"),
)


def key_rows(bindings: Iterable[Binding], display: Callable[[str], str]) -> list[tuple[str, str]]:
    """(keys, description) per action, aliases merged; the tooltip is the long description."""
    merged: dict[str, tuple[list[str], str]] = {}
    for b in bindings:
        if not b.description:
            continue
        keys, _ = merged.setdefault(b.action, ([], b.tooltip or b.description))
        for key in b.key.split(","):
            shown = display(key.strip())
            if shown not in keys:
                keys.append(shown)
    return [(" ".join(keys), desc) for keys, desc in merged.values()]


class HelpScreen(ModalScreen[None]):
    """A scrollable list of keys and process states; any of escape, q, ?, h closes it."""

    BINDINGS = [Binding("escape,q,question_mark,h", "dismiss", "Close")]

    def __init__(self, rows: list[tuple[str, str]], *, readonly: bool) -> None:
        super().__init__()
        self.rows = rows
        self.readonly = readonly

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold", no_wrap=True)
        keys.add_column()
        for key, desc in self.rows:
            keys.add_row(key, desc)
        states = Table.grid(padding=(0, 2))
        states.add_column(style="bold", no_wrap=True)
        states.add_column()
        for name, desc in STATES_HELP:
            states.add_row(name, desc)
        parts: list[RenderableType] = [Text("Keys", style="bold underline"), keys]
        if self.readonly:
            parts.append(Text("\nread-only session: no signals can be sent"))
        parts += [
            Text("\nProcess states", style="bold underline"),
            states,
            Text(
                "\nMouse: click a GPU for its detail, a column header to sort, a row to select."
                "\nNVML index vs CUDA index: '0:c1' / '(CUDA 1)' means NVML GPU 0 is cuda:1 here."
            ),
        ]
        with VerticalScroll(id="help-body") as body:
            body.border_title = "gputop help"
            body.border_subtitle = "esc to close"
            yield Static(Group(*parts))
