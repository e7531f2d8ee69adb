"""Units to text and readings to severity levels, shared by every view (pure; no colour here).

Every text function takes ``None`` (the driver does not report the field) and returns ``"N/A"``.
Sizes use binary units (1 MiB = 1024**2 bytes), as nvidia-smi does for its "MiB".
Views map :class:`Level` to colours (ANSI in ``--once``, CSS classes in the dashboard).
"""

from __future__ import annotations

from enum import StrEnum

NA = "N/A"
KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4

# Thresholds, in one place so views and the README agree.
TEMP_WARN_MARGIN_C = 15  # WARN within this many degrees of the slowdown threshold
TEMP_HOT_MARGIN_C = 5  # HOT within this many degrees; CRIT at or above it
TEMP_DEFAULT_SLOWDOWN_C = 90  # assumed when the driver does not report a slowdown threshold
UTIL_WARN_PERCENT = 50
UTIL_HOT_PERCENT = 90
MEMORY_WARN_FRACTION = 0.5
MEMORY_HOT_FRACTION = 0.8
MEMORY_CRIT_FRACTION = 0.95
POWER_WARN_FRACTION = 0.7
POWER_HOT_FRACTION = 0.9
POWER_CRIT_FRACTION = 1.0  # at the limit the GPU is being power-capped


class Level(StrEnum):
    """How worrying a reading is; views choose the colour."""

    OK = "ok"
    WARN = "warn"
    HOT = "hot"
    CRIT = "crit"


def whole_mib(value_bytes: int) -> int:
    """Bytes as whole MiB by nvidia-smi's rule, the one every view uses: the fraction is dropped.

    4466.75 MiB is 4466 everywhere (nvidia-smi divides unsigned integers). A negative amount (a
    delta) drops its fraction too, towards zero, so -0.5 MiB is 0, never -1.
    """
    whole = abs(value_bytes) // MiB
    return whole if value_bytes >= 0 else -whole


def mib(value_bytes: int | None) -> str:
    """Whole MiB with the unit, nvidia-smi style: ``"61234MiB"``."""
    return NA if value_bytes is None else f"{whole_mib(value_bytes)}MiB"


def mib_number(value_bytes: int | None) -> str:
    """Whole MiB without a unit, for "used / total" pairs: ``"61234"``."""
    return NA if value_bytes is None else str(whole_mib(value_bytes))


def gib(value_bytes: int | None, digits: int = 1) -> str:
    """GiB with ``digits`` decimals: ``"59.8GiB"``."""
    return NA if value_bytes is None else f"{value_bytes / GiB:.{digits}f}GiB"


def human_bytes(value_bytes: int | None) -> str:
    """The largest binary unit keeping the number >= 1: ``"512B"``, ``"1.5MiB"``, ``"59.8GiB"``."""
    if value_bytes is None:
        return NA
    size = abs(value_bytes)
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size >= scale:
            return f"{value_bytes / scale:.1f}{unit}"
    return f"{value_bytes}B"


def memory_pair(used_bytes: int | None, total_bytes: int | None) -> str:
    """``"61234 / 81920 MiB"``; either side may be N/A."""
    return f"{mib_number(used_bytes)} / {mib_number(total_bytes)} MiB"


def memory_fraction(used_bytes: int | None, total_bytes: int | None) -> float | None:
    """used / total, or None when either is unknown or the total is 0."""
    if used_bytes is None or not total_bytes:
        return None
    return used_bytes / total_bytes


def percent(value: float | None) -> str:
    """``"85%"`` (rounded to a whole percent)."""
    return NA if value is None else f"{round(value)}%"


def watts(value_mw: int | None) -> str:
    """Milliwatts as whole watts: ``"250W"``."""
    return NA if value_mw is None else f"{round(value_mw / 1000)}W"


def power_pair(draw_mw: int | None, limit_mw: int | None) -> str:
    """``"250 / 400 W"``; either side may be N/A."""
    draw = NA if draw_mw is None else str(round(draw_mw / 1000))
    limit = NA if limit_mw is None else str(round(limit_mw / 1000))
    return f"{draw} / {limit} W"


def mhz(value_mhz: int | None) -> str:
    """``"1410MHz"``."""
    return NA if value_mhz is None else f"{value_mhz}MHz"


def temperature(value_c: int | None, degree: str = "°") -> str:
    """``"61°C"``; ``degree=""`` gives ``"61C"`` for an output that cannot carry '°'."""
    return NA if value_c is None else f"{value_c}{degree}C"


def pstate(value: int | None) -> str:
    """Performance state 0..15 as ``"P0"``."""
    return NA if value is None else f"P{value}"


def on_off(value: bool | None) -> str:
    """``"On"``/``"Off"`` like nvidia-smi."""
    return NA if value is None else ("On" if value else "Off")


def throughput_kbps(value_kbps: int | None) -> str:
    """PCIe throughput in KB/s as NVML reports it, scaled: ``"175.8MiB/s"``."""
    return NA if value_kbps is None else human_bytes(value_kbps * KiB) + "/s"


def duration(seconds: float | None) -> str:
    """The two largest units: ``"45s"``, ``"12m05s"``, ``"3h12m"``, ``"2d04h"``."""
    if seconds is None or seconds < 0:
        return NA
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def text(value: object | None) -> str:
    """Any value as text, None as N/A (names, versions, modes)."""
    return NA if value is None else str(value)


def temperature_level(value_c: int | None, slowdown_c: int | None) -> Level:
    """Against the GPU's slowdown threshold (or 90 °C when unknown)."""
    if value_c is None:
        return Level.OK
    limit = slowdown_c if slowdown_c is not None else TEMP_DEFAULT_SLOWDOWN_C
    if value_c >= limit:
        return Level.CRIT
    if value_c >= limit - TEMP_HOT_MARGIN_C:
        return Level.HOT
    if value_c >= limit - TEMP_WARN_MARGIN_C:
        return Level.WARN
    return Level.OK


def utilization_level(value_percent: float | None) -> Level:
    """Busy is not bad: never CRIT; HOT at 90 %, WARN at 50 %."""
    if value_percent is None or value_percent < UTIL_WARN_PERCENT:
        return Level.OK
    return Level.HOT if value_percent >= UTIL_HOT_PERCENT else Level.WARN


def memory_level(used_bytes: int | None, total_bytes: int | None) -> Level:
    """By the used fraction: WARN 50 %, HOT 80 %, CRIT 95 %."""
    fraction = memory_fraction(used_bytes, total_bytes)
    if fraction is None:
        return Level.OK
    return _level(fraction, MEMORY_WARN_FRACTION, MEMORY_HOT_FRACTION, MEMORY_CRIT_FRACTION)


def power_level(draw_mw: int | None, limit_mw: int | None) -> Level:
    """By draw / limit: WARN 70 %, HOT 90 %, CRIT at the limit."""
    if draw_mw is None or not limit_mw:
        return Level.OK
    return _level(draw_mw / limit_mw, POWER_WARN_FRACTION, POWER_HOT_FRACTION, POWER_CRIT_FRACTION)


def _level(value: float, warn: float, hot: float, crit: float) -> Level:
    if value >= crit:
        return Level.CRIT
    if value >= hot:
        return Level.HOT
    if value >= warn:
        return Level.WARN
    return Level.OK
