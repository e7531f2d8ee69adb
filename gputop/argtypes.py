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

# How long a one-shot command, or one row of a logging loop, waits for the driver (--timeout):
# below 0.1 s even a healthy driver could not answer; past an hour nobody is waiting any more.
MIN_TIMEOUT_S = 0.1
MAX_TIMEOUT_S = 3600.0
TIMEOUT_BOUNDS_HELP = "0.1 s to 3600 s (1 hour)"


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


def table_refresh_seconds(text: str) -> float:
    """0 (every sample) or an interval within [MIN_INTERVAL_S, MAX_INTERVAL_S]."""
    value = _number(text)
    if value != 0 and not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be 0 or from {INTERVAL_BOUNDS_HELP}: {text!r}")
    return value


def timeout_seconds(text: str) -> float:
    """A driver timeout in seconds within [MIN_TIMEOUT_S, MAX_TIMEOUT_S] (nan and inf refused)."""
    value = _number(text)
    if not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"must be from {TIMEOUT_BOUNDS_HELP}: {text!r}")
    return value


def add_timeout_argument(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *,
    default_s: float,
    then: str = "a GPU that did not answer is shown NOT RESPONDING, exit 3",
) -> None:
    """``--timeout SEC``: how long a command waits for the driver (``then``: what happens after).

    No default is stored (``argparse.SUPPRESS``): a subcommand's parser copies its attributes over
    the main parser's, so a stored default would erase ``gputop --timeout 2 doctor``'s 2. Read it
    with ``getattr(args, "timeout", default_s)``.
    """
    parser.add_argument(
        "--timeout",
        type=timeout_seconds,
        default=argparse.SUPPRESS,
        metavar="SEC",
        help=f"wait at most SEC seconds for the driver ({TIMEOUT_BOUNDS_HELP}, default "
        f"{default_s:g}); {then}",
    )


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
