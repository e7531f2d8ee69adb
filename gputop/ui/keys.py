"""The dashboard's keys: one list, shown by the Footer and the help screen alike.

The global keys (GLOBAL_ACTIONS) act on the app, the others on the main view. The main screen
binds all of them, in this order: Textual's footer lists the screen's keys before the app's, so
global keys bound on the app alone would move to the end of the footer. The app binds the
global ones too, for the screens on top of the main one.
"""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding

# Actions that work on every screen; the others act on the main view.
GLOBAL_ACTIONS = frozenset({"quit", "help", "pause", "interval"})

KEYS: list[Binding] = [
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

# Ctrl-C quits, as in htop (Textual's own binding only says how to quit). A priority binding:
# it quits from the filter box and from dialogs too.
QUIT_ON_CTRL_C = Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit gputop")


def is_global(binding: Binding) -> bool:
    """Whether the binding's action works on every screen (an app action)."""
    return binding.action.split("(", 1)[0] in GLOBAL_ACTIONS


# The app's keys: the global ones.
APP_BINDINGS: list[Binding] = [*(b for b in KEYS if is_global(b)), QUIT_ON_CTRL_C]
# The main screen's keys: all of them, the global ones run on the app.
MAIN_BINDINGS: list[Binding] = [
    replace(b, action=f"app.{b.action}") if is_global(b) else b for b in KEYS
]

# Shown first on the help screen: keys that belong to Textual widgets, not to KEYS.
MOVEMENT_HELP = [
    ("↑ ↓ j ^n ^p PgUp PgDn", "move in the process table (k is kill, as in htop)"),
    ("← →", "scroll long commands sideways"),
    ("tab", "switch between the GPU panels and the processes"),
    ("enter", "details of the GPU or process under the cursor"),
]
