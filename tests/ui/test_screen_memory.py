"""Screens opened and closed leave nothing behind (Pilot, the objects really alive).

Four things kept closed screens alive in a dashboard left running for days: Textual's Footer
kept the keys of every rebuild (Textualize/textual#6666), a GPU detail screen stayed watched by
the app, its charts stayed subscribed to theme changes (textual-plotext), and Textual's styles
cache kept up to 1,024 widgets' rendered lines (Textualize/textual#6665). And under the
dashboard's collector thresholds the garbage of a closed screen waited for a rare full
collection. Here the collector is off, as it nearly is in the dashboard: only gputop's own
collection after a screen change may free anything.
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from textual._styles_cache import StylesCache
from textual.dom import DOMNode
from textual.pilot import Pilot
from textual.widgets._footer import FooterKey

from gputop.ui.app import GputopApp
from gputop.ui.widgets.plot import HistoryPlot
from tests.ui.data import run

ROUNDS = 6


@pytest.fixture(autouse=True)
def _collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _alive() -> Counter[str]:
    """DOM nodes and styles caches alive (without collecting first)."""
    alive: Counter[str] = Counter()
    for obj in gc.get_objects():
        if isinstance(obj, DOMNode):
            alive[type(obj).__name__] += 1
        elif isinstance(obj, StylesCache):
            alive["StylesCache"] += 1
    return alive


async def _rounds(pilot: Pilot[Any], *keys: str) -> None:
    for _ in range(ROUNDS):
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
    await pilot.pause(0.3)  # the footer's rebuild after the last key, then its clean-up


def _grown(before: Counter[str], after: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after if after[k] > before[k]}


@pytest.mark.parametrize(
    "keys",
    [("question_mark", "escape"), ("down", "down", "d", "escape"), ("down", "enter", "escape")],
    ids=["help", "gpu-detail", "process-detail"],
)
def test_closed_screens_are_gone(keys: tuple[str, ...]) -> None:
    grown: dict[str, int] = {}

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await _rounds(pilot, *keys)  # the first opening imports and caches what it needs
        before = _alive()
        await _rounds(pilot, *keys)
        grown.update(_grown(before, _alive()))

    run(body, size=(200, 60))
    # The process detail screen closed last may still be on its way out (its /proc readers).
    assert all(n <= 12 for n in grown.values()), grown
    assert not {"FooterKey", "HistoryPlot", "GpuDetailScreen", "HelpScreen"} & grown.keys(), grown


def _others(kind: type) -> set[int]:
    """What earlier tests' apps still hold (their last objects go with the next collection)."""
    gc.collect()
    return {id(o) for o in gc.get_objects() if isinstance(o, kind)}


def _mine(kind: type, others: set[int]) -> list[object]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, kind) and id(o) not in others]


def test_the_footer_keeps_only_the_keys_it_shows() -> None:
    others = _others(FooterKey)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await _rounds(pilot, "question_mark", "escape")
        shown = len(app.main_screen.query(FooterKey))
        assert len(_mine(FooterKey, others)) == shown > 0

    run(body, size=(200, 60))


def test_no_chart_outlives_its_screen() -> None:
    others = _others(HistoryPlot)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await _rounds(pilot, "down", "down", "d", "escape")
        assert not _mine(HistoryPlot, others)

    run(body, size=(200, 60))
