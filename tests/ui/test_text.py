"""Bars, sparklines, clock time and the grid layout plan (unit text: tests/test_units.py)."""

from __future__ import annotations

import time

import pytest

from gputop.ui import text
from gputop.ui.widgets.gpu_grid import plan_layout
from gputop.ui.widgets.gpu_panel import Density


def test_clock_time_is_local_hh_mm_ss() -> None:
    wall = time.mktime((2026, 11, 22, 18, 54, 9, 0, 0, -1))  # local time
    assert text.clock_time(wall) == "18:54:09"
    assert text.clock_time(wall + 0.999) == "18:54:09"  # the fraction is dropped, not rounded


def test_bar_fills_in_eighths_and_marks_unknown() -> None:
    assert text.bar(1.0, 4) == "████"
    assert text.bar(0.0, 4) == "    "
    assert text.bar(0.5 + 1 / 32, 4) == "██▏ "
    assert text.bar(None, 3) == "···"
    assert len(text.bar(0.37, 11)) == 11


def test_sparkline_scales_to_top_and_keeps_gaps() -> None:
    assert text.sparkline([0, 50, 100], 3, top=100) == "▁▄█"
    assert text.sparkline([None, 100], 2, top=100) == " █"
    assert text.sparkline([1, 2, 3, 4], 2, top=4) == "▆█"  # only the last `width` values
    assert text.sparkline([5], 4, top=10) == "   ▄"


@pytest.mark.parametrize(
    ("gpus", "size", "density", "columns"),
    [
        (4, (200, 60), Density.FULL, 4),
        (8, (200, 60), Density.FULL, 4),
        (1, (80, 24), Density.FULL, 1),
        (4, (80, 24), Density.COMPACT, 1),
        (8, (80, 24), Density.MINI, 1),
        (16, (80, 24), Density.MINI, 1),
    ],
)
def test_plan_layout_leaves_room_for_processes(
    gpus: int, size: tuple[int, int], density: Density, columns: int
) -> None:
    plan = plan_layout(gpus, *size)
    assert (plan.density, plan.columns) == (density, columns)
    assert plan.height <= size[1] - 2 - 9  # header, footer, the table's minimum
