"""The sampler: daemon threads that read the source on a schedule and hand out complete snapshots.

A daemon thread (never a Textual worker, so a call hung in the driver cannot hold the exit), the
*ticker*, asks for a reading every ``interval_s`` and waits for it at most ``0.8 * interval_s``,
never under 0.5 s (gputop.engine.deadline: tick_wait, and Readings, as the logging loops do: one
call at a time, a hung call never piles up new calls behind it). A driver process
(gputop.engine.isolated) answers in time with what it has: the GPUs that answered, fresh, and each
GPU whose call hangs NOT_RESPONDING (from the first reading on; the others keep updating while it
hangs). After a crash, until the driver process is back, the GPUs read before it keep that reading
(``stale_s`` set) and the rest are NOT_RESPONDING. Such a snapshot is emitted, enriched, like any.
A source that cannot report part of a reading, silent past the wait, gets the last good snapshot
re-sent with ``stale_s`` set to its age. So the consumer hears from the sampler on time even
when the driver hangs. A source that raises is counted (``errors``, ``last_error``) and the last
good snapshot is re-sent as stale; the thread keeps going.

The holder scan (``/dev/nvidia*`` open files) runs on the ticker, a bounded share each tick
(:class:`gputop.engine.holder_watch.HolderWatch`): every process is looked at within
``holder_interval_s`` on a small box, within a longer sweep on a large one, and new processes at
once. :meth:`Sampler.scan_holders_now` does a whole scan in the caller's thread.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from gputop.engine.changes import ListTracker
from gputop.engine.deadline import Readings, tick_wait
from gputop.engine.enrich import RowMemo
from gputop.engine.enrich import enrich as enrich_snapshot
from gputop.engine.history import HISTORY_TICKS, History
from gputop.engine.holder_watch import HolderWatch
from gputop.engine.holders import HolderScan, scan_holders
from gputop.engine.model import Snapshot, SystemInfo
from gputop.engine.procs import ProcReader
from gputop.engine.sanitize import clean
from gputop.engine.source import Source
from gputop.errors import DriverTimeout

log = logging.getLogger(__name__)


class Sampler:
    """Samples ``source`` every ``interval_s`` on its own daemon threads; see the module docstring.

    ``on_snapshot`` is called from the sampler thread with each complete snapshot (enriched with
    process rows unless ``enrich`` is False). ``history`` records fresh snapshots only: the one
    history of a run (enrich's peaks, the dashboard's sparklines and charts), read by other
    threads while this one appends (History locks both).
    """

    def __init__(
        self,
        source: Source,
        *,
        on_snapshot: Callable[[Snapshot], None] | None = None,
        interval_s: float = 1.0,
        holder_interval_s: float = 5.0,
        history_len: int = HISTORY_TICKS,
        dev_dir: str | None = None,
        enrich: bool = True,
    ) -> None:
        self.interval_s = interval_s
        self.holder_interval_s = holder_interval_s
        self.paused = False
        # A simulated box keeps its device files in a folder of its own. Unless given, asked of
        # the source each time: its driver process may still be starting, or restarted (a new
        # folder).
        self._dev_dir = dev_dir
        self.on_snapshot = on_snapshot
        self.history = History(maxlen=history_len)
        self.errors = 0
        self.last_error: str | None = None
        self._enrich = enrich
        self._source = source
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._latest: Snapshot | None = None
        self._holders: HolderScan | None = None
        # Made on first use: the source may not know its device folder yet.
        self._watch: HolderWatch | None = None
        # What changed in the driver's lists, made once a tick for the holder watch and enrich
        # (gputop.engine.changes).
        self._lists = ListTracker()
        self._asked: HolderScan | None = None  # a whole scan from scan_holders_now, not used yet
        self._holder_note_logged = False
        self._procs = ProcReader()
        self._rows = RowMemo()
        self._started_mono = time.monotonic()
        self._readings = Readings(source, hold_last=True)
        self._thread = threading.Thread(target=self._run, name="gputop-sampler", daemon=True)

    @property
    def interval_s(self) -> float:
        """Seconds between snapshots (settable while running)."""
        return self._interval_s

    @interval_s.setter
    def interval_s(self, value: float) -> None:
        if not value > 0:
            raise ValueError(f"interval must be greater than 0, not {value!r}")
        self._interval_s = float(value)

    @property
    def dev_dir(self) -> str:
        """Where the holder scan looks for the box's /dev/nvidia* files."""
        return self._source.dev_dir if self._dev_dir is None else self._dev_dir

    @dev_dir.setter
    def dev_dir(self, value: str) -> None:
        self._dev_dir = value

    @property
    def restarts(self) -> int:
        """How many times the source's driver process was restarted (0 for other sources)."""
        return self._source.restarts

    @property
    def latest(self) -> Snapshot | None:
        """The last fresh snapshot, or None before the first one."""
        with self._lock:
            return self._latest

    @property
    def holders(self) -> HolderScan | None:
        """The last holder scan, or None before the first one."""
        with self._lock:
            return self._holders

    def start(self) -> None:
        """Start sampling (the first snapshot is read at once)."""
        self._started_mono = time.monotonic()
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop sampling; returns within about ``timeout`` even if the driver hangs."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def scan_holders_now(self) -> HolderScan:
        """Scan every process for device holders in the caller's thread; the next snapshot uses
        the result."""
        scan = scan_holders(self.dev_dir)
        with self._lock:
            self._holders = self._asked = scan
        if scan.note and not self._holder_note_logged:
            self._holder_note_logged = True
            log.info("holder scan: %s", scan.note)
        return scan

    def _count_error(self, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            self.last_error = f"{type(exc).__name__}: {exc}"

    def _run(self) -> None:
        next_due = time.monotonic()
        while not self._stop.is_set():
            if not self.paused:
                try:
                    self._tick()
                except Exception as exc:  # a bug in enrichment must not end sampling
                    log.info("sampler tick failed", exc_info=True)
                    self._count_error(exc)
            next_due += self._interval_s
            now = time.monotonic()
            next_due = max(next_due, now)  # after a long tick, don't try to catch up in a burst
            self._stop.wait(next_due - now)

    def _tick(self) -> None:
        fresh: Snapshot | None = None
        try:
            fresh = self._readings.read(tick_wait(self._interval_s))
        except DriverTimeout:
            pass  # nothing in time, not even which GPUs there are: the last reading, stale
        except Exception as exc:  # the source's own bug or a driver failure: keep sampling
            log.info("reading the source failed", exc_info=True)
            self._count_error(exc)
        if self._stop.is_set():
            return
        if fresh is None:
            last = self.latest
            if last is not None:
                self._emit(replace(last, stale_s=max(0.0, time.monotonic() - last.taken_at_mono)))
            elif self._source.driver_note is not None:
                self._emit(self._nothing_yet())
            return
        if self._enrich:
            lists = self._lists.track(fresh.gpus)
            fresh = enrich_snapshot(
                fresh,
                holders=self._due_holders(lists.pids),
                history=self.history,
                reader=self._procs,
                memo=self._rows,
                lists=lists,
            )
        self.history.append(fresh)
        with self._lock:
            self._latest = fresh
        self._emit(fresh)

    def _nothing_yet(self) -> Snapshot:
        """A snapshot with no GPUs, to carry the driver's trouble before any reading came."""
        return Snapshot(
            seq=0,
            taken_at_wall=time.time() - (time.monotonic() - self._started_mono),
            taken_at_mono=self._started_mono,
            system=SystemInfo(hostname=clean(socket.gethostname())),
            gpus=(),
            stale_s=max(0.0, time.monotonic() - self._started_mono),
        )

    def _due_holders(self, listed: frozenset[int]) -> HolderScan:
        """This tick's share of the holder scan (a whole one just asked for is used first)."""
        dev_dir = self.dev_dir
        if self._watch is None or self._watch.dev_dir != dev_dir:  # at start, or it moved
            self._watch = HolderWatch(dev_dir, min_sweep_s=self.holder_interval_s)
        with self._lock:
            asked, self._asked = self._asked, None
        if asked is not None:
            return asked
        scan = self._watch.tick(self._interval_s, listed)
        with self._lock:
            self._holders = scan
        if scan.note and not self._holder_note_logged:
            self._holder_note_logged = True
            log.info("holder scan: %s", scan.note)
        return scan

    def _emit(self, snapshot: Snapshot) -> None:
        if self.on_snapshot is None:
            return
        # A driver process (gputop.engine.isolated) says what is wrong with it and how often
        # it was restarted; every snapshot carries that on, fresh or stale.
        note = self._source.driver_note
        restarts = self._source.restarts
        if note is not None or restarts:
            snapshot = replace(snapshot, driver_note=note, sampler_restarts=restarts)
        try:
            self.on_snapshot(snapshot)
        except Exception as exc:  # the consumer's bug: report it, keep sampling
            log.info("on_snapshot callback failed", exc_info=True)
            self._count_error(exc)
