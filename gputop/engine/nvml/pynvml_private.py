"""Every use of pynvml's private internals, behind a feature test, with a public fallback.

pynvml's list wrappers ask the driver twice (the size, then the list) and turn each entry into
a Python object through a ``__getattribute__`` per field: at 5,000 processes that costs more
than the driver. Here the C function is fetched with pynvml's private
``_nvmlGetFunctionPointer`` and called once on a reused array, whose bytes are unpacked in C
(see ``gputop.engine.nvml.processes``). ``FAST`` says whether this pynvml has that private
with the expected shape; without it the public wrappers give the same bytes, slower.

Kept because ``bench gpu_procs`` measures it (see ListBuffers). Nothing else in gputop names a
private of pynvml.

pynvml itself is imported here first (:func:`import_pynvml`, before the rest of the driver layer:
gputop.engine.nvml imports this module before its reader), without loading ``ctypes.util``.
"""

from __future__ import annotations

import ctypes
import importlib
import inspect
import struct
import sys
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gputop.engine.in_flight import calling


def import_pynvml() -> ModuleType:
    """pynvml, imported without loading ``ctypes.util``, which it imports but never calls here.

    ``ctypes.util`` brings subprocess, tempfile, shutil, bz2, lzma and random (3.4 MiB in the
    driver process, which runs for as long as gputop does). pynvml does ``from ctypes.util import
    find_library`` at import and never calls it (read in nvidia-ml-py 13.615: nvmlInit loads
    ``CDLL("libnvidia-ml.so.1")`` on Linux, fixed paths on Windows). So pynvml is imported with
    a stand-in ``ctypes.util`` whose ``find_library`` (and any other name) imports the real
    module when used: a pynvml that does call it still works. The stand-in is gone again once
    pynvml is loaded, so every later ``import ctypes.util`` gets the real module. When pynvml or
    ``ctypes.util`` is already loaded, or the import fails with the stand-in, this is a plain
    import.
    """
    if "pynvml" in sys.modules or "ctypes.util" in sys.modules:
        return importlib.import_module("pynvml")
    stand_in = _CtypesUtilStandIn("ctypes.util")
    sys.modules["ctypes.util"] = stand_in
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        _drop(stand_in)
        return importlib.import_module("pynvml")
    finally:
        _drop(stand_in)


class _CtypesUtilStandIn(ModuleType):
    """``ctypes.util`` until someone uses it: then the real module, imported on first use."""

    def find_library(self, name: str) -> str | None:
        """The real ``ctypes.util.find_library``."""
        found: str | None = _real_ctypes_util(self).find_library(name)
        return found

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # the import system's probes (__path__...): not a use
            raise AttributeError(name)
        return getattr(_real_ctypes_util(self), name)


def _real_ctypes_util(stand_in: ModuleType) -> ModuleType:
    # Used while pynvml's import is not over: import_module would return the stand-in.
    _drop(stand_in)
    return importlib.import_module("ctypes.util")


def _drop(stand_in: ModuleType) -> None:
    if sys.modules.get("ctypes.util") is stand_in:
        del sys.modules["ctypes.util"]


if TYPE_CHECKING:
    import pynvml
else:
    pynvml = import_pynvml()


def private_api_present() -> bool:
    """pynvml's ``_nvmlGetFunctionPointer(name)`` and its symbol cache exist as expected."""
    fn = pynvml.__dict__.get("_nvmlGetFunctionPointer")
    cache = pynvml.__dict__.get("_nvmlGetFunctionPointer_cache")
    if not callable(fn) or not isinstance(cache, dict):
        return False
    try:
        return list(inspect.signature(fn).parameters) == ["name"]
    except (TypeError, ValueError):
        return False


FAST = private_api_present()  # a test or a benchmark may turn it off to measure the public path


def function(name: str) -> Any:
    """The driver's C function ``name`` (NVMLError FUNCTION_NOT_FOUND when it has none)."""
    return pynvml._nvmlGetFunctionPointer(name)


def forget_symbols() -> None:
    """Drop pynvml's resolved C functions (they belong to a library that was replaced)."""
    if FAST:
        pynvml._nvmlGetFunctionPointer_cache.clear()


class ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, for drivers older than the _v2 call."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class ProcessInfoV2(ctypes.Structure):
    """nvmlProcessInfo_t of the _v2 and _v3 calls.

    The layout of pynvml's c_nvmlProcessInfo_v2_t (which it uses for both), as a plain Structure:
    pynvml's structures run a Python ``__getattribute__`` on every field read.
    """

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class ProcessUtilSample(ctypes.Structure):
    """nvmlProcessUtilizationSample_t."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("timeStamp", ctypes.c_ulonglong),
        ("smUtil", ctypes.c_uint),
        ("memUtil", ctypes.c_uint),
        ("encUtil", ctypes.c_uint),
        ("decUtil", ctypes.c_uint),
    ]


# The structs' layouts for struct.iter_unpack (native alignment, as ctypes lays them out).
UNPACK_V1 = struct.Struct("@IQ")
UNPACK_V2 = struct.Struct("@IQII")
UNPACK_UTIL = struct.Struct("@IQIIII")
assert UNPACK_V1.size == ctypes.sizeof(ProcessInfoV1)
assert UNPACK_V2.size == ctypes.sizeof(ProcessInfoV2)
assert UNPACK_UTIL.size == ctypes.sizeof(ProcessUtilSample)
NO_BYTES = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE in a 64-bit field (Windows WDDM, say)


class ListBuffers:
    """Reusable arrays for NVML's list calls, which fill a caller's array of ``count`` slots.

    pynvml's wrappers ask for the size first and then for the list (two driver calls), and turn
    each entry into a Python object. Offering an array that is usually big enough makes one call,
    and the entries are read straight from ctypes. Not thread-safe: one per reader.
    Measured (bench gpu_procs, 5,000 steady processes): see the package's note.
    """

    START = 64
    MAX = 16384  # a driver that keeps asking for more must not grow the arrays without end

    def __init__(self) -> None:
        self._arrays: dict[type[ctypes.Structure], Any] = {}

    def _array(self, struct: type[ctypes.Structure], at_least: int = 0) -> Any:
        array = self._arrays.get(struct)
        if array is None or len(array) < min(at_least, self.MAX):
            size = min(max(self.START, at_least), self.MAX)
            array = self._arrays[struct] = (struct * size)()
        return array

    def _grown(self, struct: type[ctypes.Structure], array: Any, asked: int) -> Any:
        """A bigger array after INSUFFICIENT_SIZE (some drivers do not say how big)."""
        if len(array) >= self.MAX:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)
        return self._array(struct, max(asked, len(array)) * 2 + 5)

    def call_list(self, fn: Any, h: Any, struct: type[ctypes.Structure]) -> bytes:
        """``fn(handle, &count, array)`` (a C function of the driver): the filled entries'
        bytes."""
        with calling(fn.__name__):
            return self._fill(struct, lambda array, count: fn(h, ctypes.byref(count), array))

    def running_processes(self, symbol: str, h: Any, struct: type[ctypes.Structure]) -> bytes:
        """The C array of nvmlDeviceGet{Compute,Graphics}RunningProcesses{,_v2,_v3}
        (``symbol``) as bytes; NVMLError as the driver answers."""
        if FAST:
            return self.call_list(function(symbol), h, struct)
        wrapper = pynvml.__dict__.get(symbol)
        if wrapper is None or struct is not ProcessInfoV2:  # pynvml wraps no v1 call
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        with calling(symbol):
            listed = wrapper(h)
        return b"".join(
            UNPACK_V2.pack(
                p.pid,
                NO_BYTES if p.usedGpuMemory is None else p.usedGpuMemory,
                p.gpuInstanceId,
                p.computeInstanceId,
            )
            for p in listed
        )

    def process_utilization(self, h: Any, since_us: int) -> bytes:
        """nvmlDeviceGetProcessUtilization's samples newer than ``since_us``."""
        if not FAST:
            return _public_process_utilization(h, since_us)
        fn = function("nvmlDeviceGetProcessUtilization")
        stamp = ctypes.c_ulonglong(since_us)
        with calling("nvmlDeviceGetProcessUtilization"):
            return self._fill(
                ProcessUtilSample, lambda array, count: fn(h, array, ctypes.byref(count), stamp)
            )

    def _fill(
        self, struct: type[ctypes.Structure], call: Callable[[Any, ctypes.c_uint], int]
    ) -> bytes:
        """``call(array, count)`` with an array of ``count`` slots, grown until the list fits:
        the filled slots' bytes."""
        array = self._array(struct)
        for _ in range(3):  # the list may grow between calls
            count = ctypes.c_uint(len(array))
            ret = call(array, count)
            if ret == pynvml.NVML_SUCCESS:
                filled = min(count.value, len(array))  # a driver may not say more than it has
                return ctypes.string_at(array, filled * ctypes.sizeof(struct))
            if ret != pynvml.NVML_ERROR_INSUFFICIENT_SIZE:
                raise pynvml.NVMLError(ret)
            array = self._grown(struct, array, count.value)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INSUFFICIENT_SIZE)


def _public_process_utilization(h: Any, since_us: int) -> bytes:
    """pynvml's public wrapper, its samples packed as the driver's array."""
    with calling("nvmlDeviceGetProcessUtilization"):
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(h, since_us)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_SUCCESS:  # the wrapper's "no sample at all"
                return b""
            raise
    return b"".join(
        UNPACK_UTIL.pack(s.pid, s.timeStamp, s.smUtil, s.memUtil, s.encUtil, s.decUtil)
        for s in samples
    )


class FieldValue(ctypes.Structure):
    """nvmlFieldValue_t as a plain Structure (pynvml's runs Python code on every member read)."""

    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


def field_request(fields: list[tuple[int, int]]) -> Any:
    """An array of (field id, scope id) requests for nvmlDeviceGetFieldValues, to be reused."""
    array = (FieldValue * len(fields))()
    for slot, (field_id, scope) in zip(array, fields, strict=True):
        slot.fieldId, slot.scopeId = field_id, scope
    return array


def field_values(h: Any, request: Any) -> Any:
    """nvmlDeviceGetFieldValues on a reused request array: the filled values."""
    if not FAST:
        with calling("nvmlDeviceGetFieldValues"):
            return pynvml.nvmlDeviceGetFieldValues(h, [(v.fieldId, v.scopeId) for v in request])
    fn = function("nvmlDeviceGetFieldValues")
    with calling("nvmlDeviceGetFieldValues"):
        ret = fn(h, ctypes.c_int32(len(request)), ctypes.byref(request))
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    return request
