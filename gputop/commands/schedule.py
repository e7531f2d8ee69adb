"""A sampling loop on a fixed schedule, shared by ``gputop query -l`` and ``gputop dmon``.

Sample k is due at ``start + k * interval``: the time a sample takes does not push the next one
later, so a long log keeps its cadence (``nvidia-smi -l`` sleeps after the work and drifts).
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
    schedule, e.g. at when a first reading taken beforehand began. A tick that overruns skips the
    slots it missed instead of bursting to catch up.
    """
    if interval_s is None:
        total = count if count is not None else 1
        for k in range(total):
            tick(k)
        return total
    if start is None:
        start = clock()
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
