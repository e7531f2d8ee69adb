"""The dashboard's keys: one list, shown by the Footer and the help screen alike.

The global keys (GLOBAL_ACTIONS) act on the app, the others on the main view. The main screen
binds all of them, in this order: Textual's footer lists the screen's keys before the app's, so
global keys bound on the app alone would move to the end of the footer. The app binds the
global ones too, for the screens on top of the main one.

The help screen is built from the bindings of every screen and widget (gputop.ui.screens.help);
the texts below are for the keys whose binding has no tooltip of its own.
"""

from __future__ import annotations

from dataclasses import replace

from textual.binding import Binding

# Actions that work on every screen; the others act on the main view.
GLOBAL_ACTIONS = frozenset({"quit", "help", "pause", "interval"})

SIGNAL_PRESET_HELP = "the same, with TERM / KILL / INT already chosen"
PANEL_HELP = "(on a GPU panel) move between the GPU panels"


def signal_keys(whom: str) -> list[Binding]:
    """The keys that open the signal dialog for ``whom``: k and F9, as in htop, on TERM; T, K
    and I on that signal. Wherever a process is chosen: the main view and the process detail.
    """
    return [
        Binding(
            "k,f9",
            "kill",
            "Kill",
            # whom: the callers' own words; a tooltip must be a str (Textual reads it as markup)
            tooltip=f"signal {whom}: TERM, KILL or INT",  # markup: source
        ),
        *(
            Binding(key, f"kill('{signal}')", signal, show=False, tooltip=SIGNAL_PRESET_HELP)
            for key, signal in (("T", "TERM"), ("K", "KILL"), ("I", "INT"))
        ),
    ]


KEYS: list[Binding] = [
    Binding("q", "quit", "Quit", tooltip="quit gputop"),
    Binding("question_mark,h", "help", "Help", key_display="?", tooltip="this help"),
    *signal_keys("the tagged processes (or the one under the cursor)"),
    Binding(
        "slash",
        "filter",
        "Filter",
        key_display="/",
        tooltip="filter by PID, user, command, name, state, container, pod or namespace",
        # Priority: handled as it arrives, so the keys typed right after it (fast, or pasted)
        # go to the filter box, not to the table. In the box itself it is just a "/".
        priority=True,
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
    Binding(
        "d",
        "gpu_detail",
        "GPU detail",
        show=False,
        tooltip="GPU detail: history charts and every field",
    ),
    Binding("p", "pause", "Pause", tooltip="pause / resume sampling"),
    Binding("e", "environment", "Env", tooltip="the environment of the process under the cursor"),
    Binding("plus,equals_sign", "interval(1)", "Slower", show=False, tooltip="sample less often"),
    Binding("minus", "interval(-1)", "Faster", show=False, tooltip="sample more often"),
    Binding("escape", "clear_filter", "Clear filter", show=False, tooltip="clear the filter"),
]

# The main view has two regions: Tab goes from one to the other, the arrows move within the GPU
# panels. The arrows are priority keys: the panels' scrolling grid would take them first; they
# act only while a panel has the focus (MainScreen.check_action), else the table gets them.
REGION_KEYS: list[Binding] = [
    Binding(
        "tab,shift+tab",
        "switch_region",
        "Switch",
        show=False,
        tooltip="switch between the GPU panels and the processes",
    ),
    *(
        Binding(
            key, f"panel_move({dx}, {dy})", "Move", show=False, priority=True, tooltip=PANEL_HELP
        )
        for key, dx, dy in (("left", -1, 0), ("right", 1, 0), ("up", 0, -1), ("down", 0, 1))
    ),
]

# F10 and Ctrl-C quit at once, as in htop (Textual's own Ctrl-C only says how to quit). Priority
# bindings: they quit from the filter box and from dialogs too, where q is a letter or "close".
QUIT_ON_F10 = Binding("f10", "quit", "Quit", show=False, priority=True, tooltip="quit gputop")
QUIT_ON_CTRL_C = Binding("ctrl+c", "quit", "Quit", show=False, priority=True, tooltip="quit gputop")


def action_name(action: str) -> str:
    """'app.kill('TERM')' -> 'kill'."""
    return action.split("(", 1)[0].rsplit(".", 1)[-1]


def is_global(binding: Binding) -> bool:
    """Whether the binding's action works on every screen (an app action)."""
    return action_name(binding.action) in GLOBAL_ACTIONS


def is_signal(binding: Binding) -> bool:
    """Whether the binding signals processes (gone in --readonly)."""
    return action_name(binding.action) == "kill"


# The app's keys: the global ones.
APP_BINDINGS: list[Binding] = [*(b for b in KEYS if is_global(b)), QUIT_ON_F10, QUIT_ON_CTRL_C]
# The main screen's keys: all of them, the global ones run on the app.
MAIN_BINDINGS: list[Binding] = [
    *(replace(b, action=f"app.{b.action}") if is_global(b) else b for b in KEYS),
    *REGION_KEYS,
]

# The actions that move about the process table, listed first by the help.
MOVEMENT = ("cursor", "page", "sideways")

# The help's text for keys bound without a tooltip (by Textual's and gputop's widgets), by action.
HELP_TEXT = {
    "cursor": "move in the process table (k is kill, as in htop)",
    "page": "move in the process table (k is kill, as in htop)",
    "sideways": "scroll the table's long commands sideways",
    "choose": "details of the process under the cursor",
    "select": "details of the GPU under the cursor",
    "step": "previous / next GPU",
    "pop_screen": "back",
}
# ...and in --readonly, where no key signals anything, the help says nothing of signals.
READONLY_HELP_TEXT = {
    "cursor": "move in the process table",
    "page": "move in the process table",
    "tag": "tag / untag a row",
}


def help_text(binding: Binding, *, readonly: bool) -> str:
    """What the help says a binding does."""
    name = action_name(binding.action)
    if readonly and name in READONLY_HELP_TEXT:
        return READONLY_HELP_TEXT[name]
    return binding.tooltip or HELP_TEXT.get(name) or binding.description
