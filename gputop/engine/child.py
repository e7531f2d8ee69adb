"""The driver process: the only gputop process that loads libnvidia-ml (or the simulated one).

gputop starts it (gputop.engine.isolated) with three pipes: requests on stdin, replies on stdout,
diagnostics on stderr (faulthandler's dump when the driver crashes it). The process runs the
``DriverConfig.boot`` function (the composition module's), which calls :func:`serve` with the
way to open the driver: this module knows neither the simulator nor the real driver's setup.
The conversation, one dataclass per message, is in gputop.engine.messages.

A snapshot's process lists travel beside it as what changed since the last snapshot
(gputop.engine.process_delta). A reading normally goes over in one message; only a slow one is
sent GPU by GPU, so that a one-shot whose time is up can show the GPUs that did answer; a careful
one (the first, and those after a crash) is sent GPU by GPU from the start, so that a crash in
it does not lose the GPUs read before.

Three threads: the main one talks to the driver, one at a time, and may hang in it for ever;
the *control* thread reads requests, so ``Bye`` and the parent's death (end of file) are heard
even then; the *watchdog* names the call each reading is stuck in (the driver layer records the
call and GPU each thread is in: gputop.engine.in_flight). A read with a ``skip`` (the GPUs a
stuck reading hangs on) runs on a thread of its own, beside the stuck one: the other GPUs keep
being read while one GPU's call hangs.

When gputop dies without saying bye (SIGKILL, a crash of its own), the control thread puts the
terminal back as it was (the dashboard's alternate screen, mouse tracking, raw mode) and saves
gputop's faulthandler dump, if any, to a file named in one line.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import importlib
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputop.engine.heap_trim import release_free_pages
from gputop.engine.in_flight import in_flight
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
)
from gputop.engine.process_delta import ListEncoder
from gputop.engine.terminal_guard import mend
from gputop.engine.wire import Sender, WireError, receive
from gputop.errors import GputopError

if TYPE_CHECKING:
    from gputop.engine.model import GpuSample
    from gputop.engine.nvml import NvmlSource

Opener = Callable[[DriverConfig], "NvmlSource"]

SLOW_AFTER_S = 0.5  # a call running this long is reported (and again every WATCH_EVERY_S)
WATCH_EVERY_S = 0.25


class _Child:
    def __init__(
        self, sender: Sender, start: Start, opener: Opener, on_exit: Callable[[], None]
    ) -> None:
        self.sender = sender
        self.config = start.config
        self.guard = start.guard
        self._opener, self._on_exit = opener, on_exit
        self.requests: queue.SimpleQueue[Message] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # Thread ident -> the reading it is in (seq, since, its GPUs so far; seq 0: opening).
        self._busy: dict[int, tuple[int, float, _Progress | None]] = {}
        self._called = threading.Event()  # set while any thread is in the driver
        self._source: NvmlSource | None = None  # once opened: readings beside a stuck one too
        self._exiting = False
        self._lists = ListEncoder()
        # Encoding a snapshot's lists and sending it is one step: the other end decodes in the
        # order they arrive, and a reading beside a stuck one may finish at the same moment.
        self._snap_lock = threading.Lock()

    # -- threads ----------------------------------------------------------------------------
    def control(self) -> None:
        """Pass requests on to the main thread; exit on ``Bye`` or when gputop is gone."""
        while True:
            try:
                message = receive(0)
            except (OSError, WireError):
                message = None
            if message is None:
                self.leave(clean=False)
            elif isinstance(message, Bye):
                self.leave(clean=True)
            elif isinstance(message, Flush):
                self.flush(message.seq)
            elif isinstance(message, Read) and message.skip and self._source is not None:
                # The main thread is stuck in a GPU's call: read the others beside it.
                threading.Thread(
                    target=self._read,
                    args=(self._source, message),
                    daemon=True,
                    name="gputop-beside",
                ).start()
            else:
                self.requests.put(message)

    def flush(self, seq: int) -> None:
        """Send what reading ``seq`` has so far and the call it is in; then ``Flushed``."""
        with self._lock:
            found = [(ident, b) for ident, b in self._busy.items() if b[0] == seq]
        calls = in_flight()
        for ident, (_, since, progress) in found:
            if progress is not None:
                progress.send_new()
            call, gpu = calls.get(ident, (None, None))
            self._send(Slow(seq, call, gpu, time.monotonic() - since))
        self._send(Flushed(seq))

    def watchdog(self) -> None:
        """Say which call the main thread is stuck in, while it is stuck."""
        while True:
            # Asleep while the driver is not being called: an idle box costs no wake-ups.
            self._called.wait()
            time.sleep(WATCH_EVERY_S)
            with self._lock:
                busy = list(self._busy.items())
            calls = in_flight()
            for ident, (seq, since, progress) in busy:
                elapsed = time.monotonic() - since
                if elapsed < SLOW_AFTER_S:
                    continue
                call, gpu = calls.get(ident, (None, None))
                try:
                    if progress is not None:
                        progress.send_new()
                    self.sender.send(Slow(seq, call, gpu, elapsed))
                except OSError:
                    return

    # -- the driver ---------------------------------------------------------------------------
    def run(self) -> None:
        for target in (self.control, self.watchdog):
            threading.Thread(target=target, daemon=True, name=f"gputop-{target.__name__}").start()
        source = self._open()
        if source is None:
            return
        while True:
            message = self.requests.get()
            if isinstance(message, Read):
                self._read(source, message)
            elif isinstance(message, Pids):
                self._read_pids(source, message)
            elif isinstance(message, Probes):
                source.request_probes(message.probes, message.explain)

    def _open(self) -> NvmlSource | None:
        self._set_busy(0, None)
        try:
            source = self._opener(self.config)
        except GputopError as exc:
            self._send(OpenFailed(OpenError.of(exc), str(exc)))
            return None
        finally:
            self._set_busy(None, None)
        _settle_heap()
        self._source = source
        self._send(
            Hello(
                version=PROTOCOL_VERSION,
                simulated=source.simulated,
                dev_dir=source.dev_dir,
                system=source.system,
                gpus=source.identities(),
                pid=os.getpid(),
            )
        )
        return source

    def _read(self, source: NvmlSource, request: Read) -> None:
        seq = request.seq
        progress = _Progress(self.sender, seq, careful=request.careful)
        self._set_busy(seq, progress)
        try:
            snapshot = source.snapshot(progress=progress, skip=frozenset(request.skip))
        except Exception as exc:  # noqa: BLE001 - the driver layer's failure: report it, serve on
            self._send(ReadFailed(seq, f"{type(exc).__name__}: {exc}"))
            return
        finally:
            self._set_busy(None, None)
        # gputop's request number is the snapshot's: it goes on rising across restarts.
        with self._snap_lock:
            shell, lists = self._lists.encode(snapshot, seq=seq)
            self._send(Reading(seq, shell, lists))

    def _read_pids(self, source: NvmlSource, request: Pids) -> None:
        try:
            memory = source.pid_memory(request.pids)
        except Exception as exc:  # noqa: BLE001 - the driver layer's failure: report it, serve on
            self._send(PidsFailed(request.n, f"{type(exc).__name__}: {exc}"))
            return
        self._send(PidsRead(request.n, memory))

    def _set_busy(self, seq: int | None, progress: _Progress | None) -> None:
        """Note that this thread is in the driver for reading ``seq`` (None: out of it)."""
        ident = threading.get_ident()
        with self._lock:
            if seq is None:
                self._busy.pop(ident, None)
            else:
                self._busy[ident] = (seq, time.monotonic(), progress)
            if self._busy:
                self._called.set()
            else:
                self._called.clear()

    def _send(self, message: Message) -> None:
        try:
            self.sender.send(message)
        except OSError:
            self.leave(clean=False)

    # -- the end ------------------------------------------------------------------------------
    def leave(self, *, clean: bool) -> None:
        """Exit now; without a clean goodbye, first mend the terminal gputop left behind."""
        with self._lock:
            if self._exiting:
                return
            self._exiting = True
        if not clean and self.guard is not None:
            with contextlib.suppress(Exception):
                mend(self.guard)
        with contextlib.suppress(Exception):
            self._on_exit()
        os._exit(0)


class _Progress(list["GpuSample"]):
    """The list NvmlSource.snapshot appends each GPU to; the watchdog sends them on when slow,
    and a ``careful`` reading sends each at once (a crash then keeps the GPUs read before)."""

    def __init__(self, sender: Sender, seq: int, *, careful: bool = False) -> None:
        super().__init__()
        self._sender, self._seq, self._sent = sender, seq, 0
        self._careful = careful
        self._lock = threading.Lock()

    def append(self, sample: GpuSample) -> None:
        with self._lock:
            super().append(sample)
        if self._careful:
            self.send_new()

    def send_new(self) -> None:
        """Send the GPUs read since the last call (from the watchdog thread)."""
        with self._lock:
            new = self[self._sent :]
            self._sent = len(self)
        for sample in new:
            self._sender.send(GpuRead(self._seq, sample))


def _settle_heap() -> None:
    """Keep the garbage collector off the heap of imports, as the dashboard does (see
    gputop.ui._settle_heap): each reading makes thousands of short-lived objects. Then give the
    C heap's free pages back (:mod:`gputop.engine.heap_trim`)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 20)
    release_free_pages()  # what opening made and freed (1.3 MiB on dgx: see heap_trim)


def serve(opener: Opener, *, on_exit: Callable[[], None]) -> None:
    """Serve the driver to the gputop process that started this one (see the module docstring).

    ``opener`` opens the driver the Start message's config names (raising a GputopError when it
    cannot); ``on_exit`` runs as the process leaves (the simulator's actors are stopped there).
    """
    replies = os.dup(1)
    os.dup2(2, 1)  # a stray print() must never land in the message stream
    faulthandler.enable(file=sys.stderr)
    # Ctrl-C and Ctrl-Z are for gputop, which ends this process itself; the terminal guard
    # may have to set the terminal's modes from the background.
    for number in (signal.SIGINT, signal.SIGTSTP, signal.SIGTTOU):
        signal.signal(number, signal.SIG_IGN)
    try:
        first = receive(0)
    except (OSError, WireError):
        first = None
    if not isinstance(first, Start):
        os._exit(0)
    sender = Sender(replies)
    if first.version != PROTOCOL_VERSION:
        with contextlib.suppress(OSError):
            sender.send(OpenFailed(OpenError.DRIVER, _version_mismatch(first.version)))
        os._exit(0)
    _Child(sender, first, opener, on_exit).run()


def _version_mismatch(theirs: int) -> str:
    return (
        f"gputop and its driver process speak different protocols ({theirs} and "
        f"{PROTOCOL_VERSION}): two gputop installations are mixed"
    )


def boot(spec: str) -> None:
    """Run the driver process's ``"module:function"`` (DriverConfig.boot); gputop chose it."""
    module, _, function = spec.partition(":")
    if not module or not function.isidentifier():
        sys.stderr.write(f"not a module:function: {spec!r}\n")
        os._exit(2)
    run: Callable[[], None] = getattr(importlib.import_module(module), function)
    run()
