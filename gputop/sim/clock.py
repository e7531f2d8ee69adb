"""Clocks for the simulated driver: real elapsed time, or a hand-set one for tests."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """Seconds since the scenario started."""

    def now(self) -> float: ...


class ElapsedClock:
    """Real time elapsed since construction (the default for --demo)."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

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
