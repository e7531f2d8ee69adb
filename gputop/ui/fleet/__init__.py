"""`gputop fleet` without --once/--json: a read-only Textual overview of every host Prometheus
knows (:mod:`gputop.ui.fleet.app`). Nothing here reads a driver, or imports what does: the data
comes from :mod:`gputop.fleet`, read on a thread of its own (:mod:`gputop.ui.fleet.poller`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import FrameType

    from gputop.fleet.client import PrometheusClient


def run_fleet_dashboard(
    client: PrometheusClient, *, interval_s: float, theme: str | None = None
) -> int:
    """Run the overview until q (0; 1 after a crash Textual reported). SIGTERM, SIGHUP and
    SIGINT quit it as q does, the terminal restored, and exit 128+N."""
    from gputop.errors import UsageError
    from gputop.exits import EXIT_SIGNALS, handling
    from gputop.ui import _quit_from_signal, ensure_terminal

    ensure_terminal(instead="use fleet --once or fleet --json")
    from textual.theme import BUILTIN_THEMES

    from gputop.fleet.model import HISTORY_STEP_S, FleetReader, read_processes
    from gputop.ui.fleet.app import FleetApp

    if theme is not None and theme not in BUILTIN_THEMES:
        raise UsageError(f"unknown theme {theme!r}; known: {', '.join(sorted(BUILTIN_THEMES))}")
    # the sparklines' two range queries once a history step, not every refresh
    reader = FleetReader(client, history_every=round(HISTORY_STEP_S / interval_s))
    app = FleetApp(
        reader,
        interval_s=interval_s,
        source=client.base_url,
        theme=theme,
        read_processes=lambda host: read_processes(client, host),
    )
    received: list[int] = []

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not received:
            received.append(signum)
            _quit_from_signal(app)  # type: ignore[arg-type]  # any App: it calls app.exit

    with handling(EXIT_SIGNALS, on_signal):
        app.run()
    return 128 + received[0] if received else (app.return_code or 0)
