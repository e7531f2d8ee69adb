"""Below the minimum size only "terminal too small" is drawn, over every note, toast and box.

The real dashboard on a pty: a notification is up, the unattributed-memory and holder-scan notes
are shown (the demo has both), the filter box is open; then the window shrinks to 40x10. Every
visible character written from then on must belong to the message; growing the window again
brings the dashboard back.
"""

from __future__ import annotations

import fcntl
import re
import struct
import termios
from typing import Any

from textual.pilot import Pilot

from gputop.ui.app import GputopApp
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.too_small import TooSmallScreen
from tests.pty_terminal import Terminal, on_terminal
from tests.ui.data import run

# Escape sequences: CSI (with private markers), OSC (ended by BEL or ST), charset and keypad.
ESCAPES = re.compile(
    rb"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>78]"
)
FULL_FRAME = b"GPU-MEM"


def resize(term: Terminal, columns: int, rows: int) -> None:
    """Resize the pty as a terminal window does (the kernel sends SIGWINCH)."""
    fcntl.ioctl(term.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def words_written(data: bytes) -> set[str]:
    return set(ESCAPES.sub(b" ", data).decode("utf-8", "replace").split())


def assert_only_the_message_after_shrinking(term: Terminal, *, watch_s: float) -> None:
    """Shrink the window to 40x10, watch it ``watch_s``: only the message's words are drawn."""
    mark = len(term.output)
    resize(term, 40, 10)
    term.wait_for(b"40x10")
    term.read_for(watch_s)
    # The frame at the new size starts at its first row; what came before it was drawn at the
    # old size (ticks that were on their way).
    message_at = term.output.index(b"40x10", mark)
    frame_at = term.output.rindex(b"\x1b[1;1H", mark, message_at)
    message = "terminal too small: 40x10 gputop needs at least 60x16: enlarge the window"
    assert words_written(bytes(term.output[frame_at:])) <= set(message.split())


def test_a_tiny_terminal_shows_nothing_but_the_message() -> None:
    with on_terminal("--demo", size=(100, 30)) as term:
        term.wait_for(b"unattributed")  # the demo's note (a GPU's memory no process owns)
        term.type(b"+")  # a notification: "sampling every 2 s"
        term.wait_for(b"sampling every")
        term.type(b"/zz")  # the filter box, open
        term.wait_for(b"zz")
        # A few ticks at 40x10: the notes are refreshed, the toast expires.
        assert_only_the_message_after_shrinking(term, watch_s=2.5)

        mark = len(term.output)
        resize(term, 100, 30)
        term.wait_for(FULL_FRAME)
        term.wait_for(b"unattributed")
        shown = words_written(bytes(term.output[mark:]))
        assert "small:" not in shown
        term.type(b"\x03")  # ctrl+c: quits from the filter box too
        assert term.read_to_end() == 0


def test_a_dialog_open_when_the_window_shrinks_is_covered_then_shown_again() -> None:
    """The help, a process's detail: each its own screen, covered by the message alone, the
    same dialog back (its state kept) once the window grows; one opened while tiny too."""

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        await pilot.resize_terminal(40, 10)
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        assert "terminal too small: 40x10" in str(app.screen.query_one("#too-small").render())
        await pilot.resize_terminal(50, 12)  # still too small: the message follows the size
        await pilot.pause()
        assert "terminal too small: 50x12" in str(app.screen.query_one("#too-small").render())
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert app.screen is help_screen  # the very dialog, as it was
        await pilot.press("escape")
        await pilot.resize_terminal(40, 10)  # the main screen covers itself: no screen pushed
        await pilot.pause()
        assert app.screen is app.main_screen and app.main_screen.has_class("-tiny")
        await pilot.press("question_mark")  # a dialog opened while tiny is covered at once
        await pilot.pause()
        assert isinstance(app.screen, TooSmallScreen)
        await pilot.resize_terminal(100, 30)
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)

    run(body, size=(100, 30))


def test_the_dialog_cover_draws_only_the_message_on_a_real_terminal() -> None:
    with on_terminal("--demo", size=(100, 30)) as term:
        term.wait_for(FULL_FRAME)
        term.type(b"?")
        term.wait_for(b"this help")
        assert_only_the_message_after_shrinking(term, watch_s=1.5)
        resize(term, 100, 30)
        term.wait_for(b"this help")  # the help again
        term.type(b"\x03")
        assert term.read_to_end() == 0
