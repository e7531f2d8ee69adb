"""Short unit text, bars, sparklines and the grid layout plan."""

from __future__ import annotations

import pytest

from gputop.ui import text
from gputop.ui.widgets.gpu_grid import plan_layout
from gputop.ui.widgets.gpu_panel import Density

GiB = 1024**3


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "N/A"),
        (512, "512B"),
        (3 * 1024**2, "3.0M"),
        (int(61.25 * GiB), "61.2G"),
        (150 * GiB, "150G"),
    ],
)
def test_size(value: int | None, shown: str) -> None:
    assert text.size(value) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "N/A"),
        (-1, "N/A"),
        (42, "42s"),
        (60, "1m"),
        (3599, "59m"),
        (3725, "1h02m"),
        (2 * 86400 + 3 * 3600 + 59, "2d03h"),
    ],
)
def test_duration(seconds: float | None, shown: str) -> None:
    assert text.duration(seconds) == shown


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
