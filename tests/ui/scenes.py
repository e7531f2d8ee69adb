"""Dashboard pictures: `python -m tests.ui.scenes DIR` writes the README's SVG screenshots.

The screenshots are of the real demo: its actors are real processes, so the users, PIDs and
commands are what `gputop --demo` shows on the machine that takes them. The SVG snapshot tests
need pictures that never change: they draw gputop.demo_frames (a shipped scenario on a
hand-moved clock) with :func:`feed`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from gputop.demo_frames import demo_frames
from gputop.engine.model import ProcessRow, Snapshot

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


def _is_stuck(row: ProcessRow | None) -> bool:
    return row is not None and row.stuck


def _save(app: object, path: Path) -> Path:
    from textual.app import App

    assert isinstance(app, App)
    path.write_text(app.export_screenshot(title="gputop"), encoding="utf-8")
    return path


LIVE_WARMUP_S = 12.0  # samples enough for the sparklines and the holder scan to have a say


async def _shoot_live(out_dir: Path, size: tuple[int, int]) -> list[Path]:
    """The real demo, sampled live: main screen, the kill dialog on a stuck process it would
    signal (not a zombie: the dialog refuses those and offers the parent), the GPU detail."""
    from gputop.engine.model import ProcState
    from gputop.sources import open_source
    from gputop.ui.app import make_app
    from gputop.ui.screens.confirm_kill import ConfirmKill
    from gputop.ui.widgets.process_table import ProcessTable

    source = open_source(demo="demo", isolated=True)
    app = make_app(source)
    written: list[Path] = []
    tag = f"{size[0]}x{size[1]}"
    try:
        async with app.run_test(size=size) as pilot:
            await asyncio.sleep(LIVE_WARMUP_S)
            await pilot.pause()
            written.append(_save(app, out_dir / f"main-{tag}.svg"))
            table = app.query_one(ProcessTable)
            keys = table.visible_keys()

            def signalable(key: str) -> bool:
                row = table.row(key)
                return _is_stuck(row) and row is not None and row.state is not ProcState.DEFUNCT

            table.move_cursor(row=next(i for i, k in enumerate(keys) if signalable(k)))
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmKill)
            written.append(_save(app, out_dir / f"kill-stuck-{tag}.svg"))
            await pilot.press("escape")
            await pilot.press("d")
            await asyncio.sleep(1.5)
            await pilot.pause()
            written.append(_save(app, out_dir / f"gpu-detail-{tag}.svg"))
    finally:
        source.close()
    return written


def main(argv: list[str] | None = None) -> int:
    """Write the screenshots of the real demo into the directory given (created if needed)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tests.ui.scenes DIR", file=sys.stderr)
        return 2
    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for size in SIZES:
        for path in asyncio.run(_shoot_live(out_dir, size)):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
