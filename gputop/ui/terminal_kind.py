"""Whether TERM names a terminal that can show a dashboard: asked before any escape code is written.

Textual draws with xterm's escape codes whatever TERM says, so a terminal that cannot move its
cursor (``TERM=dumb``: Emacs's shell buffer, editors' consoles, some CI logs) would receive pages
of escape codes instead of a dashboard. Refused, with the one-shots named instead:

- TERM unset or empty: a terminal nobody described, refused as htop (ncurses) refuses it;
- ``dumb``, ``unknown``, ``emacs``, and whatever terminfo describes without cursor addressing
  (no ``cup``) or as a hard-copy terminal (``hc``);
- a name terminfo does not know, unless it belongs to a family that speaks xterm's codes
  (``xterm-kitty`` or ``alacritty`` over SSH to a host without their entries must still work).

No Textual here: the command line asks before importing it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from gputop.engine.sanitize import clean

INSTEAD = "use --once, --json or query"

# Never a dashboard, whatever terminfo says about them.
INCAPABLE = frozenset({"dumb", "unknown", "emacs"})

# Terminal families that speak xterm's escape codes: accepted without asking terminfo, whose
# database on this host may lack a newer terminal's entry. The family is the name up to the
# first '-', '.' or '+' (xterm-256color, screen.xterm-256color, rxvt-unicode-256color).
XTERM_FAMILIES = frozenset(
    {
        "xterm",
        "screen",
        "tmux",
        "rxvt",
        "alacritty",
        "kitty",
        "wezterm",
        "foot",
        "ghostty",
        "contour",
        "st",
        "vte",
        "gnome",
        "konsole",
        "putty",
        "mintty",
        "iterm",
        "iterm2",
        "linux",
    }
)

# What a terminal name looks like (terminfo's own names); anything else is not looked up.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")

Lookup = Callable[[str], bool | None]


def cursor_addressable(term: str) -> bool | None:
    """What terminfo says of ``term``: True when it can move its cursor and is not a hard-copy
    terminal; None when it has no entry for it (or this Python has no curses).

    curses.setupterm loads an entry only once per process: the command line asks once, before
    anything else in gputop could have called it.
    """
    try:
        import curses
    except ImportError:  # a Python built without curses: the family list alone decides
        return None
    try:
        curses.setupterm(term, 2)  # fd 2: the terminal, once ensure_terminal() has run
        return curses.tigetstr("cup") is not None and curses.tigetflag("hc") <= 0
    except curses.error:  # no entry (or an unreadable database)
        return None


def refusal(
    term: str | None, lookup: Lookup = cursor_addressable, *, instead: str = INSTEAD
) -> str | None:
    """None when a dashboard may start on a terminal called ``term``; otherwise why not, in one
    line that names what to use ``instead``."""
    if not term:
        return f"TERM is not set, so this terminal cannot show the dashboard; set it or {instead}"
    shown = clean(term[:64])
    if term in INCAPABLE:
        return f"this terminal (TERM={shown}) cannot show the dashboard; {instead}"
    if _NAME.fullmatch(term) is None:
        return f"TERM={shown} is not a terminal name; set TERM to your terminal's or {instead}"
    if re.split(r"[-.+]", term, maxsplit=1)[0] in XTERM_FAMILIES:
        return None
    capable = lookup(term)
    if capable is None:
        return f"unknown terminal type TERM={shown} (no terminfo entry); {instead}"
    if not capable:
        return f"this terminal (TERM={shown}) cannot show the dashboard; {instead}"
    return None


__all__ = ["INSTEAD", "cursor_addressable", "refusal"]
