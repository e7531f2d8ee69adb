"""The history charts' y axis: data that does not vary gets a range from 0, never below it.

plotext alone puts all-zero data in the middle of -1..1, so an idle GPU's PCIe chart (and any
chart of a non-negative quantity that stays at 0) had negative tick labels.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from gputop.ui.app import GputopApp
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.gpu_detail import CHARTS, GpuDetailScreen
from gputop.ui.widgets.plot import HistoryPlot, flat_range
from tests.fakes import make_gpu, make_snapshot
from tests.ui.data import run

_TICK = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*┤", re.MULTILINE)  # a y-axis label: "-0.33┤"


def y_ticks(plot: HistoryPlot) -> list[float]:
    """The y-axis tick labels of the chart as it renders now, top to bottom."""
    rendered = plot.render()
    text = rendered.plain if hasattr(rendered, "plain") else str(rendered)
    return [float(label) for label in _TICK.findall(text)]


class _OneChart(App[None]):
    def __init__(self, title: str, unit: str) -> None:
        super().__init__()
        self.plot = HistoryPlot(title, unit, id="chart")

    def compose(self) -> ComposeResult:
        yield self.plot


def chart_ticks(series: dict[str, list[float | None]], top: float | None = None) -> list[float]:
    """Draw ``series`` on the PCIe chart (as the GPU detail screen builds it) and read its y
    tick labels."""
    _, title, unit, _, _ = next(c for c in CHARTS if c[0] == "pcie")
    app = _OneChart(title, unit)
    ticks: list[float] = []

    async def main() -> None:
        async with app.run_test(size=(80, 20)) as pilot:
            app.plot.set_series(series, top=top)
            await pilot.pause()
            ticks.extend(y_ticks(app.plot))

    asyncio.run(main())
    return ticks


def test_all_zero_pcie_chart_has_no_negative_tick() -> None:
    ticks = chart_ticks({"rx": [0.0] * 30, "tx": [0.0] * 30})
    assert ticks, "no y tick labels found"
    assert min(ticks) == 0, ticks
    assert all(t >= 0 for t in ticks), ticks


def test_all_zero_with_gaps_has_no_negative_tick() -> None:
    ticks = chart_ticks({"rx": [None, 0.0, None, 0.0], "tx": [None, None, 0.0, 0.0]})
    assert ticks and min(ticks) == 0, ticks


def test_constant_series_axis_starts_at_zero() -> None:
    ticks = chart_ticks({"rx": [250.0] * 10, "tx": [250.0] * 10})
    assert min(ticks) == 0, ticks
    assert max(ticks) >= 250, ticks


def test_varying_series_keeps_its_own_range() -> None:
    ticks = chart_ticks({"rx": [100.0, 300.0, 200.0], "tx": [150.0, 150.0, 150.0]})
    assert min(ticks) == 100 and max(ticks) == 300, ticks


def test_a_fixed_top_still_wins() -> None:
    ticks = chart_ticks({"rx": [0.0] * 5}, top=100.0)
    assert min(ticks) == 0 and max(ticks) == 100, ticks


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (0.0, 0.0, (0.0, 1.0)),
        (5.0, 5.0, (0.0, 10.0)),
        (-2.0, -2.0, (-4.0, 0.0)),
        (1.0, 2.0, None),
    ],
)
def test_flat_range(low: float, high: float, expected: tuple[float, float] | None) -> None:
    assert flat_range(low, high) == expected


def test_idle_gpu_detail_pcie_chart_has_no_negative_tick() -> None:
    """The real screen: a GPU whose PCIe counters read 0 on every tick."""
    idle = make_gpu(0, pcie_rx_kbps=0, pcie_tx_kbps=0)
    frames = [
        replace(make_snapshot(seq, gpus=(idle,)), taken_at_mono=1000.0 + seq) for seq in (1, 2, 3)
    ]

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        for frame in frames[1:]:
            app.post_message(SnapshotReady(frame))
            await pilot.pause()
        app.push_screen(GpuDetailScreen(0, app.history))
        await pilot.pause()
        ticks = y_ticks(app.screen.query_one("#chart-pcie", HistoryPlot))
        assert ticks and min(ticks) == 0, ticks

    run(body, size=(200, 60), first=frames[0])
