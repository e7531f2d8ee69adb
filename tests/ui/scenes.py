"""Deterministic dashboard pictures: `python -m tests.ui.scenes DIR` writes SVG screenshots.

The frames come from gputop.sim.frames (a shipped scenario on a hand-moved clock, so every run
draws the same pictures); the SVG snapshot tests use the same frames and these helpers.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from gputop.engine.model import ProcessRow, Snapshot
from gputop.sim.frames import demo_frames

SIZES = ((200, 60), (80, 24))

__all__ = ["demo_frames", "feed", "frozen_clock"]


async def feed(app: object, pilot: object, frames: list[Snapshot]) -> None:
    """Post every frame to a running app, as the sampler would, and let it settle.

    The app has no sampler here: it records the frames in its history itself.
    """
    from textual.app import App
    from textual.pilot import Pilot

    from gputop.ui.messages import SnapshotReady

    assert isinstance(app, App) and isinstance(pilot, Pilot)
    for frame in frames:
        app.post_message(SnapshotReady(frame))
        await pilot.pause()


def frozen_clock(frames: list[Snapshot]) -> float:
    """A monotonic time just after the last frame: the pictures never say STALE."""
    return frames[-1].taken_at_mono + 0.5


async def _shoot(out_dir: Path, frames: list[Snapshot], size: tuple[int, int]) -> list[Path]:
    from gputop.ui.app import make_app
    from gputop.ui.screens.confirm_kill import ConfirmKill
    from gputop.ui.widgets.process_table import ProcessTable

    app = make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))
    written: list[Path] = []
    tag = f"{size[0]}x{size[1]}"
    async with app.run_test(size=size) as pilot:
        await feed(app, pilot, frames)
        written.append(_save(app, out_dir / f"main-{tag}.svg"))
        table = app.query_one(ProcessTable)
        keys = table.visible_keys()
        table.move_cursor(row=next(i for i, k in enumerate(keys) if _is_stuck(table.row(k))))
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmKill)
        written.append(_save(app, out_dir / f"kill-stuck-{tag}.svg"))
        await pilot.press("escape")
        await pilot.press("d")
        await pilot.pause()
        written.append(_save(app, out_dir / f"gpu-detail-{tag}.svg"))
    return written


def _is_stuck(row: ProcessRow | None) -> bool:
    return row is not None and row.stuck


def _save(app: object, path: Path) -> Path:
    from textual.app import App

    assert isinstance(app, App)
    path.write_text(app.export_screenshot(title="gputop"), encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Write the screenshots into the directory given (created if needed)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tests.ui.scenes DIR", file=sys.stderr)
        return 2
    os.environ["TZ"] = "UTC"  # the header shows the time of day: the same pictures everywhere
    time.tzset()
    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = demo_frames("demo")
    for size in SIZES:
        for path in asyncio.run(_shoot(out_dir, frames, size)):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
