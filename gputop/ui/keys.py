"""The dashboard's keys: one list, shown by the Footer and the help screen alike."""

from __future__ import annotations

from textual.binding import Binding, BindingType

APP_BINDINGS: list[BindingType] = [
    Binding("q", "quit", "Quit", tooltip="quit gputop"),
    Binding("question_mark,h", "help", "Help", key_display="?", tooltip="this help"),
    Binding(
        "k", "kill", "Kill", tooltip="signal the tagged processes (or the one under the cursor)"
    ),
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="filter by PID, user, command or state",
    ),
    Binding("s", "sort(1)", "Sort", tooltip="sort by the next column"),
    Binding("greater_than_sign", "sort(1)", "Sort", show=False),
    Binding(
        "less_than_sign",
        "sort(-1)",
        "Sort back",
        show=False,
        tooltip="sort by the previous column",
    ),
    Binding("r", "reverse", "Reverse", show=False, tooltip="reverse the sort order"),
    Binding("u", "only_mine", "Mine", tooltip="only my processes (again: everyone's)"),
    Binding("t", "tree", "Tree", tooltip="tree view: children under their parent"),
    Binding("g", "focus_gpu", "GPU", tooltip="only one GPU's processes (cycles through the GPUs)"),
    Binding("d", "gpu_detail", "GPU detail", show=False, tooltip="charts and every field of a GPU"),
    Binding("p", "pause", "Pause", tooltip="pause / resume sampling"),
    Binding("plus,equals_sign", "interval(1)", "Slower", show=False, tooltip="sample less often"),
    Binding("minus", "interval(-1)", "Faster", show=False, tooltip="sample more often"),
    Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear the filter"),
]

# Shown first on the help screen: keys that belong to Textual widgets, not to APP_BINDINGS.
MOVEMENT_HELP = [
    ("↑ ↓ j ^n ^p PgUp PgDn", "move in the process table (k is kill, as in htop)"),
    ("← →", "scroll long commands sideways"),
    ("tab", "switch between the GPU panels and the processes"),
    ("enter", "details of the GPU or process under the cursor"),
]
