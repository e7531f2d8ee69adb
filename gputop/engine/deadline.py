"""One reading with a deadline: what one-shot commands and logging loops use instead of waiting.

A source that runs the driver in its own process (gputop.engine.isolated) answers
``snapshot_within(timeout_s)`` with what it has when the time is up: the GPUs that answered, and
for each that did not a GpuSample in state NOT_RESPONDING (``stale_s``: how long it was waited
for), with ``Snapshot.driver_note`` naming the call that hung. Any other source is read on a
daemon thread; if it does not return in time there is nothing to show, so DriverTimeout.
"""

from __future__ import annotations

import threading

from gputop.engine.model import GpuSample, GpuState, Snapshot
from gputop.engine.source import Source
from gputop.errors import DriverTimeout

DEFAULT_TIMEOUT_S = 5.0  # one-shots: long enough for a slow but healthy 8-GPU box


def read_within(source: Source, timeout_s: float) -> Snapshot:
    """A snapshot within ``timeout_s`` seconds (partial, with NOT_RESPONDING GPUs, if need be).

    Raises DriverTimeout when nothing at all came back in time (the driver hung before it could
    even list its GPUs, or a source that cannot report part of a reading).
    """
    within = getattr(source, "snapshot_within", None)
    if within is not None:
        snapshot: Snapshot = within(timeout_s)
        return snapshot
    box: list[Snapshot] = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            box.append(source.snapshot())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failure.append(exc)

    thread = threading.Thread(target=read, name="gputop-deadline", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if failure:
        raise failure[0]
    if not box:
        raise DriverTimeout(f"the NVIDIA driver did not answer within {_seconds(timeout_s)}")
    return box[0]


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
    which = ", ".join(str(g.index) for g in silent)
    noun = "GPU" if len(silent) == 1 else "GPUs"
    why = snapshot.driver_note or "the driver did not answer in time"
    return f"{noun} {which} NOT RESPONDING: {why}"


def _seconds(value: float) -> str:
    return f"{value:g} s"
