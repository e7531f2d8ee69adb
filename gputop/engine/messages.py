"""What gputop and its driver process say to each other: one frozen dataclass per message.

The conversation (gputop.engine.isolated is the parent, gputop.engine.child the driver process):

parent -> child                 child -> parent
Start(config, guard)            Hello (the driver is open; carries PROTOCOL_VERSION)
                                or OpenFailed(error, message): the driver cannot be used
Read(seq, skip, careful)        Reading(seq, shell, lists) or ReadFailed(seq, why); while a
                                reading is slow (careful: all along), GpuRead(seq, sample) for
                                each GPU that answered
Probes(probes, explain)         (nothing: the next readings carry them)
Pids(n, pids)                   PidsRead(n, memory) or PidsFailed(n, why): the light read
Flush(seq)                      the GPUs of reading seq that answered, its Slow, then
                                Flushed(seq): a one-shot's time is up
Bye()                           (exits at once)
                                Slow(seq, call, gpu, seconds): a call is taking long

Both ends are the same installation, so pickle carries these as they are (gputop.engine.wire);
the version still guards against a driver process of another gputop answering. An error that
crosses is an :class:`OpenError` member, never a class name to look up.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from gputop.engine.model import GpuSample, PidMemory, Snapshot, SystemInfo
from gputop.engine.probes import Probe
from gputop.engine.process_delta import Lists
from gputop.errors import DriverError, DriverMissing, GputopError, UsageError

PROTOCOL_VERSION = 1  # raise on any change to a message below

# The importable "module:function" a driver process runs: the composition module, which knows
# the simulator and the real driver (the engine knows neither).
DEFAULT_BOOT = "gputop.sources:driver_process_main"


@dataclass(frozen=True, slots=True)
class DriverConfig:
    """What the driver process opens: the real driver, or a simulated box."""

    demo: str | None = None
    scenario: str | None = None
    fallback_to_demo: bool = False
    counters: bool = False  # read Snapshot.counters (the exporter's): costs every tick
    # Seconds between reads of the readings only an administrator changes (0: every reading).
    slow_every_s: float = 0.0
    # The simulated clock's origin (time.monotonic()): a restarted driver process continues it.
    clock_origin_mono: float | None = None
    boot: str = DEFAULT_BOOT


@dataclass(frozen=True, slots=True)
class TerminalGuard:
    """What the driver process needs to mend the terminal if gputop dies without closing."""

    tty_fd: int
    termios_attrs: list[Any]  # termios.tcgetattr's list
    fault_fd: int  # read end of gputop's faulthandler pipe


class OpenError(enum.Enum):
    """Why the driver could not be opened; the parent raises the matching error class."""

    MISSING = "missing"
    DRIVER = "driver"
    USAGE = "usage"

    @classmethod
    def of(cls, exc: GputopError) -> OpenError:
        """The member for an error raised while opening the driver."""
        if isinstance(exc, DriverMissing):
            return cls.MISSING
        return cls.DRIVER if isinstance(exc, DriverError) else cls.USAGE

    def error(self, message: str) -> GputopError:
        """The exception to raise in gputop for this failure."""
        return _ERRORS[self](message)


_ERRORS: dict[OpenError, type[GputopError]] = {
    OpenError.MISSING: DriverMissing,
    OpenError.DRIVER: DriverError,
    OpenError.USAGE: UsageError,
}


class Message:
    """Any message on the pipe (the base of both directions' dataclasses)."""

    __slots__ = ()


# -- parent -> child ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Start(Message):
    """The first message: what to open, and the terminal to mend should gputop die."""

    config: DriverConfig
    guard: TerminalGuard | None = None
    version: int = PROTOCOL_VERSION


@dataclass(frozen=True, slots=True)
class Read(Message):
    """Take reading ``seq``, skipping ``skip`` (GPUs a stuck reading hangs on); ``careful``:
    send each GPU as soon as it is read."""

    seq: int
    skip: tuple[int, ...] = ()
    careful: bool = False


@dataclass(frozen=True, slots=True)
class Probes(Message):
    """Read these extra fields from the next reading on (``gputop query``)."""

    probes: tuple[Probe, ...]
    explain: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pids(Message):
    """The light read ``n``: the GPU memory of these PIDs (process lists only)."""

    n: int
    pids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Flush(Message):
    """Send what reading ``seq`` has so far, and the call it is in."""

    seq: int


@dataclass(frozen=True, slots=True)
class Bye(Message):
    """Exit now."""


# -- child -> parent ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Hello(Message):
    """The driver is open."""

    version: int
    simulated: bool
    dev_dir: str
    system: SystemInfo
    gpus: tuple[GpuSample, ...]  # each GPU's identity (index, name, UUID ...)
    pid: int


@dataclass(frozen=True, slots=True)
class OpenFailed(Message):
    """The driver cannot be used; ``message`` says why."""

    error: OpenError
    message: str


@dataclass(frozen=True, slots=True)
class Reading(Message):
    """Reading ``seq``: the snapshot without its process lists, which travel as what changed
    (gputop.engine.process_delta)."""

    seq: int
    shell: Snapshot
    lists: Lists


@dataclass(frozen=True, slots=True)
class ReadFailed(Message):
    """The driver layer failed reading ``seq`` (the driver process serves on)."""

    seq: int
    why: str


@dataclass(frozen=True, slots=True)
class GpuRead(Message):
    """One GPU of reading ``seq``, sent ahead of the whole (a slow or careful reading)."""

    seq: int
    sample: GpuSample


@dataclass(frozen=True, slots=True)
class PidsRead(Message):
    """The light read ``n``'s answer."""

    n: int
    memory: PidMemory


@dataclass(frozen=True, slots=True)
class PidsFailed(Message):
    """The driver layer failed the light read ``n``."""

    n: int
    why: str


@dataclass(frozen=True, slots=True)
class Slow(Message):
    """Reading ``seq`` (0: opening the driver) is in ``call`` on ``gpu`` for ``seconds``."""

    seq: int
    call: str | None
    gpu: int | None
    seconds: float


@dataclass(frozen=True, slots=True)
class Flushed(Message):
    """All of reading ``seq``'s answered GPUs have been sent (after a Flush)."""

    seq: int


Request = Start | Read | Probes | Pids | Flush | Bye
Reply = Hello | OpenFailed | Reading | ReadFailed | GpuRead | PidsRead | PidsFailed | Slow | Flushed
