"""The driver process: the only gputop process that loads libnvidia-ml (or the simulated one).

gputop starts it (gputop.engine.isolated) with three pipes: requests on stdin, replies on stdout,
diagnostics on stderr (faulthandler's dump when the driver crashes it). The conversation:

parent -> child                         child -> parent
("start", config)                       ("hello", {"simulated", "dev_dir", "gpus", "pid"})
                                        or ("error", kind, message): the driver cannot be used
("read", seq, skip, careful)            ("snap", seq, Snapshot, Lists) or ("fail", seq, why);
                                        while a reading is slow (careful: all along),
                                        ("gpu", seq, GpuSample) for each GPU that answered
("probes", probes, explain)             (nothing: the next reads carry them)
("pids", n, pids)                       ("pids", n, PidMemory) or ("pids", n, why): the light
                                        read (their GPU memory, process lists only)
("flush", seq)                          the GPUs of reading seq that answered, its "slow",
                                        then ("flushed", seq): a one-shot's time is up
("bye",)                                (exits at once)
                                        ("slow", seq, call, gpu, seconds): a call is taking long

A snapshot's process lists travel beside it as what changed since the last snapshot
(gputop.engine.process_delta). A reading normally goes over in one message; only a slow one is
sent GPU by GPU, so that a one-shot whose time is up can show the GPUs that did answer; a careful
one (the first, and those after a crash) is sent GPU by GPU from the start, so that a crash in
it does not lose the GPUs read before.

Three threads: the main one talks to the driver, one at a time, and may hang in it for ever;
the *control* thread reads requests, so ``bye`` and the parent's death (end of file) are heard
even then; the *watchdog* names the call each reading is stuck in (from its stack). A read with
a ``skip`` (the GPUs a stuck reading hangs on) runs on a thread of its own, beside the stuck
one: the other GPUs keep being read while one GPU's call hangs.

When gputop dies without saying bye (SIGKILL, a crash of its own), the control thread puts the
terminal back as it was (the dashboard's alternate screen, mouse tracking, raw mode) and saves
gputop's faulthandler dump, if any, to a file named in one line.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import os
import queue
import signal
import sys
import threading
import time
from dataclasses import replace
from itertools import count
from pathlib import Path
from types import FrameType
from typing import Any

from gputop.engine.process_delta import ListEncoder
from gputop.engine.wire import Sender, WireError, receive

SLOW_AFTER_S = 0.5  # a call running this long is reported (and again every WATCH_EVERY_S)
WATCH_EVERY_S = 0.25

# What Textual's driver turns on, turned off: mouse reporting (all modes), bracketed paste,
# focus events, the kitty keyboard protocol; then line wrapping, the cursor, colours and the
# main screen.
TERMINAL_RESET = (
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?1015l\x1b[?2004l\x1b[?1004l"
    "\x1b[<u\x1b[?7h\x1b[?25h\x1b[0m\x1b[?1049l"
)


def current_call(frame: FrameType | None) -> str | None:
    """The NVML function the thread whose innermost frame is ``frame`` is inside, if any.

    A C function of the driver is called through a local named ``fn`` (pynvml's own functions
    and gputop's direct calls) or is the simulated library's callable itself (``self``); both
    carry the C symbol's name. Otherwise the outermost pynvml frame of the innermost run.
    """
    pynvml_name: str | None = None
    while frame is not None:
        local = frame.f_locals
        for key in ("fn", "self"):
            name = getattr(local.get(key), "__name__", None)
            if isinstance(name, str) and name.startswith("nvml"):
                return name
        if frame.f_code.co_filename.endswith("pynvml.py"):
            pynvml_name = frame.f_code.co_name
        elif pynvml_name is not None:
            break
        frame = frame.f_back
    return pynvml_name


def current_gpu(frame: FrameType | None) -> int | None:
    """The GPU index the driver layer is reading (its ``_read_gpu(index)`` frame), if any."""
    while frame is not None:
        if frame.f_code.co_name == "_read_gpu":
            index = frame.f_locals.get("index")
            return index if isinstance(index, int) else None
        frame = frame.f_back
    return None


class _Child:
    def __init__(self, sender: Sender, config: dict[str, Any]) -> None:
        self.sender = sender
        self.config = config
        self.requests: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.main_ident = threading.get_ident()
        self._lock = threading.Lock()
        # Thread ident -> the reading it is in (seq, since, its GPUs so far; seq 0: opening).
        self._busy: dict[int, tuple[int, float, _Progress | None]] = {}
        self._called = threading.Event()  # set while any thread is in the driver
        self._source: Any = None  # once opened: readings beside a stuck one use it too
        self._exiting = False
        self._lists = ListEncoder()
        # Encoding a snapshot's lists and sending it is one step: the other end decodes in the
        # order they arrive, and a reading beside a stuck one may finish at the same moment.
        self._snap_lock = threading.Lock()

    # -- threads ----------------------------------------------------------------------------
    def control(self) -> None:
        """Pass requests on to the main thread; exit on ``bye`` or when gputop is gone."""
        while True:
            try:
                message = receive(0)
            except (OSError, WireError):
                message = None
            if message is None:
                self.leave(clean=False)
            elif message[0] == "bye":
                self.leave(clean=True)
            elif message[0] == "flush":
                self.flush(int(message[1]))
            elif message[0] == "read" and len(message) > 2 and message[2]:
                # The main thread is stuck in a GPU's call: read the others beside it.
                threading.Thread(
                    target=self._read,
                    args=(self._source, int(message[1]), frozenset(message[2]), _careful(message)),
                    daemon=True,
                    name="gputop-beside",
                ).start()
            else:
                self.requests.put(message)

    def flush(self, seq: int) -> None:
        """Send what reading ``seq`` has so far and the call it is in; then ``flushed``."""
        with self._lock:
            found = [(ident, b) for ident, b in self._busy.items() if b[0] == seq]
        for ident, (_, since, progress) in found:
            frame = sys._current_frames().get(ident)
            if progress is not None:
                progress.send_new()
            elapsed = time.monotonic() - since
            self._send(("slow", seq, current_call(frame), current_gpu(frame), elapsed))
            del frame
        self._send(("flushed", seq))

    def watchdog(self) -> None:
        """Say which call the main thread is stuck in, while it is stuck."""
        while True:
            # Asleep while the driver is not being called: an idle box costs no wake-ups.
            self._called.wait()
            time.sleep(WATCH_EVERY_S)
            with self._lock:
                busy = list(self._busy.items())
            for ident, (seq, since, progress) in busy:
                elapsed = time.monotonic() - since
                if elapsed < SLOW_AFTER_S:
                    continue
                frame = sys._current_frames().get(ident)
                try:
                    if progress is not None:
                        progress.send_new()
                    call, gpu = current_call(frame), current_gpu(frame)
                    self.sender.send(("slow", seq, call, gpu, elapsed))
                except OSError:
                    return
                del frame

    # -- the driver ---------------------------------------------------------------------------
    def run(self) -> None:
        for target in (self.control, self.watchdog):
            threading.Thread(target=target, daemon=True, name=f"gputop-{target.__name__}").start()
        source = self._open()
        if source is None:
            return
        while True:
            message = self.requests.get()
            if message[0] == "read":
                self._read(source, int(message[1]), careful=_careful(message))
            elif message[0] == "pids":
                self._read_pids(source, int(message[1]), message[2])
            elif message[0] == "probes":
                request = getattr(source, "request_probes", None)
                if request is not None:
                    request(message[1], message[2])

    def _open(self) -> Any:
        from gputop.engine.source import open_source
        from gputop.errors import DriverError, DriverMissing, GputopError

        config = self.config
        self._set_busy(0, None)
        try:
            if config.get("clock_origin_mono") is not None:
                _continue_scenario_clock(float(config["clock_origin_mono"]))
            source = open_source(
                demo=config.get("demo"),
                scenario=config.get("scenario"),
                fallback_to_demo=bool(config.get("fallback_to_demo")),
                counters=bool(config.get("counters")),
            )
        except GputopError as exc:
            kind = (
                "DriverMissing"
                if isinstance(exc, DriverMissing)
                else "DriverError"
                if isinstance(exc, DriverError)
                else "UsageError"
            )
            self._send(("error", kind, str(exc)))
            return None
        finally:
            self._set_busy(None, None)
        _settle_heap()
        self._source = source
        identities = getattr(source, "identities", None)
        self._send(
            (
                "hello",
                {
                    "simulated": source.simulated,
                    "dev_dir": source.dev_dir,
                    "system": getattr(source, "system", None),
                    "gpus": identities() if identities is not None else (),
                    "pid": os.getpid(),
                },
            )
        )
        return source

    def _read(
        self, source: Any, seq: int, skip: frozenset[int] = frozenset(), careful: bool = False
    ) -> None:
        progress = _Progress(self.sender, seq, careful=careful)
        self._set_busy(seq, progress)
        try:
            snapshot = source.snapshot(progress=progress, skip=skip)
        except Exception as exc:  # noqa: BLE001 - the driver layer's failure: report it, serve on
            self._send(("fail", seq, f"{type(exc).__name__}: {exc}"))
            return
        finally:
            self._set_busy(None, None)
        # gputop's request number is the snapshot's: it goes on rising across restarts.
        with self._snap_lock:
            shell, lists = self._lists.encode(replace(snapshot, seq=seq))
            self._send(("snap", seq, shell, lists))

    def _read_pids(self, source: Any, n: int, pids: tuple[int, ...]) -> None:
        try:
            result: Any = source.pid_memory(pids)
        except Exception as exc:  # noqa: BLE001 - the driver layer's failure: report it, serve on
            result = f"{type(exc).__name__}: {exc}"
        self._send(("pids", n, result))

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

    def _send(self, message: tuple[Any, ...]) -> None:
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
        if not clean:
            with contextlib.suppress(Exception):
                _mend_terminal(self.config)
        with contextlib.suppress(Exception):
            _stop_demo_processes()
        os._exit(0)


def _careful(message: tuple[Any, ...]) -> bool:
    """Whether a read request asks for its GPUs one by one as they are read."""
    return len(message) > 3 and bool(message[3])


class _Progress(list[Any]):
    """The list NvmlSource.snapshot appends each GPU to; the watchdog sends them on when slow,
    and a ``careful`` reading sends each at once (a crash then keeps the GPUs read before)."""

    def __init__(self, sender: Sender, seq: int, *, careful: bool = False) -> None:
        super().__init__()
        self._sender, self._seq, self._sent = sender, seq, 0
        self._careful = careful
        self._lock = threading.Lock()

    def append(self, sample: Any) -> None:
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
            self._sender.send(("gpu", self._seq, sample))


def _settle_heap() -> None:
    """Keep the garbage collector off the heap of imports, as the dashboard does (see
    gputop.ui._settle_heap): each reading makes thousands of short-lived objects."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(7000, 20, 20)


def _continue_scenario_clock(origin_mono: float) -> None:
    """Make the simulated driver's clock count from the first driver process's start."""
    from gputop.sim import clock

    clock.ORIGIN_MONO = origin_mono


def _stop_demo_processes() -> None:
    # Every cast, not just the installed library's: the demo may still be starting.
    from gputop.sim.actors import stop_all

    stop_all()


def _mend_terminal(config: dict[str, Any]) -> None:
    fd = config.get("guard_fd")
    if fd is None:
        return
    attrs = config.get("termios")
    if attrs is not None:
        import termios

        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
    with contextlib.suppress(OSError):
        os.write(fd, TERMINAL_RESET.encode())
    line = "gputop ended without closing the dashboard; the terminal was put back."
    report = _read_all(config.get("fault_fd"))
    if report:
        first = report.strip().splitlines()[0] if report.strip() else "a crash"
        path = _save_report(report)
        where = f"the report is in {path}" if path else "the report could not be saved"
        line = f"gputop crashed ({first.removeprefix('Fatal Python error: ')}); {where}."
    with contextlib.suppress(OSError):
        os.write(fd, (line + "\r\n").encode("utf-8", "replace"))


def _read_all(fd: int | None) -> str:
    if fd is None:
        return ""
    chunks: list[bytes] = []
    with contextlib.suppress(OSError):
        os.set_blocking(fd, False)
        while len(chunks) < 64:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _save_report(text: str) -> str | None:
    """Write gputop's crash dump under the user's state folder (or the temp folder).

    The name is one anyone can guess, in /tmp perhaps, and this may be root: the file is always
    a new one (O_EXCL, no link followed, mode 0600); something already there gets a later name.
    """
    import tempfile

    from gputop.engine.private_file import UnsafeFile, create_fresh

    stem = time.strftime("crash-%Y%m%d-%H%M%S") + f"-{os.getppid()}"
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    data = text.encode("utf-8", "replace")
    for folder in (Path(state) / "gputop", Path(tempfile.gettempdir())):
        with contextlib.suppress(OSError):
            folder.mkdir(parents=True, exist_ok=True)
        # Taken (planted, or a second crash this second): the next name; else the next folder.
        names = (str(folder / f"{stem}{f'-{n}' if n else ''}.txt") for n in count())
        try:
            path, fd = create_fresh(names)
        except UnsafeFile:
            continue
        try:
            with open(fd, "wb") as out:
                out.write(data)
        except OSError:
            continue
        return path
    return None


def main() -> None:
    """Serve the driver to the gputop process that started this one (see the module docstring)."""
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
    if first is None or first[0] != "start":
        os._exit(0)
    _Child(Sender(replies), dict(first[1])).run()


if __name__ == "__main__":
    main()
