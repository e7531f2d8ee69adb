"""GPUTOP_PLAIN_TEXTUAL: every private-Textual path has a fallback, and the fallbacks draw the same.

The switch is read once, at import, into ``gputop.ui.paint.PLAIN_TEXTUAL``; these tests flip that
attribute. The demo scenes (tests/ui/scenes.py) are drawn twice, on the fast paths and on
Textual's own, and must give the same screenshot; the keys must work the same on both.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from rich.style import Style
from textual.pilot import Pilot
from textual.strip import Strip

from gputop.engine.model import Snapshot
from gputop.ui import paint, textual_private
from gputop.ui.app import GputopApp, make_app
from gputop.ui.paint import bare_strip as bare_strip_module
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.line import Line
from gputop.ui.widgets.gpu_panel import GpuPanel
from tests.ui.data import visible_pids
from tests.ui.scenes import demo_frames, feed, frozen_clock

SIZES = [
    pytest.param((80, 24), id="80x24"),
    pytest.param((120, 40), id="120x40"),
    pytest.param((200, 60), id="200x60"),
]


@pytest.fixture(scope="module")
def frames() -> list[Snapshot]:
    return demo_frames("demo", ticks=12)


@dataclass
class Paths:
    """How often each fast path ran while the app was drawn."""

    framed_rows: int = 0  # FramedLines joined rows itself


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    counts = Paths()
    paint_rows = FramedLines._paint_rows

    def counting_paint_rows(self: FramedLines, *args: Any) -> None:
        counts.framed_rows += 1
        paint_rows(self, *args)

    monkeypatch.setattr(FramedLines, "_paint_rows", counting_paint_rows)
    return counts


def is_bare(strip: Strip) -> bool:
    return strip._divide_cache is textual_private._KEEP_NOTHING  # type: ignore[attr-defined]


def draw(
    frames: list[Snapshot],
    size: tuple[int, int],
    plain: bool,
    monkeypatch: pytest.MonkeyPatch,
    then: Callable[[GputopApp, Pilot[Any]], Awaitable[None]] | None = None,
) -> GputopApp:
    """Feed the demo frames to a headless app (fast paths, or Textual's with ``plain``)."""
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", plain)
    app = make_app(None, start_sampler=False, clock=lambda: frozen_clock(frames))

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await feed(app, pilot, frames)
            if then is not None:
                await then(app, pilot)

    asyncio.run(main())
    return app


def screenshot(app: GputopApp) -> str:
    return app.export_screenshot(title="gputop")


@pytest.mark.parametrize("size", SIZES)
def test_the_demo_looks_the_same_on_textuals_own_paths(
    frames: list[Snapshot],
    size: tuple[int, int],
    paths: Paths,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shots: dict[bool, str] = {}
    strips: dict[bool, Strip] = {}

    def look(plain: bool) -> Callable[[GputopApp, Pilot[Any]], Awaitable[None]]:
        async def take(app: GputopApp, pilot: Pilot[Any]) -> None:
            shots[plain] = screenshot(app)
            strips[plain] = app.query(GpuPanel).first().render_line(0)  # a Line's strip

        return take

    for plain in (False, True):
        paths.framed_rows = 0
        draw(frames, size, plain, monkeypatch, look(plain))
        if plain:  # nothing of ours painted or built a bare strip
            assert paths.framed_rows == 0
            assert not is_bare(strips[plain])
        else:  # the fast paths really ran (else this compares Textual with itself)
            assert paths.framed_rows > 0
            assert is_bare(strips[plain]) == bare_strip_module.SUPPORTED
    assert shots[True] == shots[False]


Step = tuple[tuple[str, ...], object, list[int], str]


def sort_and_filter(seen: list[Step]) -> Callable[[GputopApp, Pilot[Any]], Awaitable[None]]:
    """Press sort, reverse and filter keys; record the sort, the rows and the screen after each."""

    async def press(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen.append(((), app.main_screen.table.view.sort, visible_pids(app), screenshot(app)))
        for keys in (("s",), ("less_than_sign",), ("r",), ("slash", *"alice", "enter")):
            await pilot.press(*keys)
            await pilot.pause()
            seen.append((keys, app.main_screen.table.view.sort, visible_pids(app), screenshot(app)))
        await pilot.press("escape")
        await pilot.pause()
        seen.append(
            (("escape",), app.main_screen.table.view.sort, visible_pids(app), screenshot(app))
        )

    return press


def test_keys_work_the_same_on_textuals_own_paths(
    frames: list[Snapshot], paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast: list[Step] = []
    plain: list[Step] = []
    draw(frames, (80, 24), False, monkeypatch, sort_and_filter(fast))
    paths.framed_rows = 0
    draw(frames, (80, 24), True, monkeypatch, sort_and_filter(plain))
    assert paths.framed_rows == 0
    sorts = [sort for _, sort, _, _ in plain]
    orders = [pids for _, _, pids, _ in plain]
    assert sorts[1] != sorts[0] and sorts[2] == sorts[0]  # s, then < back
    assert orders[3] == orders[2][::-1]  # r reversed the rows
    assert 0 < len(orders[4]) < len(orders[3]) == len(orders[5])  # filter, then Esc
    for mine, theirs in zip(fast, plain, strict=True):
        assert mine[:3] == theirs[:3]
        assert mine[3] == theirs[3], f"the screens differ after {mine[0]}"


def test_bare_strip_and_line_build_ordinary_strips_with_the_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = Style(color="#ffffff")
    short, long = Line("GPU ").append("98%"), Line("a long line")  # padded; cut with an ellipsis
    supported = bare_strip_module.SUPPORTED
    assert is_bare(short.to_strip(10, base)) == is_bare(long.to_strip(4, base)) == supported
    fast = [short.to_strip(10, base), long.to_strip(4, base)]
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", True)
    plain = [short.to_strip(10, base), long.to_strip(4, base)]
    assert not any(is_bare(strip) for strip in plain)
    assert [list(s) for s in plain] == [list(s) for s in fast]
    assert [s.text for s in plain] == ["GPU 98%   ", "a l…"]


@pytest.mark.parametrize(
    ("value", "plain"),
    [(None, False), ("", False), ("0", False), ("1", True), ("yes", True)],
)
def test_the_switch_reads_the_environment(value: str | None, plain: bool) -> None:
    assert paint.plain_requested(value) is plain


def test_the_switch_is_read_at_import() -> None:
    env = {k: v for k, v in os.environ.items() if k != paint.PLAIN_TEXTUAL_ENV}
    code = "from gputop.ui import paint; print(paint.PLAIN_TEXTUAL)"
    for value, shown in ((None, "False"), ("1", "True")):
        run_env = env if value is None else {**env, paint.PLAIN_TEXTUAL_ENV: value}
        out = subprocess.run(
            [sys.executable, "-c", code],
            env=run_env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        assert out.stdout.strip() == shown
