"""Units to short text for the dashboard's narrow cells (None -> "N/A"), and threshold levels.

The dashboard needs tighter text than the one-shot views (a 6-character memory cell, bars,
sparklines), so it keeps these few helpers; levels (thresholds) come from gputop.units.
Bars and sparklines use ASCII (``#``, `` _.:-=+*#``) where Textual's output (stderr) cannot
carry Unicode; the driver turns any other character into an ASCII stand-in.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

from gputop import glyphs

NA = "N/A"
GLYPHS = glyphs.for_stream(sys.__stderr__)  # where Textual writes; tests may replace it


def size(value_bytes: int | None) -> str:
    """Bytes as a short binary size: 512M, 61.2G, 1.5T."""
    if value_bytes is None:
        return NA
    units = (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024))
    for suffix, factor in units:
        if value_bytes >= factor:
            value = value_bytes / factor
            return f"{value:.1f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return f"{value_bytes}B"


def used_total(used_bytes: int | None, total_bytes: int | None) -> str:
    """'60.0/80.0 GiB' when both are known, else what is known."""
    if used_bytes is None or total_bytes is None:
        return f"{size(used_bytes)}/{size(total_bytes)}"
    gib = 1024**3
    return f"{used_bytes / gib:.1f}/{total_bytes / gib:.1f} GiB"


def percent(value: float | None) -> str:
    """'42%' or N/A."""
    return NA if value is None else f"{value:.0f}%"


def watts(power_mw: int | None) -> str:
    """Milliwatts as whole watts, without the unit."""
    return NA if power_mw is None else f"{power_mw / 1000:.0f}"


def watts_unit(power_mw: int | None) -> str:
    """'240W' or N/A (no unit glued to N/A)."""
    return NA if power_mw is None else f"{power_mw / 1000:.0f}W"


def limit_suffix(limit_mw: int | None) -> str:
    """'/300W' after a draw, or '' when the limit is unknown."""
    return "" if limit_mw is None else f"/{limit_mw / 1000:.0f}W"


def number(value: float | None, unit: str = "") -> str:
    """A whole number with an optional unit, or N/A."""
    return NA if value is None else f"{value:.0f}{unit}"


def rate_kbps(value_kbps: int | None) -> str:
    """PCIe throughput (KB/s) as MB/s or GB/s."""
    if value_kbps is None:
        return NA
    if value_kbps >= 1_000_000:
        return f"{value_kbps / 1_000_000:.1f}GB/s"
    return f"{value_kbps / 1000:.0f}MB/s"


def duration(seconds: float | None) -> str:
    """Run time at minute resolution past a minute (so a table cell changes once a minute).

    42s, 12m, 3h04m, 2d03h.
    """
    if seconds is None or seconds < 0:
        return NA
    s = int(seconds)
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m" if minutes else f"{s}s"


def clock_time(wall_s: float) -> str:
    """Local HH:MM:SS of a time.time() value."""
    return time.strftime("%H:%M:%S", time.localtime(wall_s))


def bar(fraction: float | None, width: int) -> str:
    """A horizontal bar of ``width`` cells with eighth-block resolution ('' when unknown)."""
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
