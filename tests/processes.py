"""Waiting for real processes to end, as the tests of gputop's own processes need."""

from __future__ import annotations

import time

import psutil


def gone(pid: int) -> bool:
    """The process has exited (a zombie whose parent has not collected it yet counts)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def gone_within(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for the process to exit; True if it has."""
    end = time.monotonic() + seconds
    while not gone(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True
