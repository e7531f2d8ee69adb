"""Below the smallest size the dashboard can draw: only the "terminal too small" message.

The main screen shows it in place of its own widgets (it keeps their state for the resize back).
A dialog open when the window shrinks (help, GPU or process detail, the kill dialog) is covered
by :class:`TooSmallScreen`, which the app pushes over it and pops when the window grows again,
so the dialog comes back as it was. Either way the message sits on a layer above Textual's own
(notifications, tooltips), which would otherwise be drawn over it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from gputop.ui.plain import plain

MIN_SIZE = (60, 16)  # below this only the message is shown, until the window grows
LAYER = "too-small"  # the message's layer: above every other, Textual's included


def too_small(width: int, height: int) -> bool:
    """True when a ``width`` x ``height`` terminal is below :data:`MIN_SIZE`."""
    return width < MIN_SIZE[0] or height < MIN_SIZE[1]


def message(width: int, height: int) -> str:
    """What the message says: the size now and the size needed."""
    return (
        f"terminal too small: {width}x{height}\n"
        f"gputop needs at least {MIN_SIZE[0]}x{MIN_SIZE[1]}: enlarge the window"
    )


class TooSmallScreen(Screen[None]):
    """The message alone, over a dialog, while the window is too small (``-tiny``: see tcss)."""

    def __init__(self, width: int, height: int) -> None:
        super().__init__(classes="-tiny")
        self._text = message(width, height)

    @property
    def layers(self) -> tuple[str, ...]:
        # Textual's layers (notifications, tooltips) come after the screen's own.
        return (*super().layers, LAYER)

    def compose(self) -> ComposeResult:
        yield Static(plain(self._text), id="too-small")

    def show_size(self, width: int, height: int) -> None:
        """The window changed but is still too small: say its size now."""
        self._text = message(width, height)
        if self.is_mounted:
            self.query_one("#too-small", Static).update(plain(self._text))
