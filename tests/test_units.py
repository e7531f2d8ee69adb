"""Units to text and readings to levels, as tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gputop import units
from gputop.units import Level

MiB = 1024**2
GiB = 1024**3


@pytest.mark.parametrize(
    ("func", "value", "expected"),
    [
        (units.mib_number, 81920 * MiB, "81920"),
        (units.mib_number, 61234 * MiB + MiB - 1, "61234"),  # whole MiB, rounded down like smi
        (units.mib_number, 0, "0"),
        (units.mib_compact, 20480 * MiB, "20480M"),
        (units.mib_compact, 4466 * MiB + 3 * MiB // 4, "4466M"),
        (units.mib_grouped, 20480 * MiB, "20,480 MiB"),
        (units.mib_grouped, 1024 * MiB + MiB - 1, "1,024 MiB"),
        (units.mib_grouped, 0, "0 MiB"),
        (units.short_size, 512, "512B"),
        (units.short_size, 0, "0B"),
        (units.short_size, 1536, "1.5K"),
        (units.short_size, 3 * MiB, "3.0M"),
        (units.short_size, 1023 * MiB, "1023M"),  # no decimal from 100 on: 6 characters at most
        (units.short_size, 1536 * MiB, "1.5G"),
        (units.short_size, int(61.25 * GiB), "61.2G"),
        (units.short_size, 150 * GiB, "150G"),
        (units.short_size, 2 * 1024 * GiB, "2.0T"),
        (units.percent, 85, "85%"),
        (units.percent, 0, "0%"),
        (units.percent, 99.6, "100%"),
        (units.percent, 42.4, "42%"),
        (units.percent, 2.5, "2%"),  # half to even
        (units.percent_padded, 85, " 85 %"),
        (units.percent_padded, 5, "  5 %"),
        (units.percent_padded, 100, "100 %"),
        (units.number, 42, "42"),
        (units.number, 12.7, "13"),
        (units.number, 0.4, "0"),
        (units.watts, 250_000, "250W"),
        (units.watts, 249_600, "250W"),
        (units.watts, 0, "0W"),
        (units.watts_limit_suffix, 400_000, "/400W"),
        (units.watts_limit_suffix, 299_500, "/300W"),
        (units.mhz, 1410, "1410MHz"),
        (units.temperature, 61, "61°C"),
        (units.temperature, -5, "-5°C"),
        (units.pstate, 0, "P0"),
        (units.pstate, 12, "P12"),
        (units.rate_kbps, 0, "0MB/s"),
        (units.rate_kbps, 180_000, "175MB/s"),  # KiB/s // 1024, as dmon's rxpci
        (units.rate_kbps, 1_048_575, "1023MB/s"),
        (units.rate_kbps, 1_048_576, "1.0GB/s"),
        (units.rate_kbps, 12_345_678, "11.8GB/s"),
        (units.duration, 0, "0s"),
        (units.duration, 45.9, "45s"),
        (units.duration, 60, "1m00s"),
        (units.duration, 725, "12m05s"),
        (units.duration, 3 * 3600 + 12 * 60 + 59, "3h12m"),
        (units.duration, 2 * 86400 + 4 * 3600, "2d04h"),
        (units.duration, -1, "N/A"),
        (units.duration_coarse, 0, "0s"),
        (units.duration_coarse, 42, "42s"),
        (units.duration_coarse, 60, "1m"),
        (units.duration_coarse, 725, "12m"),
        (units.duration_coarse, 3599, "59m"),
        (units.duration_coarse, 3725, "1h02m"),
        (units.duration_coarse, 2 * 86400 + 3 * 3600 + 59, "2d03h"),
        (units.duration_coarse, -1, "N/A"),
        (units.text, "Default", "Default"),
        (units.text, 0, "0"),
    ],
)
def test_text(func: Callable[[Any], str], value: object, expected: str) -> None:
    assert func(value) == expected


@pytest.mark.parametrize(
    "func",
    [
        units.mib_number,
        units.mib_compact,
        units.mib_grouped,
        units.short_size,
        units.percent,
        units.number,
        units.watts,
        units.mhz,
        units.temperature,
        units.pstate,
        units.rate_kbps,
        units.duration,
        units.duration_coarse,
        units.text,
    ],
)
def test_none_is_na(func: Callable[[Any], str]) -> None:
    assert func(None) == "N/A"


def test_na_in_fixed_width_and_optional_texts() -> None:
    assert units.percent_padded(None) == "  N/A"  # still 5 characters
    assert units.watts_limit_suffix(None) == ""  # nothing after the draw


def test_separated_and_ascii_units() -> None:
    assert units.mhz(1593, sep=" ") == "1593 MHz"
    assert units.mhz(None, sep=" ") == "N/A"
    assert units.temperature(61, degree="") == "61C"


@pytest.mark.parametrize(
    ("used", "total", "width", "expected"),
    [
        (61234 * MiB, 81920 * MiB, 0, "61234 / 81920 MiB"),
        (None, 81920 * MiB, 0, "N/A / 81920 MiB"),
        (None, None, 0, "N/A / N/A MiB"),
        (4466 * MiB, 81920 * MiB, 5, " 4466 / 81920 MiB"),
        (None, None, 5, "  N/A /   N/A MiB"),
    ],
)
def test_mib_pair(used: int | None, total: int | None, width: int, expected: str) -> None:
    assert units.mib_pair(used, total, width) == expected


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [
        (60 * GiB, 80 * GiB, "60.0/80.0 GiB"),
        (int(61.25 * GiB), 80 * GiB, "61.2/80.0 GiB"),
        (0, 46068 * MiB, "0.0/45.0 GiB"),
        (None, 80 * GiB, "N/A/80.0G"),  # short sizes when either side is unknown
        (60 * GiB, None, "60.0G/N/A"),
        (None, None, "N/A/N/A"),
    ],
)
def test_gib_pair(used: int | None, total: int | None, expected: str) -> None:
    assert units.gib_pair(used, total) == expected


@pytest.mark.parametrize(
    ("draw", "limit", "width", "expected"),
    [
        (250_000, 400_000, 0, "250 / 400 W"),
        (None, 400_000, 0, "N/A / 400 W"),
        (250_000, None, 0, "250 / N/A W"),
        (72_400, 300_000, 3, " 72 / 300 W"),
        (None, None, 3, "N/A / N/A W"),
    ],
)
def test_power_pair(draw: int | None, limit: int | None, width: int, expected: str) -> None:
    assert units.power_pair(draw, limit, width) == expected


def test_whole_mib_drops_the_fraction_towards_zero() -> None:
    assert units.whole_mib(4466 * MiB + 3 * MiB // 4) == 4466
    assert units.whole_mib(-MiB // 2) == 0
    assert units.whole_mib(-3 * MiB - 1) == -3


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [(GiB, 4 * GiB, 0.25), (0, GiB, 0.0), (None, GiB, None), (GiB, None, None), (GiB, 0, None)],
)
def test_memory_fraction(used: int | None, total: int | None, expected: float | None) -> None:
    assert units.memory_fraction(used, total) == expected


@pytest.mark.parametrize(
    ("temp", "slowdown", "expected"),
    [
        (None, 90, Level.OK),
        (30, None, Level.OK),
        (74, 90, Level.OK),
        (75, 90, Level.WARN),
        (84, 90, Level.WARN),
        (85, 90, Level.HOT),
        (89, 90, Level.HOT),
        (90, 90, Level.CRIT),
        (101, 90, Level.CRIT),
        # the GPU's own threshold, not a fixed number
        (75, 100, Level.OK),
        (85, 100, Level.WARN),
        (70, 80, Level.WARN),
        (75, 80, Level.HOT),
        (80, 80, Level.CRIT),
        # unknown threshold: 90 °C is assumed
        (76, None, Level.WARN),
        (86, None, Level.HOT),
        (95, None, Level.CRIT),
    ],
)
def test_temperature_level(temp: int | None, slowdown: int | None, expected: Level) -> None:
    assert units.temperature_level(temp, slowdown) is expected


@pytest.mark.parametrize(
    ("util", "expected"),
    [
        (None, Level.OK),
        (0, Level.OK),
        (49, Level.OK),
        (50, Level.WARN),
        (89, Level.WARN),
        (90, Level.HOT),
        (100, Level.HOT),
    ],
)
def test_utilization_level(util: int | None, expected: Level) -> None:
    assert units.utilization_level(util) is expected


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [
        (None, 80 * GiB, Level.OK),
        (GiB, None, Level.OK),
        (GiB, 0, Level.OK),
        (39 * GiB, 80 * GiB, Level.OK),
        (40 * GiB, 80 * GiB, Level.WARN),
        (64 * GiB, 80 * GiB, Level.HOT),
        (76 * GiB, 80 * GiB, Level.CRIT),
        (80 * GiB, 80 * GiB, Level.CRIT),
    ],
)
def test_memory_level(used: int | None, total: int | None, expected: Level) -> None:
    assert units.memory_level(used, total) is expected


@pytest.mark.parametrize(
    ("draw", "limit", "expected"),
    [
        (None, 400_000, Level.OK),
        (300_000, None, Level.OK),
        (300_000, 0, Level.OK),
        (279_000, 400_000, Level.OK),
        (280_000, 400_000, Level.WARN),
        (360_000, 400_000, Level.HOT),
        (400_000, 400_000, Level.CRIT),
        (420_000, 400_000, Level.CRIT),
    ],
)
def test_power_level(draw: int | None, limit: int | None, expected: Level) -> None:
    assert units.power_level(draw, limit) is expected


def test_level_values_are_css_friendly() -> None:
    assert [level.value for level in Level] == ["ok", "warn", "hot", "crit"]
