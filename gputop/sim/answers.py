"""How the simulated driver answers at the C boundary: NVML's return codes, ctypes out-arguments."""

from __future__ import annotations

import ctypes
from typing import Any

SUCCESS = 0
ERROR_UNINITIALIZED = 1
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_INSUFFICIENT_SIZE = 7
ERROR_NOT_FOUND = 6
ERROR_GPU_IS_LOST = 15
NOT_AVAILABLE_U32 = 0xFFFFFFFF


# pynvml's structs override __setattr__ in Python only to encode str values; the simulator
# writes numbers, so it sets the ctypes fields directly (about twice as fast).
_set = object.__setattr__


def _target(arg: Any) -> Any:
    """The ctypes object behind ``byref(x)`` (or x itself)."""
    return getattr(arg, "_obj", arg)


def _write_address(out: Any, buffer: Any) -> None:
    """Store ``buffer``'s address in the caller's opaque pointer (a handle, an event set, a
    GPM sample: passed by reference)."""
    pointer = _target(out)
    slot = ctypes.cast(ctypes.addressof(pointer), ctypes.POINTER(ctypes.c_void_p))
    slot[0] = ctypes.addressof(buffer)


def _put(arg: Any, value: int) -> None:
    getattr(arg, "_obj", arg).value = value  # _target() inlined: most calls answer through here


class _Unsupported(Exception):
    """Raised inside a call whose reading the scenario marks unsupported."""
