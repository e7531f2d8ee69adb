"""Errors that end a command with one clear line and a non-zero exit code (never a traceback)."""

from __future__ import annotations


class GputopError(Exception):
    """A failure the user can act on: ``str(error)`` is the message, printed after 'gputop: '."""

    exit_code: int = 2


class DriverError(GputopError):
    """The NVIDIA driver cannot be used: not installed, version mismatch, no permission."""


class DriverMissing(DriverError):
    """No NVIDIA library on this machine at all: the only failure the dashboard meets with the demo.

    Any other driver failure (version mismatch, module not loaded, no permission) is a real
    problem on a GPU box, and the demo would hide it.
    """


class DriverTimeout(DriverError):
    """The driver did not answer within the time a one-shot command allows (a call hung)."""

    exit_code = 3


class DriverCrashed(DriverError):
    """The driver process died (a crash in libnvidia-ml, or killed) and is not back yet.

    gputop restarts it (with a backoff): a later call reads again. ``NOTE`` begins every line that
    reports such a crash (``DRIVER CRASHED (SIGSEGV in libnvidia-ml: ...)``), in a snapshot's
    ``driver_note`` too: how a reader tells a crash from a hang.
    """

    exit_code = 3
    NOTE = "DRIVER CRASHED"


class DeviceNotFound(GputopError, LookupError):
    """No GPU (or MIG device) with that NVML index, CUDA index or UUID on this machine."""


class UsageError(GputopError):
    """Bad input on the command line: unknown field, unwritable file, bad PID."""
