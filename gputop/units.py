"""THE units module: every reading (bytes, percent, mW, MHz, °C, KB/s, seconds) turned into text,
and readings turned into severity levels; shared by every view (pure; no colour here).

N/A rule: every text function takes ``None`` (the driver does not report the field) and returns
``"N/A"``, bare: a unit is never glued to N/A (``"N/A"``, not ``"N/AW"``).
Binary units: sizes are binary (1 MiB = 1024**2 bytes, as nvidia-smi's "MiB"); whole MiB are
counted by one rule, :func:`whole_mib` (the fraction is dropped). The dashboard's one-letter
sizes (``"61.2G"``) are binary too. PCIe throughput has one rule too, :func:`pcie_mb_per_s`:
NVML's KB/s are KiB/s, and nvidia-smi's MB/s (dmon's rxpci/txpci) are whole MiB/s, the fraction
dropped; every view (dmon, the dashboard, its charts) scales by it.

Where two views need different text for one unit, the names say which style:

- ``--once`` (gpustat's layout): :func:`temperature`, :func:`percent_padded`, :func:`power_pair`,
  :func:`mib_pair`, :func:`mib_compact` (``"20480M"``), :func:`duration` (``"12m05s"``),
  :func:`text`.
- ``doctor``: :func:`mib_grouped` (``"20,480 MiB"``). ``gputop.show()`` (the API): :func:`percent`.
- the dashboard (narrow cells; the memory cell is 6 characters wide): :func:`short_size`
  (``"61.2G"``), :func:`gib_pair`, :func:`percent`, :func:`number`, :func:`watts`,
  :func:`watts_limit_suffix`, :func:`mhz`, :func:`temperature`, :func:`pstate`, :func:`rate_kbps`
  (from :func:`pcie_mb_per_s`),
  :func:`duration_coarse` (``"12m"``: a table cell changes once a minute).
- ``dmon``, ``query``, ``json`` and the exporter print numbers, not these texts: they take
  :func:`whole_mib` (dmon, query, the exporter's MiB) or the raw value (json); nvidia-smi's own
  field formats are in :mod:`gputop.commands.query_table`.

Views map :class:`Level` to colours (ANSI in ``--once``, CSS classes in the dashboard).
The engine and the simulator import this module only for the byte constants (``MiB``, ``GiB``).
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


# -- bytes -----------------------------------------------------------------------------------------


def whole_mib(value_bytes: int) -> int:
    """Bytes as whole MiB by nvidia-smi's rule, the one every view uses: the fraction is dropped.

    4466.75 MiB is 4466 everywhere (nvidia-smi divides unsigned integers). A negative amount (a
    delta) drops its fraction too, towards zero, so -0.5 MiB is 0, never -1.
    """
    whole = abs(value_bytes) // MiB
    return whole if value_bytes >= 0 else -whole


def mib_number(value_bytes: int | None) -> str:
    """Whole MiB without a unit: ``"61234"``."""
    return NA if value_bytes is None else str(whole_mib(value_bytes))


def mib_rounded(value_bytes: int | None) -> str:
    """``1300 MiB``: whole MiB, rounded (n/a when unknown); the notebook's and reports' figures."""
    return "n/a" if value_bytes is None else f"{round(value_bytes / MiB)} MiB"


def mib_signed(value_bytes: int | None) -> str:
    """``+4000 MiB``: a change in whole MiB with its sign (n/a when unknown)."""
    return "n/a" if value_bytes is None else f"{round(value_bytes / MiB):+d} MiB"


def mib_pair(used_bytes: int | None, total_bytes: int | None, width: int = 0) -> str:
    """Used and total whole MiB, each right-aligned to ``width``: ``"61234 / 81920 MiB"`` (--once).

    Either side may be N/A: ``"N/A / 81920 MiB"``.
    """
    used, total = mib_number(used_bytes), mib_number(total_bytes)
    return f"{used:>{width}} / {total:>{width}} MiB"


def mib_compact(value_bytes: int | None) -> str:
    """Whole MiB with gpustat's one-letter unit, for --once's process tokens: ``"20480M"``."""
    return NA if value_bytes is None else f"{whole_mib(value_bytes)}M"


def mib_grouped(value_bytes: int | None) -> str:
    """Whole MiB with thousands separators, for doctor: ``"20,480 MiB"``."""
    return NA if value_bytes is None else f"{whole_mib(value_bytes):,} MiB"


def short_size(value_bytes: int | None) -> str:
    """The dashboard's short size, at most 6 characters: ``"512B"``, ``"3.0M"``, ``"61.2G"``.

    The largest binary unit (K, M, G, T: KiB ... TiB) keeping the number >= 1; one decimal below
    100, none from 100 on (``"150G"``).
    """
    if value_bytes is None:
        return NA
    for suffix, factor in (("T", TiB), ("G", GiB), ("M", MiB), ("K", KiB)):
        if value_bytes >= factor:
            value = value_bytes / factor
            return f"{value:.1f}{suffix}" if value < 100 else f"{value:.0f}{suffix}"
    return f"{value_bytes}B"


def gib_pair(used_bytes: int | None, total_bytes: int | None) -> str:
    """Used and total GiB for the dashboard's memory value: ``"60.0/80.0 GiB"``.

    When either is unknown, each side as :func:`short_size`: ``"N/A/80.0G"``.
    """
    if used_bytes is None or total_bytes is None:
        return f"{short_size(used_bytes)}/{short_size(total_bytes)}"
    return f"{used_bytes / GiB:.1f}/{total_bytes / GiB:.1f} GiB"


def memory_fraction(used_bytes: int | None, total_bytes: int | None) -> float | None:
    """used / total, or None when either is unknown or the total is 0."""
    if used_bytes is None or not total_bytes:
        return None
    return used_bytes / total_bytes


# -- percent and plain numbers ---------------------------------------------------------------------


def percent(value: float | None) -> str:
    """A whole percent (rounded half to even): ``"42%"``."""
    return NA if value is None else f"{value:.0f}%"


def percent_padded(value: int | None) -> str:
    """gpustat's 5-character percent column for --once: ``" 85 %"``, ``"  N/A"``."""
    return NA.rjust(5) if value is None else f"{value:3d} %"


def number(value: float | None) -> str:
    """A whole number without its unit, where the column header names it: ``"42"``."""
    return NA if value is None else f"{value:.0f}"


# -- power, clocks, temperature, PCIe --------------------------------------------------------------


def _whole_watts(value_mw: int | None) -> str:
    return NA if value_mw is None else str(round(value_mw / 1000))


def watts(value_mw: int | None) -> str:
    """Milliwatts as whole watts: ``"250W"``."""
    return NA if value_mw is None else f"{_whole_watts(value_mw)}W"


def power_pair(draw_mw: int | None, limit_mw: int | None, width: int = 0) -> str:
    """Draw and limit in whole watts, each right-aligned to ``width``: ``"250 / 400 W"`` (--once).

    Either side may be N/A: ``"N/A / 400 W"``.
    """
    draw, limit = _whole_watts(draw_mw), _whole_watts(limit_mw)
    return f"{draw:>{width}} / {limit:>{width}} W"


def watts_limit_suffix(limit_mw: int | None) -> str:
    """The dashboard's limit after a draw: ``"/400W"``; ``""`` (not N/A) when it is unknown."""
    return "" if limit_mw is None else f"/{_whole_watts(limit_mw)}W"


def mhz(value_mhz: int | None, sep: str = "") -> str:
    """``"1410MHz"``; ``sep=" "`` gives ``"1410 MHz"``."""
    return NA if value_mhz is None else f"{value_mhz}{sep}MHz"


def temperature(value_c: int | None, degree: str = "°") -> str:
    """``"61°C"``; ``degree=""`` gives ``"61C"`` for an output that cannot carry '°'."""
    return NA if value_c is None else f"{value_c}{degree}C"


def pstate(value: int | None) -> str:
    """Performance state 0..15 as ``"P0"``."""
    return NA if value is None else f"P{value}"


def pcie_mb_per_s(value_kbps: int | None) -> int | None:
    """NVML's PCIe throughput (KB/s, which are KiB/s) as nvidia-smi's whole MB/s (MiB/s).

    The one PCIe rule: 1024, as NVML's KB and nvidia-smi's MB are binary (dmon's ``fb`` MB are
    MiB too), and the fraction is dropped, as nvidia-smi divides unsigned integers.
    """
    return None if value_kbps is None else max(value_kbps, 0) // KiB


def rate_kbps(value_kbps: int | None) -> str:
    """PCIe throughput (NVML's KB/s) for the dashboard: ``"175MB/s"``, ``"1.2GB/s"``.

    Whole MB/s by :func:`pcie_mb_per_s`; from 1024 MB/s on, GB/s (1024 MB/s) to one decimal.
    """
    mb = pcie_mb_per_s(value_kbps)
    if mb is None:
        return NA
    if mb >= KiB:
        return f"{mb / KiB:.1f}GB/s"
    return f"{mb}MB/s"


# -- time ------------------------------------------------------------------------------------------


def _split_seconds(seconds: float) -> tuple[int, int, int, int]:
    """Whole (days, hours, minutes, seconds) of a non-negative number of seconds."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return days, hours, minutes, secs


def duration(seconds: float | None) -> str:
    """The two largest units, to the second: ``"45s"``, ``"12m05s"``, ``"3h12m"``, ``"2d04h"``."""
    if seconds is None or seconds < 0:
        return NA
    days, hours, minutes, secs = _split_seconds(seconds)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def duration_coarse(seconds: float | None) -> str:
    """The dashboard's run time: whole minutes past a minute, so a cell changes once a minute.

    ``"42s"``, ``"12m"``, ``"3h04m"``, ``"2d03h"`` (:func:`duration` would say ``"12m05s"``).
    """
    if seconds is not None and 60 <= seconds < 3600:
        return f"{int(seconds) // 60}m"
    return duration(seconds)


# -- anything else ---------------------------------------------------------------------------------


def text(value: object | None) -> str:
    """Any value as text, None as N/A (names, versions, modes)."""
    return NA if value is None else str(value)


# -- levels ----------------------------------------------------------------------------------------


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
