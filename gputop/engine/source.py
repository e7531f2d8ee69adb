"""The Source contract: every capability a source of snapshots has, stated, never probed.

Callers call these members; none asks ``getattr``/``hasattr`` whether a source has one. Two kinds
of source implement it:

- the driver process (gputop.engine.isolated.IsolatedSource): its own restarts and notes, and a
  ``snapshot_within`` that can answer with part of a reading (``partial_readings``);
- a source read in the caller's process (NvmlSource, test fakes, a user's own source): subclass
  :class:`SourceBase`, write ``snapshot()``, set ``simulated`` and ``dev_dir``; the base answers
  the rest as an in-process source must.

Which source to open (real or simulated, in a driver process or not) is decided by
gputop.sources, the composition module; the engine parses no arguments.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable
from typing import Protocol

from gputop.engine.model import PidMemory, Snapshot, pid_memory_of
from gputop.engine.probes import Probe


class Source(Protocol):
    """Anything that can read Snapshots of the box; see the module docstring."""

    @property
    def simulated(self) -> bool:
        """True when the data comes from gputop's simulated driver."""
        ...

    @property
    def dev_dir(self) -> str:
        """The folder of the box's /dev/nvidia* files (a simulated box has its own)."""
        ...

    @property
    def driver_note(self) -> str | None:
        """Why the driver is not answering or was restarted, in one line; None when fine."""
        ...

    @property
    def restarts(self) -> int:
        """Driver-process restarts so far (0 for a source read in the caller's process)."""
        ...

    @property
    def partial_readings(self) -> bool:
        """True when ``snapshot_within`` can answer with part of a reading: the GPUs that did not
        answer in time in state NOT_RESPONDING. False: it reads a whole snapshot or nothing."""
        ...

    def wait_ready(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the driver to open; False while it is still opening."""
        ...

    def snapshot(self) -> Snapshot:
        """A whole reading, however long it takes."""
        ...

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        """A reading within ``timeout_s`` where ``partial_readings`` (else a whole ``snapshot()``);
        raises DriverTimeout when nothing came in time."""
        ...

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        """The GPU memory ``pids`` use on each GPU: the process lists only, no full snapshot."""
        ...

    def request_probes(self, probes: Iterable[Probe], explain: Iterable[str] = ()) -> None:
        """Read these extra fields (``gputop query``) into each GpuSample from the next reading
        on; for each attribute in ``explain`` that is None, record why."""
        ...

    def close(self) -> None:
        """Release the driver (or stop its process)."""
        ...


class SourceBase(abc.ABC):
    """A Source read in the caller's process: write ``snapshot()``, set ``simulated``/``dev_dir``.

    The rest is what such a source is: no driver process to wait for, restart or describe, no
    part of a reading (callers that need a deadline read it through
    gputop.engine.deadline.Readings, which runs it on a thread), the light read worked out from a
    whole snapshot, and no extra query fields (they stay N/A).
    """

    simulated: bool
    dev_dir: str
    driver_note: str | None = None
    restarts: int = 0
    partial_readings: bool = False

    @abc.abstractmethod
    def snapshot(self) -> Snapshot:
        """A whole reading of the box."""

    def wait_ready(self, timeout_s: float) -> bool:
        """Opened when it was made (or it raised then): always ready."""
        return True

    def snapshot_within(self, timeout_s: float) -> Snapshot:
        """A whole ``snapshot()``: an in-process read cannot be given up half-way."""
        return self.snapshot()

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        """Worked out from a whole snapshot (a source with a lighter read overrides this)."""
        return pid_memory_of(self.snapshot(), pids)

    def request_probes(self, probes: Iterable[Probe], explain: Iterable[str] = ()) -> None:
        """No extra fields: a query's extra columns stay N/A."""
        return None  # a deliberate no-op: an in-process source reads no extra fields

    def close(self) -> None:
        """Nothing to release."""
        return None  # a deliberate no-op: subclasses that hold the driver release it
