"""Readings with a deadline: the one reader the sampler, the one-shots and the loops use.

Two layers, each with one job:

- a source that can answer with part of a reading (``Source.partial_readings``: the driver
  process, gputop.engine.isolated.IsolatedSource) does so in ``snapshot_within(timeout_s)``: the
  GPUs that answered, and for each that did not a GpuSample in state NOT_RESPONDING (``stale_s``:
  how long it was waited for), with ``Snapshot.driver_note`` naming the call that hung;
- :class:`Readings` here is the one caller-side reader: it calls ``snapshot_within`` on such a
  source, and reads any other source (read in the caller's process) on a daemon thread; if that
  does not return in time there is nothing to show, so DriverTimeout (or, in a loop that has
  seen the GPUs before, every GPU NOT_RESPONDING).

The sampler (gputop.engine.sampler), the one-shots (--once, --json, query, doctor, export) and the
loops (dmon, query -l) all read through :class:`Readings` (or :func:`read_within`); nothing else
starts a reading thread with a time limit. A loop gets one reading per row, each within its own
time limit, and never the same GPU reading twice (a driver stuck on GPU 3 answers the next rows
with the very reading it began rows ago: the GPUs of it already shown are NOT_RESPONDING there).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from gputop.engine.model import GpuSample, GpuState, PidMemory, Snapshot, silent_gpu
from gputop.engine.source import Source
from gputop.errors import DriverCrashed, DriverTimeout

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 5.0  # one-shots: long enough for a slow but healthy 8-GPU box
ROW_SHARE = 0.9  # a loop's row waits for its reading at most this share of the interval ...
MIN_ROW_WAIT_S = 0.5  # ... but never less than this: a healthy driver must be able to answer
TICK_SHARE = 0.8  # a monitor's tick (the sampler's) waits at most this share of the interval ...


def row_timeout(interval_s: float | None, timeout_s: float) -> float:
    """How long one row of a loop waits for its reading: until it must be printed, at most.

    ``min(timeout, max(0.9 * interval, 0.5))``; without an interval (back-to-back samples) the
    whole ``timeout_s``. Below an interval of about 0.56 s a hung driver slows the rows down to
    one per 0.5 s: a shorter wait would call a healthy but slow driver NOT RESPONDING.
    """
    if interval_s is None:
        return timeout_s
    return min(timeout_s, max(ROW_SHARE * interval_s, MIN_ROW_WAIT_S))


def tick_wait(interval_s: float) -> float:
    """How long a monitor's tick waits for its reading before it shows the last one stale.

    ``max(0.8 * interval, 0.5)``, the floor the loops' rows have: at ``--interval 0.1`` a wait of
    80 ms called healthy GPUs NOT RESPONDING whenever a reading through the driver process took
    longer. Below an interval of 0.625 s a hung driver slows the ticks to one per 0.5 s.
    """
    return max(TICK_SHARE * interval_s, MIN_ROW_WAIT_S)


def read_within(source: Source, timeout_s: float) -> Snapshot:
    """A snapshot within ``timeout_s`` seconds (partial, with NOT_RESPONDING GPUs, if need be).

    Raises DriverTimeout when nothing at all came back in time (the driver hung before it could
    even list its GPUs, or a source that cannot report part of a reading).
    """
    return Readings(source).read(timeout_s)


def not_responding(snapshot: Snapshot) -> tuple[GpuSample, ...]:
    """The GPUs of ``snapshot`` that did not answer in time."""
    return tuple(g for g in snapshot.gpus if g.state is GpuState.NOT_RESPONDING)


def timeout_message(snapshot: Snapshot) -> str | None:
    """One line for stderr when some GPU did not answer, else None.

    e.g. ``GPU 3 NOT RESPONDING: nvmlDeviceGetPowerUsage (GPU 3) did not return within 5 s``.
    """
    silent = not_responding(snapshot)
    if not silent:
        return None
    why = snapshot.driver_note or "the driver did not answer in time"
    return f"{gpu_indices(g.index for g in silent)} NOT RESPONDING: {why}"


def gpu_indices(indices: Iterable[int]) -> str:
    """``GPU 1``, or ``GPUs 1, 3``: GPUs named in a line."""
    listed = [str(i) for i in indices]
    return ("GPU " if len(listed) == 1 else "GPUs ") + ", ".join(listed)


def not_open_within(source: Source, timeout_s: float) -> str | None:
    """Wait up to ``timeout_s`` for the driver to open: None when it has (or the source has no
    driver process to wait for); else why not, in one line, while it is still opening (a hung
    nvmlInit) or after its process crashed opening it (it is restarted, as after any crash).
    Raises the driver's own one-line error when it cannot be used (DriverMissing, DriverError,
    UsageError)."""
    try:
        if source.wait_ready(timeout_s):
            return None  # (an in-process driver opened, or raised, when it was made)
    except DriverCrashed:
        pass
    return source.driver_note or f"the NVIDIA driver did not open within {_seconds(timeout_s)}"


def pid_memory_within(source: Source, pids: Iterable[int], timeout_s: float) -> PidMemory:
    """``source.pid_memory(pids)`` within ``timeout_s`` seconds, else DriverTimeout.

    The light read has no partial answer: it runs on a daemon thread, which a hung driver keeps
    (one per call that timed out) until the driver returns or is restarted.
    """
    wanted = tuple(pids)
    return _Pending.start(lambda: source.pid_memory(wanted), time.monotonic()).wait(timeout_s)


@dataclass(eq=False)
class _Pending(Generic[T]):
    """One call to a source running on a daemon thread (a source without partial readings)."""

    started: float
    done: threading.Event = field(default_factory=threading.Event)
    result: T | None = None
    failure: BaseException | None = None

    @classmethod
    def start(cls, call: Callable[[], T], started: float) -> _Pending[T]:
        """Run ``call`` on a daemon thread of its own: a hung driver call keeps only that."""
        pending: _Pending[T] = cls(started=started)

        def run() -> None:
            try:
                pending.result = call()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the reader's thread
                pending.failure = exc
            finally:
                pending.done.set()

        threading.Thread(target=run, name="gputop-deadline", daemon=True).start()
        return pending

    def wait(self, timeout_s: float) -> T:
        """The call's result within ``timeout_s`` (its error raised here), else DriverTimeout."""
        self.done.wait(timeout_s)
        if not self.done.is_set():
            raise DriverTimeout(f"the NVIDIA driver did not answer within {_seconds(timeout_s)}")
        if self.failure is not None:
            raise self.failure
        assert self.result is not None
        return self.result


class Readings:
    """Readings of one source, each within a time limit, no GPU reading handed out twice.

    ``read(timeout_s)`` returns a snapshot in which every GPU is either a reading not returned
    before or NOT_RESPONDING. It raises DriverTimeout only while nothing is known about the GPUs
    (no reading yet); afterwards a source that gave nothing in time gives a snapshot of its
    known GPUs, all NOT_RESPONDING. Errors other than a timeout are raised as they come.

    ``hold_last`` (the sampler, which re-sends its last reading while a source that cannot
    report part of a reading is silent): such a source's timeout is DriverTimeout every time,
    and its reading that finished after its wait is handed out by the next ``read``.
    """

    def __init__(
        self,
        source: Source,
        *,
        clock: Callable[[], float] = time.monotonic,
        hold_last: bool = False,
    ) -> None:
        self.source = source
        self._clock = clock
        self._hold_last = hold_last
        self._pending: _Pending[Snapshot] | None = None
        self._known: Snapshot | None = None  # the last snapshot handed out: the GPUs' identities
        # (seq, GPU indices handed out from it) of the last partial reading handed out
        self._partial: tuple[int, frozenset[int]] | None = None

    def first(self, open_timeout_s: float, row_timeout_s: float) -> Snapshot:
        """A loop's first reading: the driver gets ``open_timeout_s`` to start (a driver process
        spawns and opens NVML first), the reading itself ``row_timeout_s``.

        A source that cannot report part of a reading gets the whole ``open_timeout_s``: before
        its first reading nothing about its GPUs is known, so there is nothing to print instead.
        """
        if not self.source.partial_readings:
            return self.read(open_timeout_s)
        if not self.source.wait_ready(open_timeout_s):
            note = self.source.driver_note
            detail = f" ({note})" if note else ""
            raise DriverTimeout(
                f"the NVIDIA driver did not answer within {_seconds(open_timeout_s)}{detail}"
            )
        return self.read(row_timeout_s)

    def read(self, timeout_s: float) -> Snapshot:
        """The next reading within ``timeout_s`` (see the class docstring)."""
        started, started_wall = self._clock(), time.time()
        try:
            snapshot = self._fetch(timeout_s)
        except DriverTimeout as exc:
            known = self._known
            if known is None or self._hold_last:
                raise
            pending = self._pending
            waited = self._clock() - (pending.started if pending is not None else started)
            note = str(exc)
            snapshot = Snapshot(
                seq=known.seq,
                taken_at_wall=started_wall,
                taken_at_mono=started,
                system=known.system,
                gpus=tuple(silent_gpu(g, error=note, stale_s=waited) for g in known.gpus),
                driver_note=note,
                sampler_restarts=known.sampler_restarts,
            )
        snapshot = self._not_twice(snapshot)
        self._known = snapshot
        return snapshot

    def _fetch(self, timeout_s: float) -> Snapshot:
        if self.source.partial_readings:
            return self.source.snapshot_within(timeout_s)
        pending = self._pending
        if pending is None or (pending.done.is_set() and not self._hold_last):
            # Nothing in flight, or a reading that came in after its row was printed: it is old
            # by now (the driver process's source does the same), so read anew.
            pending = self._pending = _Pending.start(self.source.snapshot, self._clock())
        try:
            snapshot = pending.wait(timeout_s)
        except DriverTimeout:
            raise  # still in flight: kept for the next read
        except BaseException:
            self._pending = None  # the source's own error, raised once: the next read is anew
            raise
        self._pending = None
        return snapshot

    def _not_twice(self, snapshot: Snapshot) -> Snapshot:
        """GPUs whose reading from this very driver reading was handed out before become
        NOT_RESPONDING (there is no new reading of them); remembers what is handed out now."""
        previous = self._partial
        if previous is not None and previous[0] == snapshot.seq:
            shown = previous[1]
            silent = not_responding(snapshot)
            waited = max((g.stale_s for g in silent if g.stale_s is not None), default=None)
            why = f"no new reading: {snapshot.driver_note or 'the driver is busy'}"
            gpus = tuple(
                silent_gpu(g, error=why, stale_s=waited)
                if g.index in shown and g.state is not GpuState.NOT_RESPONDING
                else g
                for g in snapshot.gpus
            )
            if gpus != snapshot.gpus:
                snapshot = replace(snapshot, gpus=gpus)
        else:
            shown = frozenset()
        if not_responding(snapshot):
            answered = {g.index for g in snapshot.gpus if g.state is not GpuState.NOT_RESPONDING}
            self._partial = (snapshot.seq, shown | answered)
        else:
            self._partial = None
        return snapshot


def _seconds(value: float) -> str:
    return f"{value:g} s"
