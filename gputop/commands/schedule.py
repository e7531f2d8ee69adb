"""A sampling loop on a fixed schedule, shared by ``gputop query -l`` and ``gputop dmon``.

Sample k is due at ``start + k * interval``: the time a sample takes does not push the next one
later, so a long log keeps its cadence (``nvidia-smi -l`` sleeps after the work and drifts).

:class:`Rows` is what a loop reads its rows with: each reading waits at most until its row must be
printed (a GPU that did not answer by then is NOT_RESPONDING in that row), the first one too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from gputop.engine.deadline import Readings, not_responding, row_timeout, timeout_message
from gputop.engine.model import GpuSample, GpuState, Snapshot
from gputop.engine.source import Source
from gputop.errors import DriverTimeout
from gputop.exits import say


def run_on_schedule(
    tick: Callable[[int], None],
    *,
    interval_s: float | None,
    count: int | None,
    start: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Call ``tick(k)`` for k = 0, 1, ... on schedule; return how many ticks ran.

    ``interval_s=None`` runs once (or ``count`` times back to back). ``count=None`` with an
    interval runs until interrupted. ``start`` (a ``clock()`` time, default now) anchors the
    schedule, e.g. at when a first reading taken beforehand began; a ``start`` in the future, or
    more than one interval back (a first reading that took long), is taken as now. A tick that
    overruns skips the slots it missed instead of bursting to catch up.
    """
    if interval_s is None:
        total = count if count is not None else 1
        for k in range(total):
            tick(k)
        return total
    now = clock()
    if start is None or not now - interval_s <= start <= now:
        start = now
    slot = 0
    done = 0
    while count is None or done < count:
        tick(done)
        done += 1
        if count is not None and done >= count:
            break
        now = clock()
        slot = max(slot + 1, int((now - start) / interval_s) + 1)
        delay = start + slot * interval_s - now
        if delay > 0:
            sleep(delay)
    return done


class Rows:
    """The readings of a logging loop (``query -l``, ``dmon``), one per row, each in its time.

    A row waits for its reading at most ``row_timeout(interval_s, timeout_s)``; the first row's
    driver gets ``timeout_s`` to start. Each GPU of a reading is new or NOT_RESPONDING (see
    gputop.engine.deadline.Readings). When a row had a NOT_RESPONDING GPU among those shown,
    :meth:`finish` says which call hung, once, on stderr, and gives 3 for a finite run.
    """

    def __init__(
        self,
        source: Source,
        *,
        interval_s: float | None,
        timeout_s: float,
        count: int | None,
    ) -> None:
        self.readings = Readings(source)
        self.timeout_s = timeout_s
        self.row_timeout_s = row_timeout(interval_s, timeout_s)
        self.endless = interval_s is not None and count is None
        self.silent_rows = 0  # rows printed with a GPU NOT_RESPONDING
        self._message: str | None = None  # what the last of them said did not answer
        self._asked_wall = time.time()

    def first(self) -> Snapshot:
        """The first row's reading (DriverTimeout when the driver gives nothing at all)."""
        self._asked_wall = time.time()
        return self.readings.first(self.timeout_s, self.row_timeout_s)

    def next(self) -> Snapshot:
        """The next row's reading."""
        self._asked_wall = time.time()
        return self.readings.read(self.row_timeout_s)

    def wall_of(self, snapshot: Snapshot, gpu: GpuSample) -> float:
        """The time a GPU's row shows: its reading's, or for a GPU that gave none, when this row
        asked (a driver stuck since rows ago must not stamp every row with the same old time)."""
        if gpu.state is GpuState.NOT_RESPONDING:
            return max(snapshot.taken_at_wall, self._asked_wall)
        return snapshot.taken_at_wall

    def stamped(self, snapshot: Snapshot, gpu: GpuSample) -> Snapshot:
        """``snapshot`` as the row of ``gpu`` shows it (its time: :meth:`wall_of`)."""
        wall = self.wall_of(snapshot, gpu)
        return snapshot if wall == snapshot.taken_at_wall else replace(snapshot, taken_at_wall=wall)

    def shown(self, snapshot: Snapshot, indices: Sequence[int]) -> None:
        """Note the row just printed for these GPUs (what did not answer is said by finish)."""
        gpus = tuple(g for i in indices if (g := snapshot.gpu(i)) is not None)
        silent = not_responding(replace(snapshot, gpus=gpus))
        if silent:
            self.silent_rows += 1
            self._message = timeout_message(replace(snapshot, gpus=silent))

    def finish(self) -> int:
        """After the last row: if a GPU did not answer, say once on stderr which call hung (as
        the last such row saw it: by then the driver process has named the call). Returns 3
        for a finite run that printed such a row, else 0 (an endless loop ends by a signal,
        whose exit code the command line sets)."""
        if self._message is not None:
            say(self._message)
        return DriverTimeout.exit_code if self.silent_rows and not self.endless else 0
