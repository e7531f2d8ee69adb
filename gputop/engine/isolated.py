"""The driver in a process of its own: a Source whose NVML calls cannot take gputop down.

DCGM keeps the driver in its host engine for the same reason: after an Xid error NVML calls
hang for minutes, and a broken install crashes inside libnvidia-ml. Here the driver process
(gputop.engine.child) makes every NVML call; gputop, its dashboard, the kill path and the
exporter only read the snapshots it sends over a pipe.

* It crashed: ``snapshot()`` raises DriverCrashed and ``driver_note`` says
  ``DRIVER CRASHED (SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage) — restarting``; the next
  call after a backoff (0.5 s, doubling to 30 s, reset by a good reading) starts a new one.
  ``snapshot_within`` meanwhile gives each GPU NOT_RESPONDING, or, if a reading had read it
  before the crash, that reading with ``stale_s`` set: the first reading and those after a
  crash come GPU by GPU, so a crash does not take the GPUs read before it along.
* It hangs: ``snapshot()`` waits and ``driver_note`` names the call;
  ``snapshot_within(timeout_s)`` returns what it has when the time is up, each GPU that did not
  answer in state NOT_RESPONDING. When the time ran out on a reading stuck in one GPU's call,
  the next ``snapshot_within`` reads the other GPUs beside it (the driver process runs that
  reading on a thread of its own): they keep updating while that GPU does not answer.
* ``close()`` says goodbye and gives the process a moment to stop the demo's processes, then
  kills it; it never waits for it (a process stuck in the kernel is the kernel's business).
"""

from __future__ import annotations

import collections
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import IO

from gputop.engine.crash import describe_exit
from gputop.engine.messages import (
    PROTOCOL_VERSION,
    Bye,
    DriverConfig,
    Flush,
    Flushed,
    GpuRead,
    Hello,
    Message,
    OpenError,
    OpenFailed,
    Pids,
    PidsFailed,
    PidsRead,
    Probes,
    Read,
    ReadFailed,
    Reading,
    Slow,
    Start,
    TerminalGuard,
)
from gputop.engine.model import GpuCounters, GpuSample, PidMemory, Snapshot, silent_gpu
from gputop.engine.ourselves import add_helper, drop_helper
from gputop.engine.probes import Probe
from gputop.engine.process_delta import DeltaError, ListDecoder
from gputop.engine.sanitize import clean
from gputop.engine.terminal_guard import arm, disarm
from gputop.engine.wire import Sender, WireError, receive
from gputop.errors import DriverCrashed, DriverError, DriverTimeout

__all__ = ["DriverConfig", "DriverCrashed", "IsolatedSource"]

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
GOODBYE_GRACE_S = 0.3  # for the demo's processes to be stopped; a real driver process exits at once
SLOW_NOTE_AFTER_S = 0.5  # a reading in flight this long is named in driver_note
FLUSH_WAIT_S = 0.1  # of a one-shot's time: asking the driver process for what it has so far
_STDERR_KEEP = 64 * 1024
DUMP_WAIT_S = 3.0  # at most, for the end of a dead driver process's stderr

# argv of the driver process: ours alone (no user input); -P keeps the working directory off
# sys.path, so a folder named gputop there cannot stand in for this installation. It runs
# DriverConfig.boot (argv[2]), which opens the driver and serves it (gputop.engine.child.serve).
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from gputop.engine.child import boot; boot(sys.argv[2])"
)


# The folder this gputop package is in (gputop/engine/isolated.py, three levels up): the driver
# process imports the very same installation.
_INSTALLED_AT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(slots=True, eq=False)
class _Process:
    """One driver process and everything it has said."""

    proc: subprocess.Popen[bytes]
    sender: Sender
    started_mono: float
    hello: Hello | None = None
    error: OpenFailed | None = None
    death: str | None = None  # why it ended, in words; set once it has
    gpus: dict[int, list[GpuSample]] = field(default_factory=dict)  # seq -> GPUs read so far
    results: dict[int, Snapshot | str] = field(default_factory=dict)  # seq -> reading or failure
    pid_results: dict[int, PidMemory | str] = field(default_factory=dict)  # light reads, likewise
    slow: dict[int, Slow] = field(default_factory=dict)  # seq -> the call it is stuck in
    flushed: set[int] = field(default_factory=set)  # readings whose answered GPUs are all here
    # Bounded by bytes (_STDERR_KEEP) in _drain, not by chunks: faulthandler writes its dump a
    # few bytes at a time, and a chunk limit kept only the end of it (no call named).
    stderr_tail: collections.deque[bytes] = field(default_factory=collections.deque)
    stderr_done: threading.Event = field(default_factory=threading.Event)
    buried: threading.Event = field(default_factory=threading.Event)  # collected, death known

    @property
    def pid(self) -> int:
        return self.proc.pid


class IsolatedSource:
    """A Source served by a driver process of its own; see the module docstring.

    ``guard_terminal`` (the dashboard): if gputop itself dies without closing, the driver
    process puts the terminal back and saves gputop's faulthandler dump to a file.
    """

    partial_readings = True  # snapshot_within answers the GPUs that did, NOT_RESPONDING the rest

    def __init__(self, config: DriverConfig, *, guard_terminal: bool = False) -> None:
        self.config = config
        self.restarts = 0
        self._cond = threading.Condition()
        self._closed = False
        self._seq = 0
        self._pid_seq = 0  # light reads count apart: a Snapshot's seq is gputop's tick number
        self._inflight: tuple[int, float, float] | None = None  # seq, mono, wall of the request
        # GPU -> (seq, call, since) of a reading stuck in that GPU's call; later readings skip it
        self._stuck: dict[int, tuple[int, str | None, float]] = {}
        self._given_up: int | None = None  # the reading a snapshot_within ran out of time on
        self._probes: Probes | None = None
        self._crashes_in_row = 0
        self._next_start = 0.0
        self._crash_note: str | None = None  # "DRIVER CRASHED (why)" until a good reading
        self._crashed_at = 0.0
        # What the readings that crashed had read: GPU -> (sample, when its reading began).
        # Kept, marked stale, until a reading comes through (see _silent_box).
        self._before_crash: dict[int, tuple[GpuSample, float]] = {}
        # The counters of the last whole reading, by GPU: a reading cut short (one GPU slow or
        # stuck) gives them for the GPUs that did answer, so the exporter's counter series do not
        # blink out with every slow call (they are read last, after every GPU has answered).
        self._last_counters: dict[int, GpuCounters] = {}
        self._read_once = False  # a reading came through: until then, readings come GPU by GPU
        self._last_hello: Hello | None = None
        self._clock_origin = time.monotonic()
        self._guard: TerminalGuard | None = None
        self._fault_file: IO[bytes] | None = None
        if guard_terminal and (armed := arm()) is not None:
            self._guard, self._fault_file = armed
        self._proc: _Process | None = None
        self._proc = self._spawn()

    # -- the Source interface -----------------------------------------------------------------
    @property
    def simulated(self) -> bool:
        """True when the driver process serves a simulated box."""
        hello = self._hello()
        return hello is not None and hello.simulated

    @property
    def dev_dir(self) -> str:
        """The folder of the box's /dev/nvidia* files, as the newest driver process said; never
        waits for it (a hung nvmlInit must not hold the dashboard). A simulated box has its own,
        never /dev: until its driver process says which, none (a folder that cannot hold any).
        A restarted simulated driver process has a new folder: ask again, do not keep it."""
        with self._cond:
            hello = self._last_hello
        if hello is not None and hello.dev_dir:
            return hello.dev_dir
        simulated = (
            (hello is not None and hello.simulated) or self.config.demo or self.config.scenario
        )
        return os.devnull if simulated else "/dev"  # nothing can be under /dev/null

    @property
    def driver_note(self) -> str | None:
        """What is wrong with the driver right now, in one line; None when all is well."""
        with self._cond:
            if self._crash_note is not None:
                return f"{self._crash_note} — restarting"
            proc, inflight = self._proc, self._inflight
            now = time.monotonic()
            if proc is None:
                return None
            if proc.hello is None and proc.error is None:
                waited = now - proc.started_mono
                if waited < SLOW_NOTE_AFTER_S:
                    return None
                slow = proc.slow.get(0)
                call = slow.call if slow and slow.call else "the driver"
                return f"waiting for the driver: {call} not answering for {waited:.0f} s"
            if inflight is not None and now - inflight[1] >= SLOW_NOTE_AFTER_S:
                waited = now - inflight[1]
                return _slow_of(proc.slow.get(inflight[0]), f"not answering for {waited:.0f} s")
            return self._stuck_note(now, "not answering for {:.0f} s")

    def _stuck_note(self, now: float, what: str) -> str | None:
        """The longest-stuck GPU's call, in words (``what`` formats its seconds); lock held."""
        if not self._stuck:
            return None
        gpu, (seq, call, since) = min(self._stuck.items(), key=lambda item: item[1][2])
        proc = self._proc
        slow = proc.slow.get(seq) if proc is not None else None
        return _slow_note((slow.call if slow else None) or call, gpu, what.format(now - since))

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the driver to be open; False if it is not yet.

        Raises what opening it raised: DriverMissing, DriverError, UsageError (a bad scenario).
        """
        proc = self._running()
        return self._await_hello(proc, time.monotonic() + timeout_s)

    def snapshot(self) -> Snapshot:
        """The next reading; blocks while the driver hangs. DriverCrashed if the process died."""
        proc = self._running()
        self._await_hello(proc, None)
        seq = self._begin_read(proc)
        with self._cond:
            self._cond.wait_for(lambda: seq in proc.results or proc.death is not None)
            return self._take(proc, seq)

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        """A reading within ``timeout_s``: what answered, and NOT_RESPONDING for what did not.

        Raises DriverTimeout (or DriverCrashed) only when nothing is known, not even the GPUs.
        """
        deadline = time.monotonic() + timeout_s
        try:
            proc = self._running()
        except DriverCrashed:
            return self._silent_box(None, timeout_s)
        if not self._await_hello(proc, deadline):
            if proc.death is not None:
                return self._silent_box(None, timeout_s)
            slow = proc.slow.get(0)
            what = f" ({slow.call} did not return)" if slow and slow.call else ""
            raise DriverTimeout(f"the NVIDIA driver did not answer within {timeout_s:g} s{what}")
        seq = self._begin_read(proc, beside=True)
        with self._cond:
            self._cond.wait_for(
                lambda: seq in proc.results or proc.death is not None,
                max(0.0, deadline - FLUSH_WAIT_S - time.monotonic()),
            )
        if seq not in proc.results and proc.death is None:
            # Not done yet: have the driver process send the GPUs that did answer (and the call
            # it is stuck in) now, rather than at its watchdog's next look.
            self._send(proc, Flush(seq))
        with self._cond:
            self._cond.wait_for(
                lambda: seq in proc.results or seq in proc.flushed or proc.death is not None,
                max(0.0, deadline - time.monotonic()),
            )
            if seq in proc.results:
                try:
                    return self._take(proc, seq)
                except DriverError:
                    if self._last_hello is None:
                        raise
                    return self._silent_box(seq, timeout_s)
            self._given_up = seq
        return self._silent_box(seq, timeout_s)

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        """The light read (process lists only) from the driver process; blocks while it hangs.

        DriverCrashed if the process died, DriverError if the driver layer failed.
        """
        proc = self._running()
        self._await_hello(proc, None)
        with self._cond:
            self._pid_seq += 1
            seq = self._pid_seq
        self._send(proc, Pids(seq, tuple(pids)))
        with self._cond:
            self._cond.wait_for(lambda: seq in proc.pid_results or proc.death is not None)
            result = proc.pid_results.pop(seq, None)
        if result is None:
            raise DriverCrashed(self._crash_note or f"the NVIDIA driver crashed ({proc.death})")
        if isinstance(result, str):
            raise DriverError(result)
        return result

    def request_probes(self, probes: Iterable[Probe], explain: Iterable[str] = ()) -> None:
        """Have the driver read these extra fields from the next reading on (``gputop query``)."""
        self._probes = Probes(tuple(probes), tuple(explain))
        proc = self._proc
        if proc is not None and proc.death is None:
            self._send(proc, self._probes)

    def close(self) -> None:
        """Stop the driver process without waiting for it (see the module docstring)."""
        with self._cond:
            self._closed = True
            proc = self._proc
            self._cond.notify_all()
        if proc is not None:
            _goodbye(proc)
        if self._fault_file is not None:
            disarm()
            self._fault_file = None

    @property
    def pid(self) -> int | None:
        """The running driver process's PID (tests, diagnostics)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.death is None else None

    # -- the driver process -------------------------------------------------------------------
    def _running(self) -> _Process:
        """The live driver process, started anew after a crash once the backoff has passed."""
        with self._cond:
            if self._closed:
                raise DriverError("the driver source is closed")
            proc = self._proc
            if proc is not None and proc.death is None:
                return proc
            wait = self._next_start - time.monotonic()
            if wait > 0:
                raise DriverCrashed(self._crash_note or "the driver process has ended")
            self.restarts += 1
        proc = self._spawn()
        with self._cond:
            self._proc = proc
            self._inflight = None  # the dead process's reading will never come
            self._stuck.clear()
        return proc

    def _spawn(self) -> _Process:
        config = self.config
        if config.clock_origin_mono is None:  # a restarted process continues the first's clock
            config = replace(config, clock_origin_mono=self._clock_origin)
        guard = self._guard
        passed = (guard.tty_fd, guard.fault_fd) if guard is not None else ()
        try:
            popen = subprocess.Popen(  # argv is ours alone (boot: gputop's), never user input
                [sys.executable, "-P", "-c", _BOOT, _INSTALLED_AT, config.boot],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=passed,
                # Its own process group: Ctrl-C and a closed terminal are gputop's to handle.
                process_group=0,
            )
        except OSError as exc:
            raise DriverError(f"cannot start the driver process: {exc.strerror or exc}") from None
        assert popen.stdin is not None and popen.stdout is not None and popen.stderr is not None
        proc = _Process(popen, Sender(popen.stdin.fileno()), time.monotonic())
        add_helper(proc.pid)
        self._send(proc, Start(config, guard))
        if self._probes is not None:
            self._send(proc, self._probes)
        for target, name in ((self._listen, "gputop-driver-listen"), (_drain, "gputop-driver-err")):
            threading.Thread(target=target, args=(proc,), name=name, daemon=True).start()
        return proc

    def _send(self, proc: _Process, message: Message) -> None:
        with contextlib.suppress(OSError):  # a dead process: its listener reports the death
            proc.sender.send(message)

    def _listen(self, proc: _Process) -> None:
        """Take in everything the driver process says, until it ends."""
        assert proc.proc.stdout is not None
        fd = proc.proc.stdout.fileno()
        lists = ListDecoder()
        while True:
            try:
                message = receive(fd)
                snapshot = (
                    lists.decode(message.shell, message.lists)
                    if isinstance(message, Reading)
                    else None
                )
            except (OSError, WireError, DeltaError):
                message = None
            if message is None:
                break
            with self._cond:
                self._take_in(proc, message, snapshot)
                self._cond.notify_all()
        self._buried(proc)

    def _take_in(self, proc: _Process, message: Message, snapshot: Snapshot | None) -> None:
        """Note what the driver process said (lock held); ``snapshot``: a Reading's, decoded."""
        if isinstance(message, GpuRead):
            proc.gpus.setdefault(message.seq, []).append(message.sample)
        elif isinstance(message, Reading) and snapshot is not None:
            proc.gpus.pop(message.seq, None)
            proc.results[message.seq] = snapshot
            self._unstuck(message.seq)
        elif isinstance(message, ReadFailed):
            proc.gpus.pop(message.seq, None)
            proc.results[message.seq] = clean(message.why)
            self._unstuck(message.seq)
        elif isinstance(message, PidsRead):
            proc.pid_results[message.n] = message.memory
        elif isinstance(message, PidsFailed):
            proc.pid_results[message.n] = clean(message.why)
        elif isinstance(message, Slow):
            proc.slow[message.seq] = message
        elif isinstance(message, Flushed):
            proc.flushed.add(message.seq)
        elif isinstance(message, Hello) and message.version != PROTOCOL_VERSION:
            why = f"the driver process speaks protocol {message.version}, gputop {PROTOCOL_VERSION}"
            proc.error = OpenFailed(OpenError.DRIVER, f"{why}: two gputop installations are mixed")
            with contextlib.suppress(OSError):
                proc.proc.kill()
        elif isinstance(message, Hello):
            proc.hello = self._last_hello = message
        elif isinstance(message, OpenFailed):
            proc.error = OpenFailed(message.error, clean(message.message))

    def _buried(self, proc: _Process) -> None:
        """The driver process's pipe closed: collect it and say why it ended."""
        try:
            returncode = proc.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.proc.kill()
            returncode = proc.proc.wait()  # killed: SIGKILL ends even a process that hung
        # Its stderr ends with it: the whole dump is there once the reader has caught up,
        # which on a loaded box can take longer than a moment (a cut dump names no call).
        proc.stderr_done.wait(DUMP_WAIT_S)
        drop_helper(proc.pid)
        why = describe_exit(returncode, b"".join(proc.stderr_tail).decode("utf-8", "replace"))
        with self._cond:
            proc.death = clean(why)
            if self._proc is proc and not self._closed and proc.error is None:
                self._crashes_in_row += 1
                delay = min(BACKOFF_FIRST_S * 2 ** (self._crashes_in_row - 1), BACKOFF_MAX_S)
                self._next_start = time.monotonic() + delay
                self._crash_note = f"{DriverCrashed.NOTE} ({proc.death})"
                self._crashed_at = time.monotonic()
                inflight = self._inflight
                if inflight is not None:
                    for sample in proc.gpus.get(inflight[0], ()):
                        self._before_crash[sample.index] = (sample, inflight[1])
            self._cond.notify_all()
        proc.buried.set()

    def _hello(self) -> Hello | None:
        proc = self._proc
        if proc is not None:
            with contextlib.suppress(DriverError):
                self._await_hello(proc, None)
        return self._last_hello

    def _await_hello(self, proc: _Process, deadline: float | None) -> bool:
        """Wait for the driver process to open the driver; False at the deadline.

        Raises the driver's own error (DriverMissing, DriverError, UsageError for a bad
        scenario) when it could not open it, DriverCrashed when it died trying.
        """
        with self._cond:
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._cond.wait_for(
                lambda: proc.hello is not None or proc.error is not None or proc.death is not None,
                timeout,
            )
            if proc.error is not None:
                raise proc.error.error.error(proc.error.message)
            if proc.hello is not None:
                return True
            if proc.death is not None:
                raise DriverCrashed(f"the NVIDIA driver crashed ({proc.death})")
            return False

    def _begin_read(self, proc: _Process, *, beside: bool = False) -> int:
        """Ask for a reading unless one is in flight; returns the one to wait for.

        ``beside``: a reading that a ``snapshot_within`` ran out of time on, stuck in one GPU's
        call, is left running, and a new one reads the other GPUs beside it.
        """
        with self._cond:
            inflight = self._inflight
            if inflight is not None and inflight[0] not in proc.results and proc.death is None:
                slow = proc.slow.get(inflight[0])
                if not (beside and slow and slow.gpu is not None) or (
                    self._given_up != inflight[0]
                ):
                    return inflight[0]
                self._stuck[slow.gpu] = (inflight[0], slow.call, inflight[1])
            # A reading that finished after its caller stopped waiting is not handed out late
            # (a logging loop would print old values as new): forget it, and all it said.
            stuck_seqs = {seq for seq, _, _ in self._stuck.values()}
            for kept in (proc.results, proc.gpus, proc.slow):
                # s == 0: what opening the driver said; a stuck reading still names its call
                for old in [s for s in kept if s and s not in stuck_seqs]:
                    del kept[old]
            proc.flushed.clear()
            self._seq += 1
            self._inflight = (self._seq, time.monotonic(), time.time())
            seq = self._seq
            skip = tuple(sorted(self._stuck))
            # The first reading, and those after a crash, come GPU by GPU: should the driver
            # crash in them, the GPUs read before it are not lost with it.
            careful = not self._read_once or self._crashes_in_row > 0
        self._send(proc, Read(seq, skip, careful))
        return seq

    def _unstuck(self, seq: int) -> None:
        """Reading ``seq`` ended: its GPU is read again (called with the lock held)."""
        for gpu in [g for g, stuck in self._stuck.items() if stuck[0] == seq]:
            del self._stuck[gpu]

    def _stuck_error(self, gpu: int, now: float) -> tuple[str, float] | None:
        """Why GPU ``gpu`` has no reading and for how long, if a reading is stuck in its call
        (called with the lock held)."""
        stuck = self._stuck.get(gpu)
        if stuck is None:
            return None
        proc = self._proc
        slow = proc.slow.get(stuck[0]) if proc is not None else None
        call = (slow.call if slow else None) or stuck[1]
        return (f"{call} did not return" if call else "no answer"), now - stuck[2]

    def _take(self, proc: _Process, seq: int) -> Snapshot:
        """The finished reading ``seq`` (called with the lock held)."""
        if seq not in proc.results:
            raise DriverCrashed(self._crash_note or f"the NVIDIA driver crashed ({proc.death})")
        result = proc.results.pop(seq)
        proc.slow.pop(seq, None)
        proc.flushed.discard(seq)
        if self._inflight is not None and self._inflight[0] == seq:
            self._inflight = None
        if isinstance(result, str):
            raise DriverError(result)
        self._crashes_in_row = 0
        self._crash_note = None
        self._before_crash.clear()
        self._read_once = True
        if result.counters:
            self._last_counters = {c.index: c for c in result.counters}
        hello = self._last_hello
        if self._stuck and hello is not None and len(result.gpus) < len(hello.gpus):
            result = self._with_stuck(result, hello)
        return result

    def _with_stuck(self, result: Snapshot, hello: Hello) -> Snapshot:
        """A reading beside a stuck one, with each GPU it skipped NOT_RESPONDING (lock held)."""
        now = time.monotonic()
        by_index = {g.index: g for g in result.gpus}
        gpus = []
        for identity in hello.gpus:
            got = by_index.get(identity.index)
            if got is None:
                error, waited = self._stuck_error(identity.index, now) or ("no answer", None)
                got = silent_gpu(identity, error=error, stale_s=waited)
            gpus.append(got)
        note = self._stuck_note(now, "not answering for {:.0f} s")
        return replace(result, gpus=tuple(gpus), driver_note=note)

    def _silent_box(self, seq: int | None, timeout_s: float) -> Snapshot:
        """What ``snapshot_within`` gives when time is up: the GPUs that answered, and the rest
        NOT_RESPONDING. Raises when not even the GPUs are known (the driver never opened)."""
        with self._cond:
            hello = self._last_hello
            proc, inflight = self._proc, self._inflight
            if hello is None:
                why = self._crash_note or "the NVIDIA driver did not answer"
                raise DriverCrashed(why)
            now, wall = time.monotonic(), time.time()
            started, started_wall = now - timeout_s, wall - timeout_s
            answered: list[GpuSample] = []
            slow: Slow | None = None
            if proc is not None and seq is not None and inflight is not None:
                started, started_wall = inflight[1], inflight[2]
                answered = list(proc.gpus.get(seq, ()))
                slow = proc.slow.get(seq)
            crash, crashed_at = self._crash_note, self._crashed_at
            kept = dict(self._before_crash) if crash is not None else {}
            last_counters = self._last_counters
        # How long each silent GPU has given nothing: since the request, or since the crash.
        waited = now - (crashed_at if crash is not None else started)
        by_index = {g.index: g for g in answered}
        call, stuck_gpu = (slow.call, slow.gpu) if slow else (None, None)
        gpus = []
        for identity in hello.gpus:
            if identity.index in kept:  # read before the crash: its reading, marked stale
                sample, began = kept[identity.index]
                gpus.append(replace(sample, stale_s=now - began))
                continue
            got = by_index.get(identity.index)
            if got is not None:
                gpus.append(got)
                continue
            with self._cond:
                beside = None if crash is not None else self._stuck_error(identity.index, now)
            if beside is not None:
                gpus.append(silent_gpu(identity, error=beside[0], stale_s=beside[1]))
                continue
            if crash is not None:
                error = crash
            elif identity.index == stuck_gpu and call:
                error = f"{call} did not return"
            elif stuck_gpu is not None:
                error = f"not read: the driver is stuck on GPU {stuck_gpu}"
            else:
                error = f"{call} did not return" if call else "no answer"
            gpus.append(silent_gpu(identity, error=error, stale_s=waited))
        with self._cond:
            beside_note = None if slow else self._stuck_note(now, "did not return within {:.0f} s")
        note = crash or beside_note or _slow_of(slow, f"did not return within {timeout_s:g} s")
        return Snapshot(
            seq=seq or 0,
            taken_at_wall=started_wall,
            taken_at_mono=started,
            system=hello.system,
            gpus=tuple(gpus),
            driver_note=note,
            sampler_restarts=self.restarts,
            counters=tuple(last_counters[i] for i in sorted(by_index) if i in last_counters),
        )


def _slow_of(slow: Slow | None, what: str) -> str:
    return _slow_note(slow.call, slow.gpu, what) if slow else _slow_note(None, None, what)


def _slow_note(call: str | None, gpu: int | None, what: str) -> str:
    where = f" (GPU {gpu})" if gpu is not None else ""
    return f"{call or 'the NVIDIA driver'}{where} {what}"


def _drain(proc: _Process) -> None:
    """Keep the last part of what the driver process writes on stderr (its crash dump)."""
    assert proc.proc.stderr is not None
    fd = proc.proc.stderr.fileno()
    kept = 0
    try:
        while chunk := os.read(fd, 8192):
            proc.stderr_tail.append(chunk)
            kept += len(chunk)
            while kept > _STDERR_KEEP and len(proc.stderr_tail) > 1:
                kept -= len(proc.stderr_tail.popleft())
    except OSError:
        pass
    finally:
        proc.stderr_done.set()


def _goodbye(proc: _Process) -> None:
    """Ask the driver process to leave, give it a moment, then kill it; never wait longer."""
    if proc.death is not None:
        return
    with contextlib.suppress(OSError):
        proc.sender.send(Bye())
    if not proc.buried.wait(GOODBYE_GRACE_S):
        with contextlib.suppress(OSError):
            proc.proc.kill()
