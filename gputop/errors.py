"""Errors that end a command with one clear line and a non-zero exit code (never a traceback)."""

from __future__ import annotations


class GputopError(Exception):
    """A failure the user can act on: ``str(error)`` is the message, printed after 'gputop: '."""

    exit_code: int = 2


class DriverError(GputopError):
    """The NVIDIA driver cannot be used: not installed, version mismatch, no permission."""


class UsageError(GputopError):
    """Bad input on the command line: unknown field, unwritable file, bad PID."""
