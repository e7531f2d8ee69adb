"""The dashboard on a real driver process serving a simulated box (faults included): shared by
the tests that watch it crash, hang and recover."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot

from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.ui.app import GputopApp, make_app
from gputop.ui.widgets.header import HeaderBar

Body = Callable[[GputopApp, Pilot[Any]], Awaitable[None]]


def header(app: GputopApp) -> str:
    """The header's text."""
    return app.query_one(HeaderBar).render().plain


async def until(pilot: Pilot[Any], what: Callable[[], object], seconds: float) -> bool:
    """Whether ``what()`` came true within ``seconds`` (the app keeps running meanwhile)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if what():
            return True
        await pilot.pause(0.05)
    return bool(what())


def run_on_box(
    tmp_path: Path, scenario: str, body: Body, *, size: tuple[int, int] = (120, 30)
) -> IsolatedSource:
    """Run ``body`` on the dashboard (0.25 s ticks) over a driver process serving ``scenario``
    (TOML text); the source is closed after, and returned for its counts."""
    path = tmp_path / "box.toml"
    path.write_text(scenario, encoding="utf-8")
    source = IsolatedSource(DriverConfig(scenario=str(path)))
    app = make_app(source, interval_s=0.25)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await body(app, pilot)

    try:
        asyncio.run(main())
    finally:
        source.close()
    return source
