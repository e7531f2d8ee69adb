"""The Python API: ``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``.

One driver connection is opened on first use and shared (closed at exit). By default the driver
runs in a process of its own (gputop.engine.isolated), as for the command line: a driver call
that crashes (SIGSEGV in libnvidia-ml) or hangs becomes an exception here, never a dead
interpreter or Jupyter kernel, and the next call reads again once gputop has restarted it.
``use_driver(in_process=True)`` calls the driver from this process instead (no process to spawn;
a crash in the driver then ends this interpreter); GPUTOP_IN_PROCESS=1 does the same for every
gputop in the environment. ``use_demo()`` (or the ``GPUTOP_DEMO`` environment variable) switches
to the simulated driver, from the next read on, whenever it is called (or set); each such switch
bumps :func:`generation`. No driver at all is :class:`gputop.DriverMissing`, its line worded
for Python code (``call gputop.use_demo() ...``).

Every read has a time limit: ``timeout_s`` (default :data:`DEFAULT_TIMEOUT_S`, which includes
starting the driver process on the first call). The API hands out whole readings only: when a
GPU did not answer in time it raises :class:`gputop.DriverTimeout`, when the driver process
crashed :class:`gputop.DriverCrashed` (both :class:`gputop.DriverError`, a
:class:`gputop.GputopError`), each with one line saying what happened.

Every function also takes ``source=`` to read from a Source of your own: subclass
:class:`gputop.SourceBase` and write its ``snapshot()``; it is read in this process, on a thread,
within the same time limit. No Textual here; pynvml loads on first use only (in-process only).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from gputop import units
from gputop.engine.deadline import DEFAULT_TIMEOUT_S, Readings, gpu_indices, pid_memory_within
from gputop.engine.model import GpuState, PidMemory, Snapshot
from gputop.engine.sanitize import clean
from gputop.engine.source import Source
from gputop.errors import DriverCrashed, DriverMissing, DriverTimeout

_lock = threading.RLock()  # guards the shared source and the readers below
_shared: Source | None = None
_demo: str | None = None
_in_process = False
# One reader per source, kept: a source that is still stuck in a read is waited on again, not
# read anew on yet another thread (deadline.Readings). The shared source's, and the last
# caller's own source's.
_readers: dict[int, Readings] = {}
_generation = 0  # bumped by use_demo()/use_driver(): a cached probe result is stale when it moves
DEMO_ENV = "GPUTOP_DEMO"  # as gputop.sources.DEMO_ENV (not imported: it stays unloaded till used)
# GPUTOP_DEMO as the shared source was opened with: set (or changed) later, it takes effect at
# the next read as use_demo() would, whatever was read before.
_env_demo = os.environ.get(DEMO_ENV)
# What the driver layer says of a missing driver is command-line advice; Python code gets this.
_CLI_ADVICE = ". Try: gputop --demo"
PYTHON_ADVICE = "call gputop.use_demo() to try gputop on simulated GPUs"


def generation() -> int:
    """A counter that every :func:`use_demo` and :func:`use_driver` call bumps (and a change of
    the GPUTOP_DEMO environment variable).

    A caller that cached something read through the shared connection (the notebook's "no GPU
    here") reads again when it changes.
    """
    _notice_env()
    return _generation


def _notice_env() -> None:
    """GPUTOP_DEMO changed since the shared source was opened: open it anew at the next read."""
    global _env_demo, _generation
    value = os.environ.get(DEMO_ENV)
    if value == _env_demo:
        return
    with _lock:
        if value != _env_demo:
            _close_shared()
            _env_demo = value
            _generation += 1


@contextmanager
def _for_python() -> Iterator[None]:
    """Reword a missing driver's command-line advice (``Try: gputop --demo``) for Python code."""
    try:
        yield
    except DriverMissing as exc:
        text = str(exc).removesuffix(_CLI_ADVICE).removesuffix(".")
        raise DriverMissing(f"{text}: {PYTHON_ADVICE}") from None


def use_demo(name: str | None = "demo") -> None:
    """Read from the simulated driver with this shipped scenario (demo, dgx, faults, flaky,
    mig, sick) or file.

    ``use_demo(None)`` goes back to the real driver (or GPUTOP_DEMO's scenario, when set).
    Takes effect on the next read, whatever was read before.
    """
    global _demo, _generation, _env_demo
    with _lock:
        _close_shared()
        _demo = name
        _env_demo = os.environ.get(DEMO_ENV)
        _generation += 1


def use_driver(*, in_process: bool = False) -> None:
    """Where the shared connection calls the driver, from the next call on.

    ``in_process=False`` (the default): in a driver process of its own; a crash there is a
    :class:`gputop.DriverCrashed` here. ``in_process=True``: in this process (no process to
    start, slightly cheaper reads), but a crash in libnvidia-ml ends this interpreter.
    """
    global _in_process, _generation, _env_demo
    with _lock:
        _close_shared()
        _in_process = in_process
        _env_demo = os.environ.get(DEMO_ENV)
        _generation += 1


def _close_shared() -> None:
    global _shared
    with _lock:
        if _shared is not None:
            _readers.pop(id(_shared), None)
            _shared.close()
            _shared = None


def _source(source: Source | None) -> Source:
    global _shared
    if source is not None:
        return source
    _notice_env()
    with _lock:
        if _shared is None:
            from gputop.sources import open_source  # the simulator or pynvml: on first use only

            demo, scenario = _demo, None
            if demo is not None and os.path.exists(demo):
                demo, scenario = None, demo
            _shared = open_source(demo=demo, scenario=scenario, isolated=not _in_process)
        return _shared


def _reader(src: Source) -> Readings:
    """The kept reader of ``src`` (lock held): the shared source's, or the caller's source's."""
    reader = _readers.get(id(src))
    if reader is None or reader.source is not src:
        if len(_readers) > 1:  # the shared source's, and the newest caller's source's only
            keep = {id(_shared)} if _shared is not None else set()
            for key in [k for k in _readers if k not in keep]:
                del _readers[key]
        reader = _readers[id(src)] = Readings(src)
    return reader


def read_snapshot(source: Source | None, timeout_s: float | None = DEFAULT_TIMEOUT_S) -> Snapshot:
    """One whole driver-level snapshot (GPUs and their NVML process lists) within ``timeout_s``.

    Raises DriverTimeout when a GPU (or the driver) did not answer in time, DriverCrashed when
    the driver process crashed; the driver's own errors (DriverMissing...) as they come.
    ``timeout_s=None``: no time limit, read on the calling thread (a daemon thread of the
    caller's, such as track()'s sampler, which a hung driver may hold).
    """
    with _for_python():
        src = _source(source)
        if timeout_s is None:
            with _lock:
                return whole(src.snapshot())
        deadline = time.monotonic() + timeout_s
        if not _lock.acquire(timeout=timeout_s):  # another thread is waiting on a stuck driver
            raise _busy(timeout_s)
        try:
            snap = _reader(src).read(max(0.0, deadline - time.monotonic()))
        finally:
            _lock.release()
    return whole(snap)


def _busy(timeout_s: float) -> DriverTimeout:
    return DriverTimeout(f"the NVIDIA driver did not answer within {timeout_s:g} s (busy)")


def whole(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` if every GPU in it answered; else the exception that says why, in one line.

    A crash of the driver process (its note begins with DriverCrashed.NOTE) is DriverCrashed; a
    GPU that did not answer in time, or a reading kept from before a crash (``stale_s``), is
    DriverTimeout.
    """
    late = [g for g in snapshot.gpus if g.state is GpuState.NOT_RESPONDING or g.stale_s is not None]
    if not late:
        return snapshot
    note = clean(snapshot.driver_note or "")
    if note.startswith(DriverCrashed.NOTE):
        raise DriverCrashed(f"{note}: the driver process is being restarted, call again")
    why = note or next((clean(g.error) for g in late if g.error), "the driver did not answer")
    raise DriverTimeout(f"{gpu_indices(g.index for g in late)} NOT RESPONDING: {why}")


def read_pids(
    source: Source | None, pids: Iterable[int], timeout_s: float | None = DEFAULT_TIMEOUT_S
) -> PidMemory:
    """The GPU memory of ``pids`` per GPU within ``timeout_s``: the light read (the driver's
    process lists only). DriverTimeout when late, DriverCrashed if the driver process died,
    DriverError if the driver failed. ``timeout_s=None``: as for :func:`read_snapshot`."""
    with _for_python():
        src = _source(source)
        if timeout_s is None:
            with _lock:
                return src.pid_memory(pids)
        deadline = time.monotonic() + timeout_s
        if not _lock.acquire(timeout=timeout_s):
            raise _busy(timeout_s)
        try:
            return pid_memory_within(src, pids, max(0.0, deadline - time.monotonic()))
        finally:
            _lock.release()


def snapshot(*, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> Snapshot:
    """A complete, typed Snapshot with processes joined to the OS view (as ``gputop --json``;
    ``counters``, the exporter's energy/Xid/NVLink readings, only from a source opened with
    ``gputop.sources.open_source(counters=True)``)."""
    from gputop.engine.enrich import enrich  # psutil only when processes are wanted
    from gputop.engine.holders import scan_holders
    from gputop.engine.verdicts import confirm_blocked

    with _for_python():
        src = _source(source)
    read = read_snapshot(src, timeout_s)
    holders = scan_holders(src.dev_dir)
    # A process in state D is called unkillable only if it is still there a moment later.
    return confirm_blocked(lambda: enrich(read, holders=holders))


def devices(
    *, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[dict[str, Any]]:
    """Every GPU as a dict with the keys of ``gputop --json`` (units in the key names)."""
    from gputop.commands.json_out import gpu_to_dict

    return [gpu_to_dict(g) for g in read_snapshot(source, timeout_s).gpus]


def processes(
    *, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[dict[str, Any]]:
    """Every GPU-related process (user, command, state, memory) as ``gputop --json`` has them."""
    from gputop.commands.json_out import process_row_to_dict

    return [process_row_to_dict(r) for r in snapshot(source=source, timeout_s=timeout_s).processes]


def show(
    file: IO[str] | None = None,
    *,
    source: Source | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> None:
    """Print a compact table of GPU and memory utilisation, like GPUtil's showUtilization()."""
    out = file if file is not None else sys.stdout
    lines = [f"| {'ID':>2} | {'GPU':>4} | {'MEM':>4} |", "-" * 20]
    for g in read_snapshot(source, timeout_s).gpus:
        mem = None
        if g.memory_used_bytes is not None and g.memory_total_bytes:
            mem = 100 * g.memory_used_bytes / g.memory_total_bytes
        gpu = units.percent(g.utilization_gpu_percent)
        lines.append(f"| {g.index:>2} | {gpu:>4} | {units.percent(mem):>4} |")
    out.write("\n".join(lines) + "\n")


atexit.register(_close_shared)
