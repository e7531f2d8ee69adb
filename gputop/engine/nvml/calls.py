"""The error policy of every NVML call, and which call each thread is in.

The one rule: every NVML error but NVML_ERROR_GPU_IS_LOST blanks only the field its call was
reading (None: N/A), whatever its code (a code NVML adds tomorrow included); GPU_IS_LOST raises
:class:`Lost`, which makes the whole GPU a GpuSample in state LOST. ``read``, ``first`` and
``soft`` apply it.

Each of them also records which C function the thread is inside (gputop.engine.in_flight): the
driver process names a hung call from that, without reading stacks; two dict stores a call.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import get_ident
from typing import Any, TypeVar

import pynvml

from gputop.engine.in_flight import CALLS
from gputop.engine.sanitize import clean, clean_optional

T = TypeVar("T")

# What a missing binding, constant or struct member raises: a pynvml older than the field.
MISSING = (AttributeError, TypeError, KeyError, IndexError)
# The member of an NVML field value's union that holds it, by its valueType (nvmlValueType_t).
VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")

# pynvml wrapper -> the C function it calls, where the names differ (nvidia-ml-py 13)
_RENAMED = {
    "nvmlDeviceGetCount": "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex": "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetPciInfo": "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetAttributes": "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetGpuInstanceProfileInfo": "nvmlDeviceGetGpuInstanceProfileInfoV",
}

_SYMBOLS: dict[Callable[..., Any], str] = {}  # wrapper -> symbol, as met: a lookup a call


class Lost(Exception):
    """The GPU answered NVML_ERROR_GPU_IS_LOST."""


def symbol(call: Callable[..., Any]) -> str:
    """The C function a pynvml wrapper calls: pynvml names its wrappers after them, but for
    the few whose C function has a version suffix."""
    name = _SYMBOLS.get(call)
    if name is None:
        name = _SYMBOLS[call] = _RENAMED.get(call.__name__, call.__name__)
    return name


def read(call: Callable[..., T], *args: Any) -> T | None:
    """Run one NVML call: its answer; None when it fails, whatever the code (one field's
    failure is never the GPU's); a lost GPU -> Lost."""
    ident = get_ident()
    CALLS[ident] = _SYMBOLS.get(call) or symbol(call)
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        raise_if_lost(exc)
        return None
    finally:
        CALLS[ident] = None


def is_lost(exc: pynvml.NVMLError) -> bool:
    """The one error that is the GPU's rather than the call's: NVML_ERROR_GPU_IS_LOST."""
    return bool(exc.value == pynvml.NVML_ERROR_GPU_IS_LOST)


def raise_if_lost(exc: pynvml.NVMLError) -> None:
    """Lost for a lost GPU; any other error is the call's alone."""
    if is_lost(exc):
        raise Lost from None


def first(*calls: tuple[str, Callable[[], T]]) -> T | None:
    """The first of (C symbol, call) that the driver has (FUNCTION_NOT_FOUND, or a pynvml
    without the wrapper, moves on to the next); None when none has it or the call fails (as
    ``read``)."""
    ident = get_ident()
    try:
        for name, call in calls:
            CALLS[ident] = name
            try:
                return call()
            except pynvml.NVMLError as exc:
                raise_if_lost(exc)
                if exc.value != pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                    return None
            except AttributeError:  # an older pynvml without this wrapper
                continue
        return None
    finally:
        CALLS[ident] = None


def soft(call: Callable[..., T], *args: Any) -> T | None:
    """An optional call's answer (MIG, counters), or None whatever the driver (or an older
    pynvml) says, but for a lost GPU: an optional part must never cost the GPU its readings."""
    ident = get_ident()
    CALLS[ident] = _SYMBOLS.get(call) or symbol(call)
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        raise_if_lost(exc)
        return None
    except MISSING:  # a binding without the call, or a struct without the member
        return None
    finally:
        CALLS[ident] = None


def error_text(code: int) -> str:
    """An NVML return code as the driver words it, clean (the driver's text is untrusted)."""
    return clean(f"{pynvml.NVMLError(code)} (code {code})")


def text(value: str | bytes | None) -> str | None:
    """A driver string as clean text (the driver can lie, and a board's name reaches labels).

    Bindings disagree on str vs bytes for names, UUIDs and versions.
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return clean_optional(value)
