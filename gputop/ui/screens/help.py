"""The help screen: every key, built from the bindings themselves so it never drifts."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gputop.ui.keys import (
    APP_BINDINGS,
    KEYS,
    MOVEMENT,
    REGION_KEYS,
    action_name,
    help_text,
    is_global,
    is_signal,
)

STATES_HELP = (
    ("active", "NVML lists a GPU context for it"),
    ("holder", "holds /dev/nvidia* but has no context: a stuck worker keeping memory"),
    ("defunct", "zombie: its parent does not reap it (signal the parent)"),
    ("orphan", "its parent is gone while it still holds the GPU"),
    ("stopped", "stopped (Ctrl-Z / SIGSTOP): holds memory and does nothing"),
    ("unkillable", "state D in a kernel call: no signal acts on it; wait, reset the GPU or reboot"),
    ("lost-gpu", "holds a GPU the driver lost (reset or reboot): whether it works is unknown"),
    ("unknown", "holds a GPU whose processes could not be read (not responding): not stuck"),
    ("other-ns", "a PID from another PID namespace (a container): not visible here"),
)


KEY_COLUMN = 16  # a longer run of keys wraps within it

# Within a row, the usual keys come first, in this order; the others (j, ^n, [, ...) follow.
KEY_ORDER = ("up", "down", "left", "right", "pageup", "pagedown", "home", "end")


def _rank(item: str, order: tuple[str, ...]) -> int:
    """Where ``item`` comes in ``order``; after all of it when not there."""
    return order.index(item) if item in order else len(order)


def key_rows(
    bindings: Iterable[BindingType],
    display: Callable[[str], str],
    describe: Callable[[Binding], str] | None = None,
) -> list[tuple[str, str]]:
    """(keys, description) rows: aliases merged, and actions that share a description.

    ``describe`` gives the description (default: the tooltip, else the binding's description).
    """
    describe = describe or (lambda b: b.tooltip or b.description)
    by_action: dict[str, tuple[list[str], str]] = {}
    for b in Binding.make_bindings(bindings):  # one Binding per key
        if not b.description:
            continue
        keys, _ = by_action.setdefault(b.action, ([], describe(b)))
        if b.key not in keys:
            keys.append(b.key)
    by_text: dict[str, list[str]] = {}
    for keys, text in by_action.values():
        by_text.setdefault(text, []).extend(keys)
    rows = []
    for text, keys in by_text.items():
        keys.sort(key=lambda k: _rank(k, KEY_ORDER))
        shown = dict.fromkeys(display(k) for k in keys)  # ordered and without repeats
        rows.append((" ".join(shown), text))
    return rows


def key_sections(
    display: Callable[[str], str], *, readonly: bool
) -> list[tuple[str, list[tuple[str, str]]]]:
    """The help's keys, a section per place, from the bindings of the screens and widgets.

    In --readonly the signal keys are left out (they do nothing there), and so is the dialog.
    """
    from gputop.ui.screens.confirm_kill import ConfirmKill
    from gputop.ui.screens.gpu_detail import GpuDetailScreen
    from gputop.ui.screens.process_detail import ProcessDetailScreen
    from gputop.ui.widgets.gpu_panel import GpuPanel
    from gputop.ui.widgets.process_table import ProcessTable

    places: list[tuple[str, list[BindingType]]] = [
        ("Everywhere", [*APP_BINDINGS]),
        ("Processes", [*ProcessTable.BINDINGS, *(b for b in KEYS if not is_global(b))]),
        ("GPU panels", [*REGION_KEYS, *GpuPanel.BINDINGS]),
        ("GPU detail", [*GpuDetailScreen.BINDINGS]),
        ("Process detail", [*ProcessDetailScreen.BINDINGS]),
    ]
    if not readonly:
        places.append(("Signal dialog", [*ConfirmKill.BINDINGS]))

    def describe(binding: Binding) -> str:
        return help_text(binding, readonly=readonly)

    sections = []
    for title, bindings in places:
        kept = [b for b in Binding.make_bindings(bindings) if not (readonly and is_signal(b))]
        # Moving about first, in MOVEMENT's order; the rest as bound.
        kept.sort(key=lambda b: _rank(action_name(b.action), MOVEMENT))
        sections.append((title, key_rows(kept, display, describe)))
    return sections


class HelpScreen(ModalScreen[None]):
    """A scrollable list of keys and process states; any of escape, q, ?, h closes it."""

    BINDINGS = [Binding("escape,q,question_mark,h", "dismiss", "Close")]

    def __init__(
        self, sections: list[tuple[str, list[tuple[str, str]]]], *, readonly: bool
    ) -> None:
        super().__init__()
        self.sections = sections
        self.readonly = readonly

    @property
    def rows(self) -> list[tuple[str, str]]:
        """Every (keys, description) row, section after section."""
        return [row for _, rows in self.sections for row in rows]

    def compose(self) -> ComposeResult:
        # One grid for every section, so the descriptions line up; a long run of keys wraps.
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold", width=KEY_COLUMN)
        keys.add_column()
        for title, rows in self.sections:
            if keys.row_count:
                keys.add_row()
            keys.add_row(Text(title, style="bold underline"))
            for key, desc in rows:
                keys.add_row(Text(key), Text(desc))  # str cells are markup: "[" is a key
        parts: list[Text | Table] = [keys]
        if self.readonly:
            parts.append(Text("\nread-only session: no signals can be sent"))
        states = Table.grid(padding=(0, 2))
        states.add_column(style="bold", no_wrap=True, width=KEY_COLUMN)
        states.add_column()
        for name, desc in STATES_HELP:
            states.add_row(Text(name), Text(desc))
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
