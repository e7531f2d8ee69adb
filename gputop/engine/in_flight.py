"""Which NVML call each thread is inside, and which GPU it is reading: recorded by the driver
layer (gputop.engine.nvml) around each call, read by the driver process to name a hung call.

No pynvml here: whoever only reads the registry (gputop.engine.child) loads no driver binding.
A record is a dict store (atomic under the GIL); a reader takes copies.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from threading import get_ident

# Thread ident -> the C symbol it is calling (None: between calls), and -> the GPU it reads.
# The driver layer stores into CALLS directly on its hot path (a context manager costs more).
CALLS: dict[int, str | None] = {}
_GPUS: dict[int, int | None] = {}


def in_flight() -> dict[int, tuple[str | None, int | None]]:
    """Thread ident -> (the NVML C function it is inside, the GPU index it is reading), for
    each thread in a call or a GPU's reading now; None where it is in neither."""
    calls, gpus = dict(CALLS), dict(_GPUS)
    return {
        ident: (calls.get(ident), gpus.get(ident))
        for ident in calls.keys() | gpus.keys()
        if calls.get(ident) is not None or gpus.get(ident) is not None
    }


class calling:  # lower case: used as a function, ``with calling("nvmlX"):``
    """Record that this thread is inside the C function ``name`` (errors pass through).

    A class rather than a generator: it is entered a few dozen times a snapshot.
    """

    __slots__ = ("_ident", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._ident = get_ident()

    def __enter__(self) -> None:
        CALLS[self._ident] = self._name

    def __exit__(self, *exc: object) -> None:
        CALLS[self._ident] = None


@contextlib.contextmanager
def reading_gpu(index: int) -> Iterator[None]:
    """Record that this thread is reading GPU ``index``."""
    ident = get_ident()
    _GPUS[ident] = index
    try:
        yield
    finally:
        _GPUS[ident] = None
