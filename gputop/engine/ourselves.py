"""gputop's own processes: never listed as GPU users, never offered to kill.

The driver process (gputop.engine.isolated) opens /dev/nvidia* like any CUDA program; without
this it would show up as a process that holds the GPU and does no work.
"""

from __future__ import annotations

import os

_helpers: set[int] = set()


def add_helper(pid: int) -> None:
    """Count ``pid`` (a process gputop started) as gputop itself."""
    _helpers.add(pid)


def drop_helper(pid: int) -> None:
    """Forget a helper process that has ended (its PID may be reused)."""
    _helpers.discard(pid)


def is_ourselves(pid: int) -> bool:
    """True for this process and the helper processes it started."""
    return pid == os.getpid() or pid in _helpers
