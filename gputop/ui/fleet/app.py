"""The fleet overview's App: the overview screen, a host's drill-down, a poller thread, no
driver."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from textual.app import App

from gputop.fleet.model import Fleet
from gputop.ui.fleet.host import HostScreen, ReadProcesses
from gputop.ui.fleet.poller import FleetPoller
from gputop.ui.fleet.screen import FleetScreen


class FleetApp(App[int]):
    """Read-only: the fleet from ``read`` (called off the UI thread), refreshed every interval."""

    CSS_PATH = "fleet.tcss"
    TITLE = "gputop fleet"
    ENABLE_COMMAND_PALETTE = False

    def __init__(
        self,
        read: Callable[[], Fleet],
        *,
        interval_s: float,
        source: str,
        theme: str | None = None,
        read_processes: ReadProcesses = lambda _host: None,
    ) -> None:
        super().__init__()
        self.source = source
        self.read_processes = read_processes  # a host's, for its drill-down (off the UI thread)
        self.requested_theme = theme
        self.poller = FleetPoller(read, interval_s=interval_s, on_change=self._changed)

    def on_mount(self) -> None:
        if self.requested_theme:
            self.theme = self.requested_theme
        self.push_screen(FleetScreen(self.poller, source=self.source))  # it starts the poller

    def _changed(self) -> None:
        """On the poller's thread: show its news on the UI thread (not after the app ended)."""
        with contextlib.suppress(RuntimeError):  # the app is not running (any more)
            self.call_from_thread(self._show)

    def _show(self) -> None:
        screen = self.screen
        if isinstance(screen, (FleetScreen, HostScreen)):
            screen.show_state()

    def show_host(self, name: str) -> None:
        """Drill into host ``name`` (Escape comes back)."""
        self.push_screen(HostScreen(self.poller, name, self.read_processes))

    def on_unmount(self) -> None:
        self.poller.stop()
