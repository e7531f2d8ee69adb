"""Units to text and readings to levels, as tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gputop import units as fmt
from gputop.units import Level

MiB = 1024**2
GiB = 1024**3


@pytest.mark.parametrize(
    ("func", "value", "expected"),
    [
        (fmt.mib, 61234 * MiB, "61234MiB"),
        (fmt.mib, 61234 * MiB + MiB - 1, "61234MiB"),  # whole MiB, rounded down like nvidia-smi
        (fmt.mib, 0, "0MiB"),
        (fmt.mib_number, 81920 * MiB, "81920"),
        (fmt.gib, int(59.8 * GiB), "59.8GiB"),
        (fmt.gib, 80 * GiB, "80.0GiB"),
        (fmt.human_bytes, 512, "512B"),
        (fmt.human_bytes, 0, "0B"),
        (fmt.human_bytes, 1536, "1.5KiB"),
        (fmt.human_bytes, 1536 * MiB, "1.5GiB"),
        (fmt.human_bytes, 1023 * MiB, "1023.0MiB"),
        (fmt.human_bytes, 2 * 1024 * GiB, "2.0TiB"),
        (fmt.percent, 85, "85%"),
        (fmt.percent, 0, "0%"),
        (fmt.percent, 99.6, "100%"),
        (fmt.watts, 250_000, "250W"),
        (fmt.watts, 249_600, "250W"),
        (fmt.watts, 0, "0W"),
        (fmt.mhz, 1410, "1410MHz"),
        (fmt.temperature, 61, "61°C"),
        (fmt.temperature, -5, "-5°C"),
        (fmt.pstate, 0, "P0"),
        (fmt.pstate, 12, "P12"),
        (fmt.on_off, True, "On"),
        (fmt.on_off, False, "Off"),
        (fmt.throughput_kbps, 180_000, "175.8MiB/s"),
        (fmt.throughput_kbps, 0, "0B/s"),
        (fmt.duration, 0, "0s"),
        (fmt.duration, 45.9, "45s"),
        (fmt.duration, 60, "1m00s"),
        (fmt.duration, 725, "12m05s"),
        (fmt.duration, 3 * 3600 + 12 * 60 + 59, "3h12m"),
        (fmt.duration, 2 * 86400 + 4 * 3600, "2d04h"),
        (fmt.duration, -1, "N/A"),
        (fmt.text, "Default", "Default"),
        (fmt.text, 0, "0"),
    ],
)
def test_text(func: Callable[[Any], str], value: object, expected: str) -> None:
    assert func(value) == expected


@pytest.mark.parametrize(
    "func",
    [
        fmt.mib,
        fmt.mib_number,
        fmt.gib,
        fmt.human_bytes,
        fmt.percent,
        fmt.watts,
        fmt.mhz,
        fmt.temperature,
        fmt.pstate,
        fmt.on_off,
        fmt.throughput_kbps,
        fmt.duration,
        fmt.text,
    ],
)
def test_none_is_na(func: Callable[[Any], str]) -> None:
    assert func(None) == "N/A"


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [
        (61234 * MiB, 81920 * MiB, "61234 / 81920 MiB"),
        (None, 81920 * MiB, "N/A / 81920 MiB"),
        (None, None, "N/A / N/A MiB"),
    ],
)
def test_memory_pair(used: int | None, total: int | None, expected: str) -> None:
    assert fmt.memory_pair(used, total) == expected


@pytest.mark.parametrize(
    ("draw", "limit", "expected"),
    [
        (250_000, 400_000, "250 / 400 W"),
        (None, 400_000, "N/A / 400 W"),
        (250_000, None, "250 / N/A W"),
    ],
)
def test_power_pair(draw: int | None, limit: int | None, expected: str) -> None:
    assert fmt.power_pair(draw, limit) == expected


@pytest.mark.parametrize(
    ("used", "total", "expected"),
    [(GiB, 4 * GiB, 0.25), (0, GiB, 0.0), (None, GiB, None), (GiB, None, None), (GiB, 0, None)],
)
def test_memory_fraction(used: int | None, total: int | None, expected: float | None) -> None:
    assert fmt.memory_fraction(used, total) == expected


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
    assert fmt.temperature_level(temp, slowdown) is expected


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
    assert fmt.utilization_level(util) is expected


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
    assert fmt.memory_level(used, total) is expected


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
    assert fmt.power_level(draw, limit) is expected


def test_level_values_are_css_friendly() -> None:
    assert [level.value for level in Level] == ["ok", "warn", "hot", "crit"]
