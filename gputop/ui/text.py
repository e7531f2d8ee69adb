"""The dashboard's text that is not a unit: bars, sparklines, clock time, and the glyph choice.

Units (bytes, percent, watts, MHz, °C, KB/s, durations) are turned into text by gputop.units,
for the dashboard as for every other view. Here: :func:`bar`, :func:`spark_char`,
:func:`sparkline`, :func:`clock_time`, and :data:`GLYPHS`, the glyph set chosen for Textual's
output (stderr): bars and sparklines use ASCII (``#``, `` _.:-=+*#``) where it cannot carry
Unicode; the driver turns any other character into an ASCII stand-in.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from gputop import glyphs

GLYPHS = glyphs.for_stream(sys.__stderr__)  # where Textual writes; tests may replace it


def clock_time(wall_s: float) -> str:
    """Local HH:MM:SS of a time.time() value."""
    return time.strftime("%H:%M:%S", time.localtime(wall_s))


def bar(fraction: float | None, width: int) -> str:
    """A horizontal bar of ``width`` cells with eighth-block resolution (dots when unknown)."""
    if width <= 0:
        return ""
    g = GLYPHS
    if fraction is None:
        return g.dot * width
    fraction = max(0.0, min(1.0, fraction))
    if not g.bar_partials:  # whole cells only
        return (g.bar_full * round(fraction * width)).ljust(width)
    full, part = divmod(round(fraction * width * 8), 8)
    partial = g.bar_partials[part - 1] if part else ""
    return (g.bar_full * full + partial).ljust(width)


def spark_char(value: float | None, top: float) -> str:
    """One sparkline character: ``value`` as a block scaled to ``top`` (blank when unknown)."""
    if value is None or top <= 0:
        return " "
    blocks = GLYPHS.spark
    return blocks[max(1, min(8, round(value / top * 8)))] if value > 0 else blocks[1]


def sparkline(values: Sequence[float | None], width: int, top: float | None = None) -> str:
    """The last ``width`` values as block characters scaled to ``top`` (or their maximum)."""
    if width <= 0:
        return ""
    tail = values[-width:]
    known = [v for v in tail if v is not None]
    peak = top if top else (max(known) if known else 0.0)
    return "".join([spark_char(v, peak) for v in tail]).rjust(width)
