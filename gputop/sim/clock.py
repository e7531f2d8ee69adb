"""Clocks for the simulated driver: real elapsed time, or a hand-set one for tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds since the scenario started."""

    def now(self) -> float: ...


# A driver process restarted mid-run sets this to the first one's start (time.monotonic()).
ORIGIN_MONO: float | None = None


class ElapsedClock:
    """Real time elapsed since construction, or since ``origin_mono`` (the default for --demo).

    A driver process restarted mid-run passes the first one's start so the scenario's timeline
    (its load waves, faults and lost GPUs) goes on where it was rather than starting over.
    """

    def __init__(self, origin_mono: float | None = None) -> None:
        if origin_mono is None:
            origin_mono = time.monotonic() if ORIGIN_MONO is None else ORIGIN_MONO
        self._t0 = origin_mono

    def now(self) -> float:
        return time.monotonic() - self._t0


class ManualClock:
    """A clock that only moves when told to: deterministic tests and screenshots."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start
        self._lock = threading.Lock()

    def now(self) -> float:
        with self._lock:
            return self._t

    def set(self, t: float) -> None:
        with self._lock:
            self._t = t
