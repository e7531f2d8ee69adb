"""argparse value types shared by the commands, and the bounds every interval obeys."""

from __future__ import annotations

import argparse
import math

# Every sampling or repeat interval, from the command line or the dashboard's -/+ keys, lies in
# these bounds: below 0.1 s the driver calls alone would spin a core; past a day a loop looks hung
# (and inf would never wake, or overflow the sleep).
MIN_INTERVAL_S = 0.1
MAX_INTERVAL_S = 86_400.0
INTERVAL_BOUNDS_HELP = "0.1 s to 86400 s (1 day)"


def _number(text: str) -> float:
    """A float; nan and inf pass (the callers' range checks refuse them, naming the range)."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def positive_float(text: str) -> float:
    """A finite number greater than 0."""
    value = _number(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value


def interval_seconds(text: str) -> float:
    """An interval in seconds within [MIN_INTERVAL_S, MAX_INTERVAL_S]."""
    value = _number(text)
    if not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be from {INTERVAL_BOUNDS_HELP}: {text!r}")
    return value


def interval_milliseconds(text: str) -> float:
    """An interval in milliseconds within the same bounds as :func:`interval_seconds`."""
    value = _number(text)
    if not MIN_INTERVAL_S * 1000 <= value <= MAX_INTERVAL_S * 1000:
        raise argparse.ArgumentTypeError(
            f"must be from {MIN_INTERVAL_S * 1000:.0f} ms to {MAX_INTERVAL_S * 1000:.0f} ms "
            f"(1 day): {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number > 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value
