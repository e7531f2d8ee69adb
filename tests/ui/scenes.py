"""Dashboard pictures: `python -m tests.ui.scenes DIR` writes the README's SVG screenshots.

Every picture is drawn from fixed frames on a fixed clock, so two runs on any machine write the
same bytes: the screenshots show the showcase box (tests/ui/showcase.py: a shared training server
with a full history), the SVG snapshot tests draw gputop.demo_frames. Both post their frames with
:func:`feed` and read the time from :func:`frozen_clock`. Rich names an SVG's styles after a hash
of what it draws, so equal screens give equal files.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from gputop.demo_frames import demo_frames
from gputop.engine.model import ProcState, Snapshot

SIZES = ((200, 60), (80, 24))
PICTURES = ("main", "kill-stuck", "gpu-detail")
HERO = "main-200x60.svg"  # the README's first picture
TITLE = "gputop"
KILL_STATE = ProcState.ORPHAN  # the kill picture tags every orphan: the crashed job's workers

__all__ = ["demo_frames", "feed", "frozen_clock", "pictures", "show"]


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


@contextlib.contextmanager
def fixed_terminal() -> Iterator[None]:
    """What a picture must not take from the machine drawing it: the time zone (the header's
    time of day), NO_COLOR, the locale's glyph set (ASCII on a C locale) and a blinking cursor."""
    from textual.widgets import Input

    from gputop import glyphs
    from gputop.ui import text

    saved_env = {name: os.environ.get(name) for name in ("TZ", "NO_COLOR")}
    saved_glyphs, saved_blink = text.GLYPHS, Input.cursor_blink
    os.environ["TZ"] = "UTC"
    os.environ.pop("NO_COLOR", None)
    time.tzset()
    text.GLYPHS, Input.cursor_blink = glyphs.UNICODE, False
    try:
        yield
    finally:
        text.GLYPHS, Input.cursor_blink = saved_glyphs, saved_blink
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        time.tzset()


async def show(app: object, pilot: object, frames: list[Snapshot]) -> None:
    """The main screen after ``frames``: all but the last two go straight into the app's history
    (what it does with each frame it is posted: posting hundreds one by one only costs time), the
    last two are posted."""
    from gputop.ui.app import GputopApp

    assert isinstance(app, GputopApp)
    for frame in frames[:-2]:
        app.history.append(frame)
    await feed(app, pilot, frames[-2:])


def _first_row(app: object, state: ProcState) -> int:
    from textual.app import App

    from gputop.ui.widgets.process_table import ProcessTable

    assert isinstance(app, App)
    table = app.query_one(ProcessTable)
    keys = table.visible_keys()
    return next(i for i, k in enumerate(keys) if (r := table.row(k)) and r.state is state)


async def _shoot(
    frames: list[Snapshot], size: tuple[int, int], names: tuple[str, ...]
) -> dict[str, str]:
    """The pictures ``names`` at ``size``: the main screen; the kill dialog on the tagged orphans
    (stuck workers it would signal); the GPU detail of the busiest process's GPU."""
    from gputop.ui.app import make_app
    from gputop.ui.screens.confirm_kill import ConfirmKill
    from gputop.ui.screens.gpu_detail import GpuDetailScreen
    from gputop.ui.widgets.process_table import ProcessTable

    # A picture is one moment: the table draws the last frame's numbers, as the panels do (its
    # numbers would otherwise wait for a frame 2 s after the one drawn, and these are 1 s apart).
    app = make_app(
        None, start_sampler=False, clock=lambda: frozen_clock(frames), table_refresh_s=0.0
    )
    tag = f"{size[0]}x{size[1]}"
    shots: dict[str, str] = {}

    def save(name: str) -> None:
        if name in names:
            shots[f"{name}-{tag}.svg"] = app.export_screenshot(title=TITLE)

    async with app.run_test(size=size) as pilot:
        await show(app, pilot, frames)
        save("main")
        table = app.query_one(ProcessTable)
        if "kill-stuck" in names:
            orphans = sum(1 for r in frames[-1].processes if r.state is KILL_STATE)
            table.move_cursor(row=_first_row(app, KILL_STATE))  # the orphans sort together
            await pilot.press(*["space"] * orphans)  # each tags a row and moves down
            await pilot.press("k")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmKill)
            save("kill-stuck")
            await pilot.press("escape")
            await pilot.pause()
        if "gpu-detail" in names:
            # The table's first active row uses the most memory: the training job's.
            table.move_cursor(row=_first_row(app, ProcState.ACTIVE))
            await pilot.press("d")
            await pilot.pause()
            assert isinstance(app.screen, GpuDetailScreen)
            save("gpu-detail")
    return shots


def pictures(
    names: tuple[str, ...] = PICTURES,
    sizes: tuple[tuple[int, int], ...] = SIZES,
    frames: list[Snapshot] | None = None,
) -> dict[str, str]:
    """The screenshots' file names and SVG texts: the showcase box (its frames, unless given),
    drawn the same everywhere."""
    from tests.ui.showcase import showcase_frames

    frames = showcase_frames() if frames is None else frames
    shots: dict[str, str] = {}
    with fixed_terminal():
        for size in sizes:
            shots.update(asyncio.run(_shoot(frames, size, names)))
    return shots


def main(argv: list[str] | None = None) -> int:
    """Write the screenshots into the directory given (created if needed)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tests.ui.scenes DIR", file=sys.stderr)
        return 2
    out_dir = Path(args[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, svg in pictures().items():
        path = out_dir / name
        path.write_text(svg, encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
