"""A simulated libnvidia-ml: stands where the C library would, so the real pynvml runs on it.

pynvml resolves every call with ``getattr(nvmlLib, "nvmlDeviceGetX")`` and passes ctypes objects
(``byref(c_uint())``, string buffers, struct arrays). This object answers those calls from a
Scenario and fills the very ctypes objects pynvml created. Unknown functions raise AttributeError,
which pynvml turns into NVML_ERROR_FUNCTION_NOT_FOUND, as with an old driver.
"""

from __future__ import annotations

import ctypes
import math
import os
import signal
import struct
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from gputop.sim.actors import Cast
from gputop.sim.answers import (
    ERROR_GPU_IS_LOST,
    ERROR_INSUFFICIENT_SIZE,
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    ERROR_UNINITIALIZED,
    NOT_AVAILABLE_U32,
    SUCCESS,
    _put,
    _set,
    _target,
    _Unsupported,
)
from gputop.sim.clock import Clock, ElapsedClock
from gputop.sim.counters import CounterCalls
from gputop.sim.device_calls import DeviceCalls
from gputop.sim.devices import make_private, remove
from gputop.sim.mig import SimMigDevice
from gputop.sim.mig_calls import MigCalls
from gputop.sim.query_calls import QueryCalls
from gputop.sim.scenario import CallFault, Scenario, SimGpu, SimProcess, Wave
from gputop.units import MiB

INIT_ERRORS = {
    "driver_not_loaded": 9,
    "no_permission": 4,
    "lib_rm_version_mismatch": 18,
    "unknown": 999,
}
ERROR_STRINGS = {
    0: b"Success",
    1: b"Uninitialized",
    2: b"Invalid Argument",
    3: b"Not Supported",
    4: b"Insufficient Permissions",
    6: b"Not Found",
    7: b"Insufficient Size",
    9: b"Driver Not Loaded",
    13: b"Function Not Found",
    15: b"GPU is lost",
    18: b"RM has detected an NVML/RM version mismatch.",
    999: b"Unknown Error",
}


class _Fn:
    """A 'C function': callable, and accepts pynvml setting ``restype`` on it."""

    __slots__ = ("_any_time", "_impl", "_lib", "_name", "_no_device", "restype")

    def __init__(self, lib: SimLibrary, name: str, impl: Callable[..., Any]) -> None:
        self._lib, self._name, self._impl = lib, name, impl
        self._any_time = name in _ANY_TIME  # answered before init too, and never gated by a GPU
        self._no_device = name in _NO_DEVICE  # its first argument is a handle, not a device's
        self.restype: Any = None

    @property
    def __name__(self) -> str:  # as a ctypes function has: the C symbol
        return self._name

    def __call__(self, *args: Any) -> Any:
        # The whole dispatch is inlined here: pynvml makes a couple of hundred calls a snapshot.
        lib, name = self._lib, self._name
        with lib._lock:
            lib.calls[name] += 1
        if name in lib._faults:
            lib._fault(name, args)
        if lib.blocked:
            gate = lib.blocked.get(name)
            if gate is not None:
                gate.wait()
        if self._any_time:
            return self._impl(*args)
        if lib._initialized <= 0:
            return ERROR_UNINITIALIZED
        if self._no_device or not (args and isinstance(args[0], ctypes._Pointer)):
            return self._impl(*args)
        handle = args[0]  # a device handle
        known = lib._handle_index.get(id(handle))
        index = known[1] if known is not None and known[0] is handle else lib._index(handle)
        if index is None:
            return lib._mig_call(name, handle, args)
        gpu = lib._scenario.gpus[index]
        if gpu.slow_calls:
            delay = gpu.slow_calls.get(name)
            if delay:
                time.sleep(delay)
        if gpu.lost_after_s is not None and lib.clock.now() >= gpu.lost_after_s:
            return ERROR_GPU_IS_LOST
        if name in gpu.unsupported:
            return ERROR_NOT_SUPPORTED
        if gpu.call_errors and name in gpu.call_errors:
            return gpu.call_errors[name]
        try:
            return self._impl(gpu, *args[1:])
        except _Unsupported:
            return ERROR_NOT_SUPPORTED


_ANY_TIME = frozenset({"nvmlInitWithFlags", "nvmlErrorString"})
# Calls whose first argument is an event set or a GPM sample (an opaque pointer, as a device is).
_NO_DEVICE = frozenset({"nvmlEventSetWait_v2", "nvmlEventSetFree", "nvmlGpmSampleFree"})


class SimLibrary(DeviceCalls, QueryCalls, MigCalls, CounterCalls):
    """The simulated NVML library for one Scenario."""

    def __init__(self, scenario: Scenario, clock: Clock | None = None) -> None:
        self.scenario = scenario  # also works out what is derived from it, see the setter
        self.clock: Clock = clock or ElapsedClock()
        self.calls: Counter[str] = Counter()  # every NVML call answered, by name
        self._lock = threading.Lock()
        self._initialized = 0
        # One small buffer per GPU: its address is the opaque device handle.
        self._handle_bufs = [ctypes.create_string_buffer(8) for _ in scenario.gpus]
        self._by_address = {ctypes.addressof(b): i for i, b in enumerate(self._handle_bufs)}
        self._handle_index: dict[int, tuple[Any, int]] = {}
        self._init_mig()  # MIG device handles, made when first asked for
        self._init_counters()  # event sets and GPM samples
        self.blocked: dict[str, threading.Event] = {}  # tests: a call that waits until set()
        self._dev_dir: str | None = None  # its own device folder, made on first use
        self._own_dev_dir = False  # made here (not the actors'): removed by release()
        self.cast: Cast | None = None  # the real actor processes, when started
        self._zombie_actors: set[int] = set()

    @property
    def dev_dir(self) -> str:
        """The folder of this box's device files: its own private one (the demo's: its actors'),
        never the real /dev, so no process of the real box is ever taken for a GPU's holder."""
        with self._lock:
            if self._dev_dir is None:
                self._dev_dir = make_private(len(self._scenario.gpus))
                self._own_dev_dir = True
            return self._dev_dir

    def release(self) -> None:
        """Remove the device folder made for this box (the actors' goes with their cast)."""
        with self._lock:
            if self._dev_dir is not None and self._own_dev_dir:
                remove(self._dev_dir)
            self._dev_dir, self._own_dev_dir = None, False

    @property
    def scenario(self) -> Scenario:
        """The simulated box."""
        return self._scenario

    @scenario.setter
    def scenario(self, scenario: Scenario) -> None:
        self._scenario = scenario
        self._faults: dict[str, tuple[CallFault, ...]] = {}
        for fault in scenario.faults:
            self._faults[fault.call] = (*self._faults.get(fault.call, ()), fault)
        # Worked out once rather than on every call, keyed by GPU object identity (comparing
        # the frozen dataclasses by value, as tuple.index did, cost more than the call itself).
        self._positions = {id(g): i for i, g in enumerate(scenario.gpus)}
        self._seeds = {id(g): scenario.seed + i * 7919 for i, g in enumerate(scenario.gpus)}
        self._kinds = {id(g): _processes_by_kind(g) for g in scenario.gpus}
        self._sums: dict[tuple[int, str], tuple[int, float]] = {}  # counters' running sums
        self._nvlink_memo: dict[tuple[int, str], tuple[float, int, float]] = {}
        # (GPU, list, MIG device) -> the processes and their packed list, while it cannot move
        self._packed: dict[tuple[int, str, int], tuple[list[SimProcess], bytes]] = {}
        # A GPU's processes' memory when none of it moves, and the processes it is the sum of.
        self._fixed_used: dict[int, tuple[list[SimProcess], int]] = {}
        self._busy_cache: dict[int, tuple[list[SimProcess], list[SimProcess]]] = {}

    # -- plumbing -------------------------------------------------------------------------
    def __getattr__(self, name: str) -> _Fn:
        if not name.startswith("nvml"):
            raise AttributeError(name)
        impl = getattr(type(self), "_" + name, None)
        if impl is None or not self._has(name):
            raise AttributeError(name)
        fn = _Fn(self, name, impl.__get__(self))
        return fn

    def _has(self, name: str) -> bool:
        api = self.scenario.process_api
        if name.endswith("RunningProcesses_v3"):
            return api == "v3"
        if name.endswith("RunningProcesses_v2"):
            return api in ("v2", "v3")
        return True

    def _index(self, handle: Any) -> int | None:
        # pynvml passes the same handle objects again and again; ctypes.cast is the slow part.
        known = self._handle_index.get(id(handle))
        if known is not None and known[0] is handle:
            return known[1]
        address = ctypes.cast(handle, ctypes.c_void_p).value
        index = self._by_address.get(address or 0)
        if index is not None:
            if len(self._handle_index) > 4096:
                self._handle_index.clear()
            self._handle_index[id(handle)] = (handle, index)
        return index

    def _mig_call(self, name: str, handle: Any, args: tuple[Any, ...]) -> int:
        """A call on a MIG device handle: its GPU's gates, then the call's ``_mig_`` answer.

        Slow calls and a lost GPU are the GPU's; ``unsupported`` and ``call_errors`` name the
        GPU's own calls, ``mig_call_errors`` those made on its MIG devices.
        """
        found = self._mig_of(handle)
        if found is None:
            return ERROR_INVALID_ARGUMENT
        gpu = self._scenario.gpus[found[0]]
        if found[1] >= len(gpu.mig_devices) or not gpu.mig:
            return ERROR_INVALID_ARGUMENT  # a handle of a MIG device that is gone
        mig = gpu.mig_devices[found[1]]
        delay = gpu.slow_calls.get(name)
        if delay:
            time.sleep(delay)
        if gpu.lost_after_s is not None and self.clock.now() >= gpu.lost_after_s:
            return ERROR_GPU_IS_LOST
        if name in gpu.mig_call_errors:
            return gpu.mig_call_errors[name]
        impl = getattr(self, "_mig_" + name, None)
        if impl is None:
            return ERROR_NOT_SUPPORTED  # most of NVML is not answered for a MIG device
        try:
            return int(impl(gpu, mig, *args[1:]))
        except _Unsupported:
            return ERROR_NOT_SUPPORTED

    def _fault(self, name: str, args: tuple[Any, ...]) -> None:
        """Hang or crash in call ``name`` if a scenario fault says so now."""
        gpu: int | None = None
        if args and isinstance(args[0], ctypes._Pointer):
            gpu = self._index(args[0])
            if gpu is None:  # a MIG device's call is its GPU's
                mig = self._mig_of(args[0])
                gpu = None if mig is None else mig[0]
        for fault in self._faults[name]:
            if fault.gpu is not None and fault.gpu != gpu:
                continue
            if not fault.active(self.clock.now()):
                continue
            if fault.kind == "crash":
                # What a broken libnvidia-ml does: the process dies in the call, no return.
                os.kill(os.getpid(), signal.SIGSEGV)
            while fault.until_s is None or self.clock.now() < fault.until_s:
                time.sleep(0.02)  # a hang that ends when the scenario says the driver is back

    def now(self) -> float:
        """Scenario time in seconds."""
        return self.clock.now()

    def _value(self, gpu: SimGpu, key: str) -> float:
        wave = gpu.readings.get(key)
        if wave is None:
            raise _Unsupported
        return self._wave(wave, gpu)

    def _int(self, gpu: SimGpu, key: str) -> int:
        return round(self._value(gpu, key))

    def _position(self, gpu: SimGpu) -> int:
        """The GPU's place in the scenario's list."""
        position = self._positions.get(id(gpu))
        if position is None:  # a GPU object not from the scenario's list: find it by value
            position = self._scenario.gpus.index(gpu)
        return position

    def _seed(self, gpu: SimGpu) -> int:
        """The GPU's noise seed (its place in the scenario's list decides it)."""
        seed = self._seeds.get(id(gpu))
        return self._scenario.seed + self._position(gpu) * 7919 if seed is None else seed

    def _wave(self, wave: Wave, gpu: SimGpu) -> float:
        return wave.at(self.clock.now(), self._seed(gpu))

    def processes(self, gpu: SimGpu, kind: str) -> list[SimProcess]:
        """The processes of this kind present on the GPU at the current scenario time."""
        t = self.clock.now()
        known = self._kinds.get(id(gpu), {}).get(kind)
        if known is not None and known[1] <= t < known[2]:
            present = list(known[0])  # every one of them is present now
        else:
            present = [
                p
                for p in gpu.processes
                if kind in p.kinds and p.start_s <= t and (p.end_s is None or t < p.end_s)
            ]
        if self.cast is None:  # no real actors: nothing else ends a context
            return present
        return [p for p in present if self._actor_alive(p.pid)]

    def set_cast(self, cast: Cast) -> None:
        """Serve the scenario's real actor processes (their PIDs are already in the scenario)."""
        self.release()
        self.cast = cast
        with self._lock:
            self._dev_dir = cast.dev_dir
        roles = {a.name: a.role for a in self.scenario.actors}
        self._zombie_actors = {
            pid for name, pid in cast.pids.items() if roles.get(name) == "zombie-parent"
        }

    def _actor_alive(self, pid: int | None) -> bool:
        """A real actor's context ends when its process is gone, as the driver's would."""
        if pid is None or self.cast is None or pid not in self.cast.pids.values():
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        # An exited process waiting to be reaped has already closed the device: its context is
        # gone. Only the demo's zombie actor stands for a zombie that still has one.
        return state != b"Z" or pid in self._zombie_actors

    # -- system ---------------------------------------------------------------------------
    def _nvmlInitWithFlags(self, flags: int) -> int:
        if self.scenario.init_error:
            return INIT_ERRORS.get(self.scenario.init_error, 999)
        self._initialized += 1
        return SUCCESS

    def _nvmlShutdown(self) -> int:
        self._initialized = max(0, self._initialized - 1)
        return SUCCESS

    def _nvmlErrorString(self, result: int) -> bytes:
        return ERROR_STRINGS.get(int(result), b"Unknown Error")

    def _nvmlSystemGetDriverVersion(self, buf: Any, size: Any) -> int:
        buf.value = self.scenario.driver_version.encode()
        return SUCCESS

    def _nvmlSystemGetNVMLVersion(self, buf: Any, size: Any) -> int:
        buf.value = self.scenario.nvml_version.encode()
        return SUCCESS

    def _nvmlSystemGetCudaDriverVersion(self, out: Any) -> int:
        _put(out, self.scenario.cuda_driver_version)
        return SUCCESS

    _nvmlSystemGetCudaDriverVersion_v2 = _nvmlSystemGetCudaDriverVersion

    def _nvmlSystemGetProcessName(self, pid: Any, buf: Any, size: Any) -> int:
        wanted = _target(pid).value
        for gpu in self.scenario.gpus:
            for proc in gpu.processes:
                if proc.pid == wanted:
                    buf.value = proc.name.encode()
                    return SUCCESS
        return ERROR_NOT_FOUND

    def _nvmlDeviceGetCount_v2(self, out: Any) -> int:
        _put(out, len(self.scenario.gpus))
        return SUCCESS

    def _nvmlDeviceGetHandleByIndex_v2(self, index: Any, out: Any) -> int:
        i = _target(index).value
        if not 0 <= i < len(self.scenario.gpus):
            return ERROR_INVALID_ARGUMENT
        lost_after_s = self.scenario.gpus[i].lost_after_s
        if lost_after_s is not None and self.clock.now() >= lost_after_s:
            return ERROR_GPU_IS_LOST  # lost before this lookup: no handle at all
        pointer = _target(out)
        slot = ctypes.cast(ctypes.addressof(pointer), ctypes.POINTER(ctypes.c_void_p))
        slot[0] = ctypes.addressof(self._handle_bufs[i])
        return SUCCESS

    # -- memory ---------------------------------------------------------------------------
    def _memory(self, gpu: SimGpu) -> tuple[int, int, int]:
        """(total, reserved, used-by-contexts) in bytes."""
        total = gpu.memory_total_mib * MiB
        reserved = self._int(gpu, "memory_reserved_mib") * MiB
        owner = self.cast.pids.get(gpu.extra_used_by or "") if self.cast else None
        used = self._int(gpu, "extra_used_mib") * MiB if self._actor_alive(owner) else 0
        if gpu.mig_devices:  # each GPU instance's memory that no process owns, once
            extra = {m.gpu_instance_id: m.extra_used_mib for m in gpu.mig_devices}
            used += sum(round(mib) for mib in extra.values()) * MiB
        present = self._present(gpu)
        cached = self._fixed_used.get(id(gpu))
        if cached is not None and cached[0] == present:
            used += cached[1]
        else:
            t, seed = self.clock.now(), self._seed(gpu)
            contexts = 0
            for p in present:
                contexts += round(p.used_memory_mib.at(t, seed)) * MiB
            used += contexts
            if all(p.used_memory_mib.fixed is not None for p in present):
                self._fixed_used[id(gpu)] = (present, contexts)
        return total, reserved, min(used, total - reserved)

    def _may_be_busy(self, gpu: SimGpu) -> list[SimProcess]:
        """The present processes whose utilisation is not fixed at zero (kept while the
        present list is the same): a C driver skips idle ones at no cost, so the bench's
        thousands of idle workers should not cost the simulator a wave each a tick."""
        present = self._present(gpu)
        cached = self._busy_cache.get(id(gpu))
        if cached is not None and cached[0] == present:
            return cached[1]
        busy = [p for p in present if not _never_busy(p)]
        self._busy_cache[id(gpu)] = (present, busy)
        return busy

    def _present(self, gpu: SimGpu) -> list[SimProcess]:
        """Each process with a context on the GPU once, though a C+G one is in both lists."""
        compute = self.processes(gpu, "compute")
        return compute + [p for p in self.processes(gpu, "graphics") if "compute" not in p.kinds]

    def _nvmlDeviceGetMemoryInfo(self, gpu: SimGpu, out: Any) -> int:
        total, reserved, used = self._memory(gpu)
        mem = _target(out)
        # The v1 struct counts the driver's reservation as used.
        _set(mem, "total", total)
        _set(mem, "used", used + reserved)
        _set(mem, "free", total - used - reserved)
        return SUCCESS

    def _nvmlDeviceGetMemoryInfo_v2(self, gpu: SimGpu, out: Any) -> int:
        total, reserved, used = self._memory(gpu)
        mem = _target(out)
        _set(mem, "total", total)
        _set(mem, "reserved", reserved)
        _set(mem, "used", used)
        _set(mem, "free", total - used - reserved)
        return SUCCESS

    # -- processes ------------------------------------------------------------------------
    def _list_processes(
        self, gpu: SimGpu, kind: str, count: Any, array: Any, mig: SimMigDevice | None = None
    ) -> int:
        """The GPU's contexts of this kind (only a MIG device's, on its handle), each with its
        GPU and compute instance ids in MIG mode (NVML_VALUE_NOT_AVAILABLE otherwise)."""
        procs = self.processes(gpu, kind)
        if mig is not None:
            procs = [
                p
                for p in procs
                if p.gpu_instance == mig.gpu_instance_id
                and p.compute_instance == mig.compute_instance_id
            ]
        n = _target(count)
        if array is None or n.value < len(procs):
            n.value = len(procs)
            return SUCCESS if not procs else ERROR_INSUFFICIENT_SIZE
        t, seed = self.clock.now(), self._seed(gpu)
        if _packs(array, _PROCESS_INFO):
            # The driver hands over a C array in one go: so does the simulator, as far as Python
            # lets it (at thousands of processes the per-field path costs far more than gputop).
            n.value = len(procs)
            key = (id(gpu), kind, id(mig))
            cached = self._packed.get(key)
            if cached is not None and cached[0] == procs:
                ctypes.memmove(array, cached[1], len(cached[1]))
                return SUCCESS
            fixed = True
            for i, proc in enumerate(procs):
                wave = proc.used_memory_mib
                fixed = fixed and wave.fixed is not None
                mib = wave.at(t, seed)
                gi, ci = proc.gpu_instance, proc.compute_instance
                _PROCESS_INFO.pack_into(
                    array,
                    i * _PROCESS_INFO.size,
                    proc.pid,
                    round(mib) * MiB,
                    NOT_AVAILABLE_U32 if gi is None else gi,
                    NOT_AVAILABLE_U32 if ci is None else ci,
                )
            if fixed:  # the same bytes until the list changes
                self._packed[key] = (
                    procs,
                    ctypes.string_at(array, len(procs) * _PROCESS_INFO.size),
                )
            return SUCCESS
        for slot, proc in zip(array, procs, strict=False):
            _set(slot, "pid", proc.pid)
            _set(slot, "usedGpuMemory", round(proc.used_memory_mib.at(t, seed)) * MiB)
            if hasattr(type(slot), "gpuInstanceId"):  # the v1 struct has none
                gi, ci = proc.gpu_instance, proc.compute_instance
                _set(slot, "gpuInstanceId", NOT_AVAILABLE_U32 if gi is None else gi)
                _set(slot, "computeInstanceId", NOT_AVAILABLE_U32 if ci is None else ci)
        n.value = len(procs)
        return SUCCESS

    def _nvmlDeviceGetComputeRunningProcesses_v3(self, gpu: SimGpu, c: Any, a: Any) -> int:
        return self._list_processes(gpu, "compute", c, a)

    def _nvmlDeviceGetGraphicsRunningProcesses_v3(self, gpu: SimGpu, c: Any, a: Any) -> int:
        return self._list_processes(gpu, "graphics", c, a)

    _nvmlDeviceGetComputeRunningProcesses_v2 = _nvmlDeviceGetComputeRunningProcesses_v3
    _nvmlDeviceGetComputeRunningProcesses = _nvmlDeviceGetComputeRunningProcesses_v3
    _nvmlDeviceGetGraphicsRunningProcesses_v2 = _nvmlDeviceGetGraphicsRunningProcesses_v3
    _nvmlDeviceGetGraphicsRunningProcesses = _nvmlDeviceGetGraphicsRunningProcesses_v3

    def _nvmlDeviceGetProcessUtilization(
        self, gpu: SimGpu, array: Any, count: Any, since: Any
    ) -> int:
        if gpu.mig:
            return ERROR_NOT_SUPPORTED  # none per process in MIG mode
        # As the driver does: a sample only for a process whose utilisation was not zero
        # ("one ... per process running, that had some non-zero utilization"; NVML's reference),
        # and none at all for one the scenario gives no utilisation.
        t, seed = self.clock.now(), self._seed(gpu)
        samples = []
        for proc in self._may_be_busy(gpu):
            sm_wave, mem_wave = proc.sm_util, proc.mem_util
            if sm_wave is None:
                continue
            sm = round(sm_wave.at(t, seed))
            mem = round(mem_wave.at(t, seed)) if mem_wave is not None else 0
            if sm or mem:
                samples.append((proc.pid, sm, mem))
        if not samples:
            return ERROR_NOT_FOUND
        n = _target(count)
        if array is None or n.value < len(samples):
            n.value = len(samples)
            return ERROR_INSUFFICIENT_SIZE
        stamp = int(time.time() * 1_000_000)
        if _packs(array, _UTIL_SAMPLE):
            pack, size = _UTIL_SAMPLE.pack_into, _UTIL_SAMPLE.size
            for i, (pid, sm, mem) in enumerate(samples):
                pack(array, i * size, pid, stamp, sm, mem, 0, 0)
            n.value = len(samples)
            return SUCCESS
        for slot, (pid, sm, mem) in zip(array, samples, strict=False):
            _set(slot, "pid", pid)
            _set(slot, "timeStamp", stamp)
            _set(slot, "smUtil", sm)
            _set(slot, "memUtil", mem)
            _set(slot, "encUtil", 0)
            _set(slot, "decUtil", 0)
        n.value = len(samples)
        return SUCCESS


# nvmlProcessInfo_t (the _v2/_v3 calls') and nvmlProcessUtilizationSample_t, as C lays them out.
_PROCESS_INFO = struct.Struct("@IQII")
_UTIL_SAMPLE = struct.Struct("@IQIIII")
_LAYOUTS = {
    _PROCESS_INFO: ("pid", "usedGpuMemory", "gpuInstanceId", "computeInstanceId"),
    _UTIL_SAMPLE: ("pid", "timeStamp", "smUtil", "memUtil", "encUtil", "decUtil"),
}


def _packs(array: Any, layout: struct.Struct) -> bool:
    """Whether ``array`` is a C array of structs laid out as ``layout`` (pynvml's own or
    gputop's): the fast path writes its bytes at once."""
    if not isinstance(array, ctypes.Array):
        return False
    entry = array._type_
    fields = getattr(entry, "_fields_", ())
    return ctypes.sizeof(entry) == layout.size and tuple(f[0] for f in fields) == _LAYOUTS[layout]


def _processes_by_kind(
    gpu: SimGpu,
) -> dict[str, tuple[tuple[SimProcess, ...], float, float]]:
    """Per kind: the GPU's processes, and the span of time [from, until) when all are present."""
    out = {}
    for kind in ("compute", "graphics"):
        procs = tuple(p for p in gpu.processes if kind in p.kinds)
        since = max((p.start_s for p in procs), default=-math.inf)
        until = min((p.end_s for p in procs if p.end_s is not None), default=math.inf)
        out[kind] = (procs, since, until)
    return out


def _never_busy(proc: SimProcess) -> bool:
    """Whether the process never gets a utilisation sample: none given, or both fixed at 0."""
    sm, mem = proc.sm_util, proc.mem_util
    if sm is None:
        return True
    return (
        sm.fixed is not None
        and round(sm.fixed) == 0
        and (mem is None or (mem.fixed is not None and round(mem.fixed) == 0))
    )
