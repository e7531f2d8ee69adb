"""Reads the fleet every interval on a daemon thread, so a slow or dead Prometheus never blocks
the keyboard: the UI only looks at the newest result (and how old it is)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gputop.errors import GputopError
from gputop.fleet.model import Fleet


@dataclass(frozen=True, slots=True)
class PollState:
    """The newest fleet, when it was read, and the last read's error (None: it worked)."""

    fleet: Fleet | None
    read_mono: float | None  # time.monotonic() of the newest good read
    error: str | None
    reading_since_mono: float | None  # a read under way since then (None: idle)


class FleetPoller:
    """Calls ``read`` every ``interval_s`` (first at once) on a daemon thread.

    ``on_change`` runs on that thread after every read, good or bad: the app hands it to its
    own thread (``call_from_thread``). Errors are kept as their one-line message.
    """

    def __init__(
        self,
        read: Callable[[], Fleet],
        *,
        interval_s: float,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read
        self.interval_s = interval_s
        self.on_change = on_change
        self._clock = clock
        self._lock = threading.Lock()
        self._state = PollState(fleet=None, read_mono=None, error=None, reading_since_mono=None)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gputop-fleet", daemon=True)

    @property
    def state(self) -> PollState:
        with self._lock:
            return self._state

    def start(self) -> None:
        """Start reading (once: a second call does nothing)."""
        if self._thread.ident is None:
            self._thread.start()

    def refresh(self) -> None:
        """Read again now (the next read starts at once if none is under way)."""
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _set(self, **changes: Any) -> None:
        with self._lock:
            self._state = replace(self._state, **changes)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._set(reading_since_mono=self._clock())
            try:
                fleet = self._read()
            except GputopError as exc:
                self._set(error=str(exc), reading_since_mono=None)
            except Exception as exc:  # noqa: BLE001 - the overview stays up, and says why
                self._set(error=f"{type(exc).__name__}: {exc}", reading_since_mono=None)
            else:
                self._set(fleet=fleet, read_mono=self._clock(), error=None, reading_since_mono=None)
            if self._stop.is_set():
                return
            self.on_change()
            self._wake.wait(self.interval_s)
            self._wake.clear()


def stale_s(state: PollState, now_mono: float, interval_s: float) -> float | None:
    """How old the shown fleet is when it counts as stale, else None.

    Stale: the last read failed, or no read has worked for two intervals and a second (a slow
    Prometheus). Before the first good read nothing is shown, so nothing is stale.
    """
    if state.read_mono is None:
        return None
    age = max(0.0, now_mono - state.read_mono)
    if state.error is not None or age > 2 * interval_s + 1:
        return age
    return None
