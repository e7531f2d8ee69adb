"""What the exporter serves: the sampler's newest snapshot as handed out, and the driver's health.

The sampler's ``latest`` is its last *fresh* reading; while the driver hangs, fails or restarts,
the sampler hands out that reading again as stale (``stale_s`` set), or a reading in which the
GPUs that did not answer are NOT_RESPONDING. The exporter renders what was handed out, so the
metrics say what the dashboard says (gputop.export.metrics drops the series that are not current);
a snapshot in which no GPU answered counts as stale since the newest reading the driver gave.

The driver is *up* while it gives readings: the newest snapshot handed out is a reading (not a
stale re-send) in which the driver answered for at least one GPU (or for a box without GPUs),
and no read failed since. A call that hangs on one GPU leaves it up (that GPU's
``gputop_gpu_responding`` is 0); no reading yet, a driver that cannot be (re)opened, reads that
fail, a crashed driver process (restarting) and a driver hung on every GPU make it down.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from gputop.engine.model import GpuState, Snapshot
from gputop.engine.sampler import Sampler
from gputop.engine.sanitize import clean

NO_READING_YET = "no reading from the driver yet"


class SampleFeed:
    """The snapshots a Sampler hands out (takes its ``on_snapshot``), under ``hostname`` if given.

    ``first`` is set at the first snapshot handed out, fresh or not.
    """

    def __init__(self, sampler: Sampler, *, hostname: str | None = None) -> None:
        self._sampler = sampler
        self._hostname = hostname
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        # sampler.errors when the newest snapshot was handed out, if the driver gave it; None
        # before the first such snapshot and after one it did not give
        self._errors_at_answer: int | None = None
        self._answered_at_mono: float | None = None  # the newest reading the driver gave
        self.first = threading.Event()
        sampler.on_snapshot = self._take

    def _take(self, snapshot: Snapshot) -> None:
        if self._hostname:
            snapshot = replace(snapshot, system=replace(snapshot.system, hostname=self._hostname))
        errors = self._sampler.errors
        answered = driver_answered(snapshot)
        with self._lock:
            if answered:
                self._answered_at_mono = snapshot.taken_at_mono
            elif snapshot.stale_s is None and self._answered_at_mono is not None:
                # Every GPU NOT_RESPONDING: for the exporter, nothing newer than the last reading
                # the driver gave (gputop_sample_age_seconds keeps growing).
                age_s = max(0.0, time.monotonic() - self._answered_at_mono)
                snapshot = replace(snapshot, stale_s=age_s)
            self._latest = snapshot
            self._errors_at_answer = errors if answered else None
        self.first.set()

    @property
    def latest(self) -> Snapshot | None:
        """The newest snapshot handed out (fresh, partial or stale), None before the first."""
        with self._lock:
            return self._latest

    @property
    def errors(self) -> int:
        """Failed driver reads since the start (the sampler's count)."""
        return self._sampler.errors

    @property
    def restarts(self) -> int:
        """Times the driver process was restarted (the sampler's count)."""
        return self._sampler.restarts

    def driver_up(self) -> bool:
        """True when the newest driver read succeeded (see the module docstring)."""
        with self._lock:
            at = self._errors_at_answer
        return at is not None and self._sampler.errors <= at

    def driver_problem(self) -> str | None:
        """Why the driver is not up, in one clean line; None when it is.

        The driver process's own note (a crash, a call not answering) first, then the newest
        failed read, then what the GPUs say.
        """
        if self.driver_up():
            return None
        latest = self.latest
        why = latest.driver_note if latest is not None else None
        if why is None and self._sampler.last_error is not None:
            # The sampler writes "TypeName: message"; the message is the driver layer's own line.
            kind, sep, message = self._sampler.last_error.partition(": ")
            why = message if sep and kind.isidentifier() else self._sampler.last_error
        if why is None and latest is not None:
            why = next((g.error for g in latest.gpus if g.error), None)
        return clean(why or NO_READING_YET)


def driver_answered(snapshot: Snapshot) -> bool:
    """True when ``snapshot`` is a reading the driver gave: not a stale re-send, and not one in
    which every GPU is NOT_RESPONDING (hung, or its driver process crashed) or kept from before
    a crash."""
    if snapshot.stale_s is not None:
        return False
    # A GPU's reading kept from before a driver crash (stale_s set) is not an answer either.
    return not snapshot.gpus or any(
        g.state is not GpuState.NOT_RESPONDING and g.stale_s is None for g in snapshot.gpus
    )
