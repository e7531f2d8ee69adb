"""The simulated driver's MIG calls: MIG device handles, their ids, UUIDs, memory and processes.

A mixin of :class:`gputop.sim.library.SimLibrary`. ``_nvmlX(gpu, ...)`` answers a call on a GPU's
own handle, as every call of the library does; ``_mig_nvmlX(gpu, mig, ...)`` answers the same
call made on a handle of one of its MIG devices (the dispatcher finds the GPU and the device).
A call with no ``_mig_`` answer is NOT_SUPPORTED on a MIG device handle, as most of NVML is.

What a real driver does in MIG mode, and this one too: the GPU answers no utilisation
(nvmlDeviceGetUtilizationRates, the encoder's and decoder's, per process: NOT_SUPPORTED, see
device_calls.py); its process lists carry each context's GPU and compute instance ids; a MIG device
has its GPU instance's memory, and lists only its own processes.
"""

from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from gputop.sim.answers import (
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_FOUND,
    ERROR_NOT_SUPPORTED,
    SUCCESS,
    _put,
    _set,
    _target,
    _Unsupported,
    _write_address,
)
from gputop.sim.mig import MAX_GPU_SLICES, MigProfile, SimMigDevice, profiles_for
from gputop.sim.scenario import SimGpu, SimProcess
from gputop.units import MiB

if TYPE_CHECKING:
    from gputop.sim.clock import Clock


def _write_attributes(
    out: Any, profile: MigProfile, multiprocessors: int, ci_slices: int, *, memory_mib: int
) -> None:
    """Fill nvmlDeviceAttributes_t: the engines of ``profile``, its GPU instance's slices."""
    attrs = _target(out)
    attrs.multiprocessorCount = multiprocessors
    attrs.sharedCopyEngineCount = profile.copy_engines
    attrs.sharedDecoderCount = profile.decoders
    attrs.sharedEncoderCount = profile.encoders
    attrs.sharedJpegCount = profile.jpegs
    attrs.sharedOfaCount = profile.ofas
    attrs.gpuInstanceSliceCount = profile.slices
    attrs.computeInstanceSliceCount = ci_slices
    attrs.memorySizeMB = memory_mib


class MigCalls:
    """NVML's MIG calls, on GPU handles and on MIG device handles."""

    if TYPE_CHECKING:  # SimLibrary's, which this is mixed into
        clock: Clock
        _handle_bufs: list[Any]

        def _seed(self, gpu: SimGpu) -> int: ...

        def _position(self, gpu: SimGpu) -> int: ...

        def processes(self, gpu: SimGpu, kind: str) -> list[SimProcess]: ...

        def _list_processes(
            self, gpu: SimGpu, kind: str, count: Any, array: Any, mig: SimMigDevice | None = None
        ) -> int: ...

    # -- MIG device handles ---------------------------------------------------------------
    def _init_mig(self) -> None:
        # One small buffer per MIG device, made when its handle is first asked for: its address
        # is the handle. (GPU position, MIG device position) <-> address.
        self._mig_bufs: dict[tuple[int, int], Any] = {}
        self._mig_by_address: dict[int, tuple[int, int]] = {}
        self._mig_handle_index: dict[int, tuple[Any, tuple[int, int]]] = {}

    def _mig_of(self, handle: Any) -> tuple[int, int] | None:
        """(GPU position, MIG device position) of a MIG device handle, or None."""
        known = self._mig_handle_index.get(id(handle))
        if known is not None and known[0] is handle:
            return known[1]
        address = ctypes.cast(handle, ctypes.c_void_p).value
        found = self._mig_by_address.get(address or 0)
        if found is not None:
            if len(self._mig_handle_index) > 4096:
                self._mig_handle_index.clear()
            self._mig_handle_index[id(handle)] = (handle, found)
        return found

    def _mig_buffer(self, gpu_position: int, mig_position: int) -> Any:
        key = (gpu_position, mig_position)
        buffer = self._mig_bufs.get(key)
        if buffer is None:
            buffer = self._mig_bufs[key] = ctypes.create_string_buffer(8)
            self._mig_by_address[ctypes.addressof(buffer)] = key
        return buffer

    @staticmethod
    def _mig_enabled(gpu: SimGpu) -> bool:
        if gpu.mig is None:
            raise _Unsupported
        return gpu.mig

    def _nvmlDeviceGetMaxMigDeviceCount(self, gpu: SimGpu, out: Any) -> int:
        _put(out, MAX_GPU_SLICES if self._mig_enabled(gpu) else 0)
        return SUCCESS

    def _nvmlDeviceGetMigDeviceHandleByIndex(self, gpu: SimGpu, index: Any, out: Any) -> int:
        if not self._mig_enabled(gpu):
            return ERROR_NOT_SUPPORTED
        i = _target(index).value
        if not 0 <= i < MAX_GPU_SLICES:
            return ERROR_INVALID_ARGUMENT
        if i >= len(gpu.mig_devices):
            return ERROR_NOT_FOUND  # no MIG device at this index
        _write_address(out, self._mig_buffer(self._position(gpu), i))
        return SUCCESS

    def _nvmlDeviceIsMigDeviceHandle(self, gpu: SimGpu, out: Any) -> int:
        _put(out, 0)
        return SUCCESS

    def _mig_nvmlDeviceIsMigDeviceHandle(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        _put(out, 1)
        return SUCCESS

    def _nvmlDeviceGetGpuInstanceId(self, gpu: SimGpu, out: Any) -> int:
        return ERROR_NOT_SUPPORTED  # not a MIG device handle

    _nvmlDeviceGetComputeInstanceId = _nvmlDeviceGetGpuInstanceId

    def _mig_nvmlDeviceGetGpuInstanceId(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        _put(out, mig.gpu_instance_id)
        return SUCCESS

    def _mig_nvmlDeviceGetComputeInstanceId(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        _put(out, mig.compute_instance_id)
        return SUCCESS

    def _nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, gpu: SimGpu, out: Any) -> int:
        return ERROR_INVALID_ARGUMENT  # a GPU's own handle is not a MIG device handle

    def _mig_nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
        self, gpu: SimGpu, mig: SimMigDevice, out: Any
    ) -> int:
        _write_address(out, self._handle_bufs[self._position(gpu)])
        return SUCCESS

    # -- identity -------------------------------------------------------------------------
    def _mig_nvmlDeviceGetUUID(self, gpu: SimGpu, mig: SimMigDevice, buf: Any, size: Any) -> int:
        buf.value = mig.uuid.encode()
        return SUCCESS

    def _mig_nvmlDeviceGetName(self, gpu: SimGpu, mig: SimMigDevice, buf: Any, size: Any) -> int:
        buf.value = f"{gpu.name} MIG {mig.name}".encode()
        return SUCCESS

    def _nvmlDeviceGetAttributes_v2(self, gpu: SimGpu, out: Any) -> int:
        if gpu.mig is None:
            raise _Unsupported
        whole = max(profiles_for(gpu.memory_total_mib).values(), key=lambda p: p.slices)
        _write_attributes(
            out, whole, whole.multiprocessors, whole.slices, memory_mib=gpu.memory_total_mib
        )
        return SUCCESS

    def _mig_nvmlDeviceGetAttributes_v2(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        profile = mig.profile
        multiprocessors = profile.multiprocessors * mig.slices // profile.slices
        _write_attributes(out, profile, multiprocessors, mig.slices, memory_mib=profile.memory_mib)
        return SUCCESS

    def _profile_info(self, gpu: SimGpu, profile: Any, out: Any, *, named: bool) -> int:
        if not self._mig_enabled(gpu):
            return ERROR_NOT_SUPPORTED
        wanted = profile if isinstance(profile, int) else _target(profile).value
        found = [p for p in profiles_for(gpu.memory_total_mib).values() if p.profile == wanted]
        if not found:
            return ERROR_NOT_SUPPORTED  # a profile this board does not have
        p = found[0]
        info = _target(out)
        info.id = p.id
        info.isP2pSupported = 0
        info.sliceCount = p.slices
        info.instanceCount = p.instances
        info.multiprocessorCount = p.multiprocessors
        info.copyEngineCount = p.copy_engines
        info.decoderCount = p.decoders
        info.encoderCount = p.encoders
        info.jpegCount = p.jpegs
        info.ofaCount = p.ofas
        info.memorySizeMB = p.memory_mib
        if named:
            info.name = f"MIG {p.name}".encode()
        return SUCCESS

    def _nvmlDeviceGetGpuInstanceProfileInfo(self, gpu: SimGpu, profile: Any, out: Any) -> int:
        return self._profile_info(gpu, profile, out, named=False)

    def _nvmlDeviceGetGpuInstanceProfileInfoV(self, gpu: SimGpu, profile: Any, out: Any) -> int:
        return self._profile_info(gpu, profile, out, named=True)

    # -- memory and processes -------------------------------------------------------------
    def _mig_used_bytes(self, gpu: SimGpu, gpu_instance_id: int) -> int:
        """Memory in use in one GPU instance: its processes' and what no process owns."""
        t, seed = self.clock.now(), self._seed(gpu)
        extra = next(
            (m.extra_used_mib for m in gpu.mig_devices if m.gpu_instance_id == gpu_instance_id),
            0.0,
        )
        used = round(extra) * MiB
        graphics = [p for p in self.processes(gpu, "graphics") if "compute" not in p.kinds]
        present = self.processes(gpu, "compute") + graphics  # a C+G context once
        for p in present:
            if p.gpu_instance == gpu_instance_id:
                used += round(p.used_memory_mib.at(t, seed)) * MiB
        return used

    def _mig_memory(self, gpu: SimGpu, mig: SimMigDevice) -> tuple[int, int]:
        total = mig.profile.memory_mib * MiB
        return total, min(self._mig_used_bytes(gpu, mig.gpu_instance_id), total)

    def _mig_nvmlDeviceGetMemoryInfo(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        total, used = self._mig_memory(gpu, mig)
        mem = _target(out)
        _set(mem, "total", total)
        _set(mem, "used", used)
        _set(mem, "free", total - used)
        return SUCCESS

    def _mig_nvmlDeviceGetMemoryInfo_v2(self, gpu: SimGpu, mig: SimMigDevice, out: Any) -> int:
        total, used = self._mig_memory(gpu, mig)
        mem = _target(out)
        _set(mem, "total", total)
        _set(mem, "reserved", 0)
        _set(mem, "used", used)
        _set(mem, "free", total - used)
        return SUCCESS

    def _mig_nvmlDeviceGetComputeRunningProcesses_v3(
        self, gpu: SimGpu, mig: SimMigDevice, c: Any, a: Any
    ) -> int:
        return self._list_processes(gpu, "compute", c, a, mig)

    def _mig_nvmlDeviceGetGraphicsRunningProcesses_v3(
        self, gpu: SimGpu, mig: SimMigDevice, c: Any, a: Any
    ) -> int:
        return self._list_processes(gpu, "graphics", c, a, mig)

    _mig_nvmlDeviceGetComputeRunningProcesses_v2 = _mig_nvmlDeviceGetComputeRunningProcesses_v3
    _mig_nvmlDeviceGetComputeRunningProcesses = _mig_nvmlDeviceGetComputeRunningProcesses_v3
    _mig_nvmlDeviceGetGraphicsRunningProcesses_v2 = _mig_nvmlDeviceGetGraphicsRunningProcesses_v3
    _mig_nvmlDeviceGetGraphicsRunningProcesses = _mig_nvmlDeviceGetGraphicsRunningProcesses_v3
