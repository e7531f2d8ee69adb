"""argparse value types shared by the commands."""

from __future__ import annotations

import argparse


def positive_float(text: str) -> float:
    """A number greater than 0 (seconds, milliseconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text!r}")
    return value
