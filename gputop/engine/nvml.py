"""The one way in to the NVIDIA driver: NVML, through pynvml, into immutable Snapshots.

Only this module imports pynvml. Every field is read on its own through ``_read``: a field whose
call fails, with any error code known or not, is ``None`` and costs nothing else; only
NVML_ERROR_GPU_IS_LOST makes a GPU a GpuSample in state LOST, while the others keep working. A
process list the driver could not give is unknown (GpuSample.process_list_error), never empty.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import operator
import os
import socket
import struct
import threading
import time
from array import array
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, count
from typing import Any, TypeVar

import pynvml

from gputop.engine.cuda_index import DeviceKey, MigKey, cuda_index_map, cuda_mig_index_map
from gputop.engine.maker import slot_maker
from gputop.engine.model import (
    THROTTLE_REASON_BITS,
    GpuCounters,
    GpuProcess,
    GpuSample,
    GpuState,
    MigDevice,
    PidMemory,
    ProcessType,
    Scalar,
    Snapshot,
    SystemInfo,
    Unavailable,
    listed_pids,
)
from gputop.engine.probes import TYPED, Probe
from gputop.engine.sanitize import clean, clean_optional
from gputop.errors import DriverError, DriverMissing

T = TypeVar("T")

_INIT_MESSAGES = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: (
        "NVIDIA driver not found (libnvidia-ml.so.1). Try: gputop --demo"
    ),
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: (
        "the NVIDIA kernel driver is not loaded (is this a GPU machine?). Try: gputop --demo"
    ),
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "NVIDIA driver/library version mismatch: the driver was upgraded without a reboot "
        "(reboot, or reload the nvidia kernel modules)"
    ),
    pynvml.NVML_ERROR_NO_PERMISSION: (
        "no permission to use the NVIDIA driver (check access to /dev/nvidia*)"
    ),
}


LOST_TEXT = "GPU is lost (fell off the bus)"  # nvidia-smi, nvitop and gpustat say "GPU is lost"

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}


class _Lost(Exception):
    """The GPU answered NVML_ERROR_GPU_IS_LOST."""


def _read(call: Callable[..., T], *args: Any) -> T | None:
    """Run one NVML call: its answer; None when it fails, whatever the code (a code NVML adds
    tomorrow included: one field's failure is never the GPU's); a lost GPU -> _Lost."""
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        _raise_if_lost(exc)
        return None


def _raise_if_lost(exc: pynvml.NVMLError) -> None:
    """The one error that is the GPU's rather than the call's: NVML_ERROR_GPU_IS_LOST."""
    if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
        raise _Lost from None


def _first(*calls: Callable[[], T]) -> T | None:
    """The first call that the driver has (FUNCTION_NOT_FOUND moves on to the next); None when
    none has it or the call fails (as ``_read``)."""
    for call in calls:
        try:
            return call()
        except pynvml.NVMLError as exc:
            _raise_if_lost(exc)
            if exc.value != pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                return None
        except AttributeError:  # an older pynvml without this wrapper
            continue
    return None


def _error_text(code: int) -> str:
    """An NVML return code as the driver words it, clean (the driver's text is untrusted)."""
    return clean(f"{pynvml.NVMLError(code)} (code {code})")


def _text(value: str | bytes | None) -> str | None:
    """A driver string as clean text (the driver can lie, and a board's name reaches labels).

    Bindings disagree on str vs bytes for names, UUIDs and versions.
    """
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")
    return clean_optional(value)


def cuda_version_text(version: int | None) -> str | None:
    """12040 -> '12.4' (NVML's integer CUDA driver version)."""
    if version is None:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"


@dataclass(slots=True)
class _Static:
    """Per-GPU facts that do not change while we run: read once."""

    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None
    minor_number: int | None = None
    serial: str | None = None
    slowdown_c: int | None = None
    shutdown_c: int | None = None
    clock_max: dict[str, int | None] = field(default_factory=dict)
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    fans: int | None = None
    cuda_index: int | None = None
    mig_keys: tuple[MigKey, ...] = ()  # its MIG devices at start (for CUDA_VISIBLE_DEVICES)
    # MIG: the GPU's instance profiles (read when first needed), and what does not change of
    # each MIG device, by its UUID (ids, profile name, slices): read when it first appears.
    mig_profiles: tuple[_Profile, ...] = ()
    mig_static: dict[str, dict[str, Any]] = field(default_factory=dict)
    mig_utilization: bool = True  # False once a MIG device gave none (no driver to date does)
    lost: bool = False  # a call read here answered GPU_IS_LOST: a lost GPU does not come back


@dataclass(frozen=True, slots=True)
class _Profile:
    """One of a GPU's instance profiles (nvmlDeviceGetGpuInstanceProfileInfo): names MIG devices."""

    name: str | None  # "3g.40gb" (None: the driver's struct has no name)
    slices: int
    memory_mb: int
    media: tuple[int, int, int, int]  # decoders, encoders, JPEG and OFA engines


class NvmlSource:
    """Reads complete Snapshots from NVML (real or simulated). Thread-safe for one reader."""

    PROCESS_UTIL_WINDOW_S = 5.0
    # Per-process utilisation read for at most about this many listed processes a snapshot:
    # past it, GPUs take turns (every other snapshot at 5,000, every 4th at 10,000), as each
    # new SM % is a new entry and a new row all the way to the screen (issue 17). A GPU whose
    # process list changed is read at once. nvitop refreshes its process list every 2 s.
    PROCESS_UTIL_PER_SNAPSHOT = 2500
    _asked: _Asked | None = None  # readings a query asked for (request_probes)

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        simulated: bool = False,
        counters: bool = True,
    ):
        """Open NVML. ``counters``: also read the exporter's GpuCounters each snapshot (and
        register for Xid events); without them Snapshot.counters is empty and a tick is cheaper.
        """
        self._simulated = simulated
        self._environ = os.environ if environ is None else environ
        self._seq = 0
        self._lock = threading.Lock()
        self._proc_api: str | None = None  # v3 / v2 / v1, whichever the driver has
        self._buffers = _ListBuffers()
        self._light_buffers = _ListBuffers()  # pid_memory's: it may run beside a snapshot
        # listed PID -> the driver's name for it when this namespace cannot see it, else None
        self._foreign_names: dict[int, str | None] = {}
        self._lists: dict[int, _GpuList] = {}  # per GPU: its last process entries
        self._lists_moved = True  # a GPU's processes may have changed since the last prune
        self._prunes = 0
        self._util_turns = 1  # per-process utilisation of a GPU every this many snapshots
        # The snapshot's parsed process lists by their bytes, and the last snapshot's: a list
        # the driver gives byte for byte again is the same parsed list (and so, above, the
        # same entries), found without a step per entry.
        self._parsed: dict[tuple[str, bytes], list[_Listed]] = {}
        self._parsed_before: dict[tuple[str, bytes], list[_Listed]] = {}
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            message = _INIT_MESSAGES.get(exc.value) or f"cannot initialise NVML: {exc}"
            if exc.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise DriverMissing(message) from None
            raise DriverError(message) from None
        try:
            count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise DriverError(f"cannot count GPUs: {exc}") from None
        self._handles: list[Any | None] = []
        self._mig_cuda: dict[str, int] = {}  # MIG device UUID -> CUDA index
        self._handle_errors: dict[int, pynvml.NVMLError] = {}  # why a GPU has no handle
        self._static: list[_Static] = []
        for i in range(count):
            try:
                self._handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
            except pynvml.NVMLError as exc:
                self._handles.append(None)
                self._handle_errors[i] = exc
            self._static.append(self._read_static(self._handles[-1]))
        self._assign_cuda_indices()
        self._system = self._read_system()
        self._pcie = _PcieReader(self._handles)
        # Opt-in (the exporter, --json): the dashboard never shows them, and they made a tick
        # about half as expensive again.
        self._counters = _CounterReader(self._handles) if counters else None

    @property
    def simulated(self) -> bool:
        """True when the data comes from gputop's simulated driver."""
        return self._simulated

    @property
    def system(self) -> SystemInfo:
        """Host and driver facts (read at start)."""
        return self._system

    @property
    def dev_dir(self) -> str:
        """Where this box's /dev/nvidia* files are: /dev, or the simulated box's own folder."""
        return str(getattr(pynvml.nvmlLib, "dev_dir", "/dev"))

    def close(self) -> None:
        """Release NVML."""
        self._pcie.stop()
        if self._counters is not None:
            self._counters.close()
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()

    def request_probes(self, probes: Iterable[Probe], explain: Iterable[str] = ()) -> None:
        """From the next snapshot on, also read ``probes`` into each GpuSample's ``extra``, and
        for each GpuSample attribute in ``explain`` that is None, record why (``unavailable``).
        """
        self._asked = _Asked(probes, explain)

    # -- static ---------------------------------------------------------------------------
    def _read_static(self, handle: Any) -> _Static:
        st = _Static()
        if handle is None:
            return st
        try:
            st.uuid = _text(_read(pynvml.nvmlDeviceGetUUID, handle))
            st.name = _text(_read(pynvml.nvmlDeviceGetName, handle))
            pci = _read(pynvml.nvmlDeviceGetPciInfo, handle)
            st.pci_bus_id = _text(pci.busId) if pci is not None else None
            cc = _read(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
            st.compute_capability = (int(cc[0]), int(cc[1])) if cc else None
            st.minor_number = _read(pynvml.nvmlDeviceGetMinorNumber, handle)
            st.serial = _text(_read(pynvml.nvmlDeviceGetSerial, handle))
            st.slowdown_c = _read(
                pynvml.nvmlDeviceGetTemperatureThreshold,
                handle,
                pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
            )
            st.shutdown_c = _read(
                pynvml.nvmlDeviceGetTemperatureThreshold,
                handle,
                pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
            )
            for key, clock in (
                ("graphics", pynvml.NVML_CLOCK_GRAPHICS),
                ("sm", pynvml.NVML_CLOCK_SM),
                ("memory", pynvml.NVML_CLOCK_MEM),
            ):
                st.clock_max[key] = _read(pynvml.nvmlDeviceGetMaxClockInfo, handle, clock)
            st.pcie_gen_max = _read(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle)
            st.pcie_width_max = _read(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle)
            st.fans = _first(lambda: pynvml.nvmlDeviceGetNumFans(handle))
            st.mig_keys = _mig_keys(handle)
        except _Lost:
            st.lost = True  # every tick reports it lost, whichever calls a tick makes
        return st

    def _assign_cuda_indices(self) -> None:
        keys = [
            DeviceKey(
                index=i,
                uuid=st.uuid,
                pci_bus_id=st.pci_bus_id,
                compute_capability=st.compute_capability,
                mig_devices=st.mig_keys,
            )
            for i, st in enumerate(self._static)
        ]
        mapping = cuda_index_map(keys, self._environ)
        for i, st in enumerate(self._static):
            st.cuda_index = mapping.get(i)
        self._mig_cuda = cuda_mig_index_map(keys, self._environ)

    def _read_system(self) -> SystemInfo:
        return SystemInfo(
            hostname=clean(socket.gethostname()),
            driver_version=_text(_first(pynvml.nvmlSystemGetDriverVersion)),
            cuda_driver_version=cuda_version_text(
                _first(
                    pynvml.nvmlSystemGetCudaDriverVersion_v2,
                    pynvml.nvmlSystemGetCudaDriverVersion,
                )
            ),
            nvml_version=_text(_first(pynvml.nvmlSystemGetNVMLVersion)),
            simulated=self._simulated,
        )

    # -- per tick -------------------------------------------------------------------------
    def identities(self) -> tuple[GpuSample, ...]:
        """Each GPU's identity (index, UUID, name, bus id, ...) with no readings: read at start."""
        return tuple(GpuSample(**self._identity(i)) for i in range(len(self._handles)))

    def snapshot(
        self, progress: list[GpuSample] | None = None, skip: Collection[int] = ()
    ) -> Snapshot:
        """Read every GPU once and return one immutable Snapshot.

        With ``progress``, each GPU's sample is appended to it as soon as it is read: whoever
        watches a slow reading (gputop.engine.child) can pass on the GPUs that did answer.
        ``skip``: GPUs left out (another thread is stuck in their call; the child's business).
        """
        with self._lock:
            self._seq += 1
            seq = self._seq
        wall, mono = time.time(), time.monotonic()
        read: list[GpuSample] = [] if progress is None else progress
        reader = self._counters
        if reader is not None:
            reader.drain_events()
        counters: list[GpuCounters] = []
        self._parsed_before, self._parsed = self._parsed, {}
        for i in range(len(self._handles)):
            if i in skip:
                continue
            gpu = self._read_gpu(i)
            read.append(gpu)
            if reader is not None and gpu.state is GpuState.OK:
                reading = reader.read(i, self._handles[i])
                if reading is not None:
                    counters.append(reading)
        if reader is not None:
            reader.ticks += 1
        gpus = tuple(read)
        listed = sum(len(gpu.processes) for gpu in gpus)
        self._util_turns = max(1, -(-listed // self.PROCESS_UTIL_PER_SNAPSHOT))
        # Forget PIDs no longer listed (a PID number is reused): looked at when a list's
        # processes may have changed, or now and then (a GPU lost with its list, say).
        self._prunes += 1
        if self._foreign_names and (self._lists_moved or self._prunes % 60 == 0):
            self._lists_moved = False
            for pid in self._foreign_names.keys() - listed_pids(gpus):
                del self._foreign_names[pid]
        return Snapshot(
            seq=seq,
            taken_at_wall=wall,
            taken_at_mono=mono,
            duration_s=time.monotonic() - mono,
            system=self._system,
            gpus=gpus,
            counters=tuple(counters),
        )

    def pid_memory(self, pids: Iterable[int]) -> PidMemory:
        """The GPU memory ``pids`` use on each GPU, from the process lists alone.

        Two driver calls a GPU (compute and graphics lists) instead of a snapshot's dozens; a
        PID in both lists (or in two MIG devices' lists) counts once, as in the snapshot. A GPU
        that is lost or fails its list call is left out.
        """
        wanted = frozenset(pids)
        mono = time.monotonic()
        by_gpu: list[tuple[int, int]] = []
        for index, h in enumerate(self._handles):
            if h is None:
                continue
            try:
                used = self._listed_memory(h)
            except (_Lost, pynvml.NVMLError):
                continue
            by_gpu.append((index, sum(used.get(pid) or 0 for pid in wanted)))
        return PidMemory(taken_at_mono=mono, by_gpu_bytes=tuple(by_gpu))

    def _listed_memory(self, h: Any) -> dict[int, int | None]:
        """PID -> its memory on this GPU, merged over both lists as _read_processes does."""
        by_pid: dict[int, int | None] = {}

        def migs() -> list[tuple[int | None, int | None, Any]]:
            return [(None, None, mh) for _, mh in _mig_handles(h)] if _in_mig_mode(h) else []

        for kind in ("Compute", "Graphics"):
            listed, error = self._list_on_gpu(kind, h, migs, self._light_buffers)
            if error is not None:  # a list it could not read: the GPU is left out, not 0
                raise pynvml.NVMLError(error)
            for pid, used, _, _ in listed:
                by_pid[pid] = used if pid not in by_pid else _max_known(by_pid[pid], used)
        return by_pid

    def _identity(self, index: int) -> dict[str, Any]:
        st = self._static[index]
        return {
            "index": index,
            "cuda_index": st.cuda_index,
            "uuid": st.uuid,
            "name": st.name,
            "pci_bus_id": st.pci_bus_id,
            "minor_number": st.minor_number,  # a lost GPU's users are found by its device file
        }

    def _read_gpu(self, index: int) -> GpuSample:
        st = self._static[index]
        identity = self._identity(index)
        handle = self._handles[index]
        if handle is None:
            return self._unreadable(index, identity)
        if st.lost:
            return GpuSample(state=GpuState.LOST, error=LOST_TEXT, **identity)
        try:
            return GpuSample(**identity, **self._read_dynamic(index, handle, st))
        except _Lost:
            return GpuSample(state=GpuState.LOST, error=LOST_TEXT, **identity)
        except pynvml.NVMLError as exc:  # a bug here, not the driver's: every call is guarded
            return GpuSample(state=GpuState.ERROR, error=clean(str(exc)), **identity)

    def _unreadable(self, index: int, identity: dict[str, Any]) -> GpuSample:
        """A GPU the driver gave no handle for: lost before we started, or another failure."""
        exc = self._handle_errors.get(index)
        if exc is not None and exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
            return GpuSample(state=GpuState.LOST, error=LOST_TEXT, **identity)
        why = f"no handle from the driver: {exc}" if exc is not None else "no handle"
        return GpuSample(state=GpuState.ERROR, error=clean(why), **identity)

    def _read_dynamic(self, index: int, h: Any, st: _Static) -> dict[str, Any]:
        values: dict[str, Any] = {
            "compute_capability": st.compute_capability,
            "serial": st.serial,
            "temperature_slowdown_c": st.slowdown_c,
            "temperature_shutdown_c": st.shutdown_c,
            "clock_graphics_max_mhz": st.clock_max.get("graphics"),
            "clock_sm_max_mhz": st.clock_max.get("sm"),
            "clock_memory_max_mhz": st.clock_max.get("memory"),
            "pcie_gen_max": st.pcie_gen_max,
            "pcie_width_max": st.pcie_width_max,
        }
        values.update(self._read_memory(h))
        util = _read(pynvml.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            values["utilization_gpu_percent"] = int(util.gpu)
            values["utilization_memory_percent"] = int(util.memory)
        enc = _read(pynvml.nvmlDeviceGetEncoderUtilization, h)
        dec = _read(pynvml.nvmlDeviceGetDecoderUtilization, h)
        values["encoder_percent"] = enc[0] if enc else None
        values["decoder_percent"] = dec[0] if dec else None
        values["temperature_c"] = _first(
            lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            lambda: pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU),
        )
        values["temperature_memory_c"] = _memory_temperature(h)
        values["fan_speeds_percent"] = self._read_fans(h, st)
        values["power_draw_mw"] = _read(pynvml.nvmlDeviceGetPowerUsage, h)
        values["power_limit_mw"] = _read(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
        for key, clock in (
            ("clock_graphics_mhz", pynvml.NVML_CLOCK_GRAPHICS),
            ("clock_sm_mhz", pynvml.NVML_CLOCK_SM),
            ("clock_memory_mhz", pynvml.NVML_CLOCK_MEM),
        ):
            values[key] = _read(pynvml.nvmlDeviceGetClockInfo, h, clock)
        pstate = _read(pynvml.nvmlDeviceGetPerformanceState, h)
        values["performance_state"] = None if pstate is None or pstate >= 32 else pstate
        values["throttle_reasons"] = self._read_throttle(h)
        values["pcie_gen"] = _read(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
        values["pcie_width"] = _read(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h)
        values["pcie_rx_kbps"], values["pcie_tx_kbps"] = self._pcie.read(index, h)
        values["ecc_errors_uncorrected_volatile"] = _read(
            pynvml.nvmlDeviceGetTotalEccErrors,
            h,
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
            pynvml.NVML_VOLATILE_ECC,
        )
        mode = _read(pynvml.nvmlDeviceGetComputeMode, h)
        values["compute_mode"] = COMPUTE_MODES.get(mode) if mode is not None else None
        persistence = _read(pynvml.nvmlDeviceGetPersistenceMode, h)
        values["persistence_mode"] = bool(persistence) if persistence is not None else None
        mig = _read(pynvml.nvmlDeviceGetMigMode, h)
        values["mig_mode"] = bool(mig[0]) if mig else None
        migs = self._read_mig(index, h, st) if values["mig_mode"] else []
        values["mig_devices"] = tuple(device for device, _ in migs)
        values["processes"], values["process_list_error"] = self._read_processes(
            index, h, migs, mig_mode=bool(values["mig_mode"])
        )
        if self._asked is not None:  # only gputop query asks; the dashboard's tick never does
            values.update(self._asked.read(h, values))
        return values

    def _read_memory(self, h: Any) -> dict[str, Any]:
        values: dict[str, Any] = {}
        mem = _first(lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2))
        if mem is not None:
            values["memory_reserved_bytes"] = int(mem.reserved)
        else:
            mem = _read(pynvml.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            values["memory_total_bytes"] = int(mem.total)
            values["memory_used_bytes"] = int(mem.used)
            values["memory_free_bytes"] = int(mem.free)
        bar1 = _read(pynvml.nvmlDeviceGetBAR1MemoryInfo, h)
        if bar1 is not None:
            values["bar1_total_bytes"] = int(bar1.bar1Total)
            values["bar1_used_bytes"] = int(bar1.bar1Used)
        return values

    def _read_fans(self, h: Any, st: _Static) -> tuple[int, ...] | None:
        if st.fans:
            speeds = [_read(pynvml.nvmlDeviceGetFanSpeed_v2, h, i) for i in range(st.fans)]
            known = tuple(s for s in speeds if s is not None)
            return known or None
        if st.fans is None:  # a driver without nvmlDeviceGetNumFans
            speed = _read(pynvml.nvmlDeviceGetFanSpeed, h)
            return (speed,) if speed is not None else None
        return None

    def _read_throttle(self, h: Any) -> tuple[str, ...] | None:
        mask = _first(
            lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h),
        )
        if mask is None:
            return None
        return tuple(name for name, bit in THROTTLE_REASON_BITS.items() if mask & bit)

    # -- MIG ------------------------------------------------------------------------------
    def _read_mig(self, index: int, h: Any, st: _Static) -> list[tuple[MigDevice, Any]]:
        """The GPU's MIG devices with their handles. A MIG call that fails leaves out what it
        would have read (never the GPU: only a lost GPU raises)."""
        devices: list[tuple[MigDevice, Any]] = []
        known: dict[str, dict[str, Any]] = {}
        for i, mh in _mig_handles(h):
            uuid = _text(_soft(pynvml.nvmlDeviceGetUUID, mh))
            fixed = st.mig_static.get(uuid) if uuid else None
            if fixed is None:
                fixed = _mig_identity(h, mh, st)
            if uuid and None not in fixed.values():  # else asked again next time
                known[uuid] = fixed
            mem = _soft(pynvml.nvmlDeviceGetMemoryInfo, mh)
            util = _soft(pynvml.nvmlDeviceGetUtilizationRates, mh) if st.mig_utilization else None
            st.mig_utilization = util is not None
            device = MigDevice(
                index=i,
                gpu_index=index,
                uuid=uuid,
                cuda_index=self._mig_cuda.get(uuid) if uuid else None,
                memory_total_bytes=_int_of(mem, "total"),
                memory_used_bytes=_int_of(mem, "used"),
                memory_free_bytes=_int_of(mem, "free"),
                utilization_gpu_percent=_int_of(util, "gpu"),
                **fixed,
            )
            devices.append((device, mh))
        st.mig_static = known  # forget MIG devices that are gone (instances re-made)
        return devices

    # -- processes ------------------------------------------------------------------------
    def _read_processes(
        self,
        index: int,
        h: Any,
        migs: Sequence[tuple[MigDevice, Any]] = (),
        *,
        mig_mode: bool = False,
    ) -> tuple[tuple[GpuProcess, ...], str | None]:
        """The GPU's contexts, and why its list is not known in full (None: it is): the
        contexts of a list that failed are unknown, and no entry stands for them."""
        read = [
            self._list_on_gpu(kind, h, lambda: _instances(migs)) for kind in ("Compute", "Graphics")
        ]
        lists = (read[0][0], read[1][0])
        failed = [
            f"nvmlDeviceGet{kind}RunningProcesses: {_error_text(error)}"
            for kind, (_, error) in zip(("Compute", "Graphics"), read, strict=True)
            if error is not None
        ]
        return self._entries(index, h, lists, mig_mode=mig_mode), "; ".join(failed) or None

    def _entries(
        self, index: int, h: Any, lists: tuple[list[_Listed], ...], *, mig_mode: bool
    ) -> tuple[GpuProcess, ...]:
        """One entry per listed PID, the last snapshot's objects where unchanged."""
        last = self._lists.get(index)
        if last is not None and last.lists[0] is lists[0] and last.lists[1] is lists[1]:
            merged = last.merged  # the same contexts and memory as the last snapshot
        else:
            merged = _merge(lists)
        if last is not None and merged is last.merged and (self._seq + index) % self._util_turns:
            return last.listed  # the same contexts, and not this GPU's turn for utilisation
        # In MIG mode NVML keeps no per-process utilisation (a driver answering NOT_FOUND
        # there means none, not idle): N/A, as for the MIG devices themselves.
        utils = self._read_process_utilization(index, h) if merged and not mig_mode else _NO_UTILS
        if last is not None and merged is last.merged and utils.absent == last.utils.absent:
            # Only the processes whose utilisation moved: a few hundred of 5,000 (issue 17).
            moved = utils.moved_since(last.utils)
            return last.moved(moved, utils) if moved else last.listed
        self._lists_moved = True
        by_key = last.by_key if last is not None else {}
        keys: list[tuple[Any, ...]] = []
        out: list[GpuProcess] = []
        by_pid, absent = utils.by_pid(), utils.absent
        for pid, (ptype, used, gi, ci) in merged:
            sm, mem = by_pid.get(pid, absent)
            key = (pid, ptype, used, sm, mem, gi, ci)
            entry = by_key.get(key)
            if entry is None:
                # Its name stays as it was while the PID is listed (see _foreign_name).
                entry = _entry(index, key, self._foreign_name(pid))
            keys.append(key)
            out.append(entry)
        before = last.listed if last is not None else ()
        if len(before) == len(out) and all(map(operator.is_, before, out)):
            listed = before
        else:
            listed = tuple(out)
        self._lists[index] = _GpuList(index, lists, merged, utils, keys, out, listed)
        return listed

    def _list_on_gpu(
        self,
        kind: str,
        h: Any,
        migs: Callable[[], Sequence[tuple[int | None, int | None, Any]]],
        buffers: _ListBuffers | None = None,
    ) -> tuple[list[_Listed], int | None]:
        """The GPU's contexts of one kind, and the error that kept some from being read (None:
        the list is whole). In MIG mode the GPU's own list needs privileges (NVML: "aggregate
        information, only if the caller has appropriate privileges"); without them, each MIG
        device's list, whose contexts run in that device's instances (``migs``, asked only
        then: each MIG device's GPU and compute instance ids and handle)."""
        listed, error = self._list_processes(kind, h, buffers)
        if error != pynvml.NVML_ERROR_NO_PERMISSION:
            return listed, error
        devices = migs()
        if not devices:  # no MIG device to ask instead: the list is denied, so unknown
            return listed, error
        out: list[_Listed] = []
        error = None
        for mig_gi, mig_ci, mh in devices:
            on_mig, failed = self._list_processes(kind, mh, buffers)
            error = error if failed is None else failed
            for pid, used, gi, ci in on_mig:
                out.append((pid, used, mig_gi if gi is None else gi, mig_ci if ci is None else ci))
        return out, error

    def _foreign_name(self, pid: int) -> str | None:
        """The driver's name for a PID this PID namespace cannot see (a container's, say).

        Only the driver can name it then (nvidia-smi asks it too). Visible PIDs are named from
        /proc by the process reader, so the driver is not asked. The answer (None for a visible
        PID) is kept while the PID is listed: one look at /proc per new PID, not per tick.
        """
        if pid in self._foreign_names:
            return self._foreign_names[pid]
        name = None
        if not os.path.exists(f"/proc/{pid}"):
            try:
                name = _text(_read(pynvml.nvmlSystemGetProcessName, pid))
            except _Lost:
                name = None
        self._foreign_names[pid] = name
        return name

    def _list_processes(
        self, kind: str, h: Any, buffers: _ListBuffers | None = None
    ) -> tuple[list[_Listed], int | None]:
        """(pid, used bytes, GPU instance id, compute instance id) of each context, trying the
        v3, v2 then v1 call (drivers disagree); and the error that kept it from being read
        (None: read), whatever its code: an empty list then means unknown, not none."""
        # The call that worked last first; should the driver lack it after all, the others.
        apis = (self._proc_api, *_PROCESS_CALLS) if self._proc_api else tuple(_PROCESS_CALLS)
        for api in apis:
            suffix, struct = _PROCESS_CALLS[api]
            try:
                fn = pynvml._nvmlGetFunctionPointer(f"nvmlDeviceGet{kind}RunningProcesses{suffix}")
                result = (buffers or self._buffers).call_list(fn, h, struct)
            except pynvml.NVMLError as exc:
                if exc.value == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue
                _raise_if_lost(exc)
                return [], exc.value
            self._proc_api = api
            if buffers is not None:  # pid_memory's light read, beside a snapshot: no reuse
                return _parse_list(result, struct), None
            key = (api, result)
            parsed = self._parsed_before.get(key)
            if parsed is None:
                parsed = _parse_list(result, struct)
            self._parsed[key] = parsed
            return parsed, None
        return [], pynvml.NVML_ERROR_FUNCTION_NOT_FOUND

    def _read_process_utilization(self, index: int, h: Any) -> _Utils:
        # The driver keeps per-process samples a few times a second; asking only for samples
        # newer than the last call gives nothing (NOT_FOUND) when snapshots come quickly, so
        # ask for a short window and take each process's newest sample.
        # The driver gives a sample only for a process busy within the window (NVML's
        # reference: "that had some non-zero utilization"), and NOT_FOUND when none was: a
        # listed process without one is idle (0 %), as nvitop shows it, not unknown.
        since = int((time.time() - self.PROCESS_UTIL_WINDOW_S) * 1_000_000)
        try:
            samples = self._buffers.process_utilization(h, since)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_FOUND:
                return _IDLE_UTILS
            _raise_if_lost(exc)
            return _NO_UTILS  # any other error: unknown, never idle
        return _Utils.of(samples) if samples else _IDLE_UTILS


_UNKNOWN_UTIL = (None, None)
_IDLE_UTIL = (0, 0)
_PID, _STAMP, _SM_MEM = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2, 3)


class _Utils:
    """A GPU's per-process utilisation samples, the newest of each process, as columns;
    ``absent`` is the reading of a process with none: idle (0, 0) when the driver answered,
    unknown (None, None) when it could not."""

    __slots__ = ("_by_pid", "absent", "mem", "pids", "sm")

    def __init__(
        self,
        pids: array[int],
        sm: array[int],
        mem: array[int],
        absent: tuple[int, int] | tuple[None, None] = _IDLE_UTIL,
    ) -> None:
        self.pids, self.sm, self.mem, self.absent = pids, sm, mem, absent
        self._by_pid: dict[int, tuple[int, int]] | None = None

    @classmethod
    def of(cls, samples: bytes) -> _Utils:
        """The samples of one call (several of a process: its newest is kept)."""
        if _COLUMNS:
            words = array("I", samples)
            pids = words[0::_UTIL_WORDS]
            if len(set(pids)) == len(pids):  # one sample each (nearly always): no sort
                return cls(pids, words[4::_UTIL_WORDS], words[5::_UTIL_WORDS])
        # Oldest first (a stable sort, nearly free on the driver's order): the newest sample of
        # each process is the last one the dict keeps.
        rows = sorted(_UNPACK_UTIL.iter_unpack(samples), key=_STAMP)
        newest = dict(zip(map(_PID, rows), map(_SM_MEM, rows), strict=True))
        return cls(
            array("I", newest),
            array("I", (sm for sm, _ in newest.values())),
            array("I", (mem for _, mem in newest.values())),
        )

    def by_pid(self) -> dict[int, tuple[int, int]]:
        """PID -> (SM %, memory %)."""
        if self._by_pid is None:
            self._by_pid = dict(zip(self.pids, zip(self.sm, self.mem, strict=True), strict=True))
        return self._by_pid

    def moved_since(self, last: _Utils) -> dict[int, tuple[int, int] | tuple[None, None]]:
        """The processes whose samples differ from ``last``'s, and their readings now."""
        pids = self.pids
        if pids == last.pids:  # the same processes in the same order: compare in place
            if self.sm == last.sm and self.mem == last.mem:
                return {}
            places = set(compress(count(), map(operator.ne, self.sm, last.sm)))
            places.update(compress(count(), map(operator.ne, self.mem, last.mem)))
            return {pids[j]: (self.sm[j], self.mem[j]) for j in places}
        now, before, absent = self.by_pid(), last.by_pid(), self.absent
        return {pid: now.get(pid, absent) for pid, _ in now.items() ^ before.items()}


_NO_UTILS = _Utils(array("I"), array("I"), array("I"), _UNKNOWN_UTIL)  # not supported, denied
_IDLE_UTILS = _Utils(array("I"), array("I"), array("I"))  # NOT_FOUND: no process was busy
# (type, used bytes, GPU instance id, compute instance id) of a PID's contexts on one GPU
_Merged = tuple[ProcessType, int | None, int | None, int | None]


def _parse_list(result: bytes, struct: type[ctypes.Structure]) -> list[_Listed]:
    """A process list's C array as (pid, used, GI id, CI id). Unpacked in C: at thousands of
    entries, reading ctypes fields one by one costs more than the driver call."""
    if struct is _ProcessInfoV1:  # no instance ids in the oldest struct
        return [
            (pid, None if used >= _NO_BYTES else used, None, None)
            for pid, used in _UNPACK_V1.iter_unpack(result)
        ]
    return [
        (
            pid,
            None if used >= _NO_BYTES else used,
            None if gi >= _NO_ID else gi,
            None if ci >= _NO_ID else ci,
        )
        for pid, used, gi, ci in _UNPACK_V2.iter_unpack(result)
    ]


def _merge(lists: tuple[list[_Listed], ...]) -> list[tuple[int, _Merged]]:
    """A GPU's compute and graphics lists as one entry per PID, by PID.

    A C+G process (a CUDA context in a graphics app) is in both lists, each entry with the
    process's whole memory on this GPU: counted once, as nvidia-smi and nvitop do."""
    by_pid: dict[int, _Merged] = {}
    for listed, ptype in zip(lists, (ProcessType.COMPUTE, ProcessType.GRAPHICS), strict=True):
        for pid, used, gi, ci in listed:
            seen = by_pid.get(pid)
            if seen is None:
                by_pid[pid] = (ptype, used, gi, ci)
            else:
                merged = ptype if seen[0] is ptype else ProcessType.MIXED
                gi, ci = (seen[2], seen[3]) if seen[2] is not None else (gi, ci)
                by_pid[pid] = (merged, _max_known(seen[1], used), gi, ci)
    return sorted(by_pid.items())


def _entry(index: int, key: tuple[Any, ...], driver_name: str | None) -> GpuProcess:
    pid, ptype, used, sm, mem, gi, ci = key
    return _make_entry(
        pid=pid,
        gpu_index=index,
        type=ptype,
        used_memory_bytes=used,
        sm_util_percent=sm,
        memory_util_percent=mem,
        driver_name=driver_name,
        gpu_instance_id=gi,
        compute_instance_id=ci,
    )


_make_entry = slot_maker(GpuProcess)  # a few hundred entries a tick at thousands of processes


class _GpuList:
    """A GPU's process entries of the last snapshot and what they were made from.

    An entry whose readings are the same is that object again (and the tuple, when all are):
    at thousands of inference workers most are (issue 17), and the pipe to gputop then carries
    only what changed (gputop.engine.process_delta).
    """

    __slots__ = ("by_key", "index", "keys", "listed", "lists", "merged", "out", "places", "utils")

    def __init__(
        self,
        index: int,
        lists: tuple[list[_Listed], ...],
        merged: list[tuple[int, _Merged]],
        utils: _Utils,
        keys: list[tuple[Any, ...]],
        out: list[GpuProcess],
        listed: tuple[GpuProcess, ...],
    ) -> None:
        self.index = index
        self.lists, self.merged, self.utils = lists, merged, utils
        self.keys, self.out, self.listed = keys, out, listed
        self.by_key = dict(zip(keys, out, strict=True))
        self.places: dict[int, int] | None = None  # PID -> place, made when first needed

    def moved(
        self, readings: dict[int, tuple[int, int] | tuple[None, None]], utils: _Utils
    ) -> tuple[GpuProcess, ...]:
        """The list with the entries of the PIDs in ``readings`` made anew from their readings
        (SM %, memory %), the contexts unchanged; ``utils`` are the samples they came from."""
        places = self.places
        if places is None:
            places = self.places = {pid: i for i, (pid, _) in enumerate(self.merged)}
        keys, out, by_key = self.keys, self.out, self.by_key
        for pid, (sm, mem) in readings.items():
            i = places.get(pid)
            if i is None:
                continue  # a sample of a process not listed (it left between the two calls)
            ptype, used, gi, ci = self.merged[i][1]
            key = (pid, ptype, used, sm, mem, gi, ci)
            old = out[i]
            del by_key[keys[i]]
            keys[i] = key
            out[i] = by_key[key] = _entry(self.index, key, old.driver_name)
        self.utils = utils
        self.listed = tuple(out)
        return self.listed


class _ProcessInfoV1(ctypes.Structure):
    """nvmlProcessInfo_v1_t, for drivers older than the _v2 call."""

    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _ProcessInfoV2(ctypes.Structure):
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


class _ProcessUtilSample(ctypes.Structure):
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
_UNPACK_V1 = struct.Struct("@IQ")
_UNPACK_V2 = struct.Struct("@IQII")
_UNPACK_UTIL = struct.Struct("@IQIIII")
# nvmlProcessUtilizationSample_t as 32-bit words: pid, (padding), timeStamp (two), smUtil,
# memUtil, encUtil, decUtil. Read as columns of an array, in C, where the layout is that.
_UTIL_WORDS = _UNPACK_UTIL.size // 4
_COLUMNS = array("I").itemsize == 4 and _UNPACK_UTIL.size == 32
assert _UNPACK_V1.size == ctypes.sizeof(_ProcessInfoV1)
assert _UNPACK_V2.size == ctypes.sizeof(_ProcessInfoV2)
assert _UNPACK_UTIL.size == ctypes.sizeof(_ProcessUtilSample)
_NO_BYTES = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE in a 64-bit field (Windows WDDM, say)
_NO_ID = 0xFFFFFFFF  # ... in an instance id (not in MIG mode)

# api -> (symbol suffix, struct), newest first
_PROCESS_CALLS: dict[str, tuple[str, type[ctypes.Structure]]] = {
    "v3": ("_v3", _ProcessInfoV2),
    "v2": ("_v2", _ProcessInfoV2),
    "v1": ("", _ProcessInfoV1),
}


class _ListBuffers:
    """Reusable arrays for NVML's list calls, which fill a caller's array of ``count`` slots.

    pynvml's wrappers ask for the size first and then for the list (two driver calls), and turn
    each entry into a Python object. Offering an array that is usually big enough makes one call,
    and the entries are read straight from ctypes. Not thread-safe: one per reader.
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
        """``fn(handle, &count, array)``: the filled entries' bytes."""
        return self._fill(struct, lambda array, count: fn(h, ctypes.byref(count), array))

    def process_utilization(self, h: Any, since_us: int) -> bytes:
        """nvmlDeviceGetProcessUtilization's samples newer than ``since_us``."""
        fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetProcessUtilization")
        stamp = ctypes.c_ulonglong(since_us)
        return self._fill(
            _ProcessUtilSample, lambda array, count: fn(h, array, ctypes.byref(count), stamp)
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


class _PcieReader:
    """PCIe rx/tx throughput, which NVML measures by sampling for ~20 ms per call.

    On real hardware two such calls per GPU would make a snapshot of 8 GPUs take a third of a
    second. When a call is that slow, a daemon thread of its own keeps the latest values and
    snapshots take those; when it is fast (the simulator, some drivers) it is read in line.
    """

    SLOW_S = 0.005

    def __init__(self, handles: list[Any | None], interval_s: float = 1.0) -> None:
        self._handles = handles
        self._interval_s = interval_s
        self._latest: dict[int, tuple[int | None, int | None]] = {}
        self._slow = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self, index: int, h: Any) -> tuple[int | None, int | None]:
        """(rx, tx) in KB/s for one GPU: in line, or the background thread's latest."""
        if self._slow and index in self._latest:
            return self._latest[index]
        started = time.monotonic()
        value = self._read_one(h)
        self._latest[index] = value
        if not self._slow and time.monotonic() - started > self.SLOW_S:
            self._slow = True
            self._thread = threading.Thread(target=self._run, name="gputop-pcie", daemon=True)
            self._thread.start()
        return value

    @staticmethod
    def _read_one(h: Any) -> tuple[int | None, int | None]:
        rx = _read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        tx = _read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        return rx, tx

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            for index, h in enumerate(self._handles):
                if h is None:
                    continue
                try:
                    self._latest[index] = self._read_one(h)
                except (_Lost, pynvml.NVMLError):
                    self._latest[index] = (None, None)

    def stop(self) -> None:
        """End the background thread, if any (it is a daemon: this never waits long)."""
        self._stop.set()


class _XidEvents:
    """Critical Xid errors, from one NVML event set every GPU is registered on.

    NVML keeps no history of them: the count and the newest are those the driver told of since
    this reader started. A GPU whose driver gives no such events (NOT_SUPPORTED, an old driver,
    a vGPU guest) has no count at all (None), rather than a 0 that would claim there were none.
    """

    MAX_PER_TICK = 256  # a flood of events is read over several ticks, never forever

    def __init__(self, handles: Sequence[Any | None]) -> None:
        self._set: Any = None
        self._by_address: dict[int, int] = {}  # device handle's address -> GPU index
        self.count: dict[int, int] = {}  # GPU index -> Xids seen (registered GPUs only)
        self.last: dict[int, tuple[int, float]] = {}  # GPU index -> (Xid, time.time())
        try:
            self._set = pynvml.nvmlEventSetCreate()
        except (pynvml.NVMLError, *_MISSING):
            return
        for index, h in enumerate(handles):
            if h is None:
                continue
            try:
                pynvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, self._set)
            except (pynvml.NVMLError, *_MISSING):
                continue
            self._by_address[_address(h)] = index
            self.count[index] = 0

    def drain(self) -> None:
        """Take every event waiting (without waiting for more)."""
        if not self.count:
            return
        for _ in range(self.MAX_PER_TICK):
            try:
                event = pynvml.nvmlEventSetWait_v2(self._set, 0)
            except (pynvml.NVMLError, *_MISSING):  # TIMEOUT: none left (else: next tick)
                return
            index = self._by_address.get(_address(event.device))
            if index is None or not event.eventType & pynvml.nvmlEventTypeXidCriticalError:
                continue
            self.count[index] += 1
            self.last[index] = (int(event.eventData), time.time())

    def close(self) -> None:
        if self._set is not None:
            with contextlib.suppress(pynvml.NVMLError, *_MISSING):
                pynvml.nvmlEventSetFree(self._set)
            self._set = None


def _address(pointer: Any) -> int:
    """The address an opaque NVML handle holds (an event's device is the GPU's own handle)."""
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


# NVML_GPM_METRIC_*: graphics engine, any tensor pipe and DRAM bandwidth utilisation (%).
_GPM_METRICS = (1, 5, 10)


class _Gpm:
    """One GPU's GPM (Hopper and later): two samples, the previous tick's and this one's.

    nvmlGpmMetricsGet works out the metrics between two samples; the previous one is kept from
    tick to tick so every tick costs one sample and one metrics call.
    """

    def __init__(self) -> None:
        self.previous: Any = None  # a sample holding the previous tick's reading
        self.current: Any = None
        self.valid = False  # ``previous`` holds a reading

    def read(self, h: Any) -> tuple[float | None, ...]:
        if self.previous is None:
            self.previous, self.current = pynvml.nvmlGpmSampleAlloc(), pynvml.nvmlGpmSampleAlloc()
        pynvml.nvmlGpmSampleGet(h, self.current)
        had, self.valid = self.valid, False
        values: tuple[float | None, ...] = (None,) * len(_GPM_METRICS)
        if had:
            request = pynvml.c_nvmlGpmMetricsGet_t()
            request.version = pynvml.NVML_GPM_METRICS_GET_VERSION
            request.numMetrics = len(_GPM_METRICS)
            request.sample1, request.sample2 = self.previous, self.current
            for i, metric in enumerate(_GPM_METRICS):
                request.metrics[i].metricId = metric
            pynvml.nvmlGpmMetricsGet(request)
            values = tuple(
                float(m.value) if m.nvmlReturn == pynvml.NVML_SUCCESS else None
                for m in (request.metrics[i] for i in range(len(_GPM_METRICS)))
            )
        self.previous, self.current = self.current, self.previous
        self.valid = True
        return values

    def free(self) -> None:
        for sample in (self.previous, self.current):
            if sample is not None:
                with contextlib.suppress(pynvml.NVMLError, *_MISSING):
                    pynvml.nvmlGpmSampleFree(sample)
        self.previous = self.current = None


class _CounterReader:
    """The exporter's counters (GpuCounters) of each GPU, a few cheap driver calls a tick.

    Every tick: energy, PCIe replays, NVLink throughput (one field-value call for all links),
    GPM (one sample and one metrics call) and the Xid events waiting. Remapped rows change only
    when the GPU retires a memory row, so they are read every REMAP_EVERY ticks. A call that
    fails costs only its reading (never the GPU); a GPU without GPM or NVLink is asked once.
    """

    REMAP_EVERY = 30

    def __init__(self, handles: Sequence[Any | None]) -> None:
        self.ticks = 0
        self._events = _XidEvents(handles)
        self._gpm: dict[int, _Gpm | None] = {}  # None: the GPU has no GPM
        self._links: dict[int, tuple[int, ...]] = {}  # active NVLink links, read once
        self._nvlink_requests: dict[int, Any] = {}  # GPU index -> its field-value array
        self._remapped: dict[int, tuple[Any, ...] | None] = {}

    def drain_events(self) -> None:
        """Take the Xid events that arrived since the last tick."""
        self._events.drain()

    def read(self, index: int, h: Any) -> GpuCounters | None:
        """The GPU's counters; None when it is lost (its sample says so next tick)."""
        try:
            return self._read(index, h)
        except _Lost:
            return None

    def _read(self, index: int, h: Any) -> GpuCounters:
        if index not in self._remapped or self.ticks % self.REMAP_EVERY == 0:
            self._remapped[index] = _soft(pynvml.nvmlDeviceGetRemappedRows, h)
        rows = self._remapped[index]
        count = self._events.count.get(index)
        xid, at = self._events.last.get(index, (None, None))
        gpm = self._read_gpm(index, h)
        return GpuCounters(
            index=index,
            energy_mj=_soft(pynvml.nvmlDeviceGetTotalEnergyConsumption, h),
            pcie_replay_count=_soft(pynvml.nvmlDeviceGetPcieReplayCounter, h),
            remapped_rows_correctable=None if rows is None else int(rows[0]),
            remapped_rows_uncorrectable=None if rows is None else int(rows[1]),
            remapped_rows_pending=None if rows is None else bool(rows[2]),
            remapped_rows_failure=None if rows is None else bool(rows[3]),
            nvlink_data_kib=self._read_nvlink(index, h),
            xid_count=count,
            xid_last=xid,
            xid_last_at_wall=at,
            gpm_graphics_percent=gpm[0],
            gpm_tensor_percent=gpm[1],
            gpm_dram_percent=gpm[2],
        )

    def _read_gpm(self, index: int, h: Any) -> tuple[float | None, ...]:
        if index not in self._gpm:
            support = _soft(pynvml.nvmlGpmQueryDeviceSupport, h)
            self._gpm[index] = _Gpm() if support and support.isSupportedDevice else None
        gpm = self._gpm[index]
        if gpm is None:
            return (None,) * len(_GPM_METRICS)
        try:
            return gpm.read(h)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _Lost from None
        except _MISSING:
            pass
        gpm.valid = False  # start over from the next sample
        return (None,) * len(_GPM_METRICS)

    def _read_nvlink(self, index: int, h: Any) -> int | None:
        """Data sent and received over all the GPU's active links since the driver loaded (KiB)."""
        links = self._links.get(index)
        if links is None:
            links = self._links[index] = _active_links(h)
        if not links:
            return None
        request = self._nvlink_requests.get(index)
        if request is None:  # made once: 2 fields a link, up to 36
            fields = [(f, link) for link in links for f in _NVLINK_FIELDS]
            request = self._nvlink_requests[index] = _field_request(fields)
        try:
            values = _field_values(h, request)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _Lost from None
            return None
        except _MISSING:
            return None
        known = [v for v in values if v.nvmlReturn == pynvml.NVML_SUCCESS]
        if not known:
            return None
        return sum(int(getattr(v.value, _VALUE_MEMBERS[v.valueType])) for v in known)

    def close(self) -> None:
        self._events.close()
        for gpm in self._gpm.values():
            if gpm is not None:
                gpm.free()


# NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX and _RX: a link's data counters in KiB (scopeId: link).
_NVLINK_FIELDS = (138, 139)
_NVLINK_MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS


class _FieldValue(ctypes.Structure):
    """nvmlFieldValue_t as a plain Structure (pynvml's runs Python code on every member read)."""

    _fields_ = pynvml.c_nvmlFieldValue_t._fields_


def _field_request(fields: Sequence[tuple[int, int]]) -> Any:
    """An array of (field id, scope id) requests for nvmlDeviceGetFieldValues, to be reused."""
    array = (_FieldValue * len(fields))()
    for slot, (field_id, scope) in zip(array, fields, strict=True):
        slot.fieldId, slot.scopeId = field_id, scope
    return array


def _field_values(h: Any, request: Any) -> Any:
    """nvmlDeviceGetFieldValues on a reused request array; the same array, filled."""
    fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetFieldValues")
    ret = fn(h, ctypes.c_int32(len(request)), ctypes.byref(request))
    if ret != pynvml.NVML_SUCCESS:
        raise pynvml.NVMLError(ret)
    return request


def _active_links(h: Any) -> tuple[int, ...]:
    """The GPU's active NVLink links (none: a board without NVLink)."""
    active = []
    for link in range(int(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", _NVLINK_MAX_LINKS))):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(h, link)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise _Lost from None
            break  # NOT_SUPPORTED (no NVLink) or INVALID_ARGUMENT (past the last link)
        except _MISSING:
            break
        if state:
            active.append(link)
    return tuple(active)


def _memory_temperature(h: Any) -> int | None:
    """HBM temperature, which NVML only offers as a field value."""
    values = _first(lambda: pynvml.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP]))
    if not values or values[0].nvmlReturn != pynvml.NVML_SUCCESS:
        return None
    value = int(values[0].value.uiVal)
    return value if 0 < value < 200 else None  # 0 or garbage: no sensor


_Listed = tuple[int, int | None, int | None, int | None]  # pid, used bytes, GI id, CI id
_MAX_MIG_DEVICES = 64  # more than any GPU has: a driver answering nonsense is not asked forever


def _soft(call: Callable[..., T], *args: Any) -> T | None:
    """A MIG call's answer, or None whatever the driver (or an older pynvml) says, but for a
    lost GPU: a GPU's MIG part must never cost the GPU its readings."""
    try:
        return call(*args)
    except pynvml.NVMLError as exc:
        if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
            raise _Lost from None
        return None
    except _MISSING:  # a binding without the call, or a struct without the member
        return None


def _int_of(struct: Any, name: str) -> int | None:
    value = getattr(struct, name, None) if struct is not None else None
    return None if value is None else int(value)


def _mig_handles(h: Any) -> list[tuple[int, Any]]:
    """(index, handle) of each MIG device of a GPU in MIG mode; indices without one are skipped."""
    count = _soft(pynvml.nvmlDeviceGetMaxMigDeviceCount, h)
    if not count:
        return []
    out = []
    for i in range(min(int(count), _MAX_MIG_DEVICES)):
        mh = _soft(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
        if mh is not None:
            out.append((i, mh))
    return out


def _instances(
    migs: Sequence[tuple[MigDevice, Any]],
) -> list[tuple[int | None, int | None, Any]]:
    """Each MIG device's GPU and compute instance ids, and its handle."""
    return [(m.gpu_instance_id, m.compute_instance_id, mh) for m, mh in migs]


def _in_mig_mode(h: Any) -> bool:
    mode = _soft(pynvml.nvmlDeviceGetMigMode, h)
    return bool(mode and mode[0])


def _mig_keys(h: Any) -> tuple[MigKey, ...]:
    """The MIG devices of a GPU in MIG mode, as CUDA_VISIBLE_DEVICES may name them."""
    if not _in_mig_mode(h):
        return ()
    keys = []
    for _, mh in _mig_handles(h):
        uuid = _text(_soft(pynvml.nvmlDeviceGetUUID, mh))
        if uuid:
            keys.append(
                MigKey(
                    uuid=uuid,
                    gpu_instance_id=_soft(pynvml.nvmlDeviceGetGpuInstanceId, mh),
                    compute_instance_id=_soft(pynvml.nvmlDeviceGetComputeInstanceId, mh),
                )
            )
    return tuple(keys)


def _mig_identity(h: Any, mh: Any, st: _Static) -> dict[str, Any]:
    """What does not change of a MIG device: its ids, slices and profile name."""
    attrs = _soft(pynvml.nvmlDeviceGetAttributes, mh)
    return {
        "gpu_instance_id": _soft(pynvml.nvmlDeviceGetGpuInstanceId, mh),
        "compute_instance_id": _soft(pynvml.nvmlDeviceGetComputeInstanceId, mh),
        "gpu_instance_slices": _int_of(attrs, "gpuInstanceSliceCount"),
        "compute_instance_slices": _int_of(attrs, "computeInstanceSliceCount"),
        "multiprocessor_count": _int_of(attrs, "multiprocessorCount"),
        "profile": _profile_name(h, attrs, st),
    }


def _profile_name(h: Any, attrs: Any, st: _Static) -> str | None:
    """The MIG device's name as nvidia-smi gives it: its GPU instance profile's name
    (``3g.40gb``), after ``<c>c.`` when its compute instance is smaller (``1c.3g.40gb``).

    The profile is the one of the GPU's whose slices and memory (then media engines) are the
    device's; where none is, or the driver names none, the name is made as NVIDIA's MIG guide
    names devices: slices, then memory in whole GB rounded up.
    """
    if attrs is None:
        return None
    slices, ci_slices = int(attrs.gpuInstanceSliceCount), int(attrs.computeInstanceSliceCount)
    memory_mb = int(attrs.memorySizeMB)
    if not slices or not memory_mb:
        return None
    if not st.mig_profiles:  # none yet (or none read: asked again for a new device)
        st.mig_profiles = _read_profiles(h)
    matches = [p for p in st.mig_profiles if (p.slices, p.memory_mb) == (slices, memory_mb)]
    media = (
        int(attrs.sharedDecoderCount),
        int(attrs.sharedEncoderCount),
        int(attrs.sharedJpegCount),
        int(attrs.sharedOfaCount),
    )
    matches = [p for p in matches if p.media == media] or matches
    name = matches[0].name if matches else None
    if name is None:
        name = f"{slices}g.{math.ceil(memory_mb / 1024)}gb"
    return f"{ci_slices}c.{name}" if 0 < ci_slices < slices else name


def _read_profiles(h: Any) -> tuple[_Profile, ...]:
    """Every GPU instance profile the GPU has (asked once per GPU, when first needed)."""
    out: list[_Profile] = []
    for profile in range(int(getattr(pynvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 18))):
        info = _soft(lambda p=profile: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, p))
        if info is None:  # a driver without the named (v2) struct: the first one
            info = _soft(lambda p=profile: pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, p, 1))
        if info is None:
            continue
        name = _text(getattr(info, "name", None))
        out.append(
            _Profile(
                name=name.removeprefix("MIG ").strip() or None if name else None,
                slices=int(info.sliceCount),
                memory_mb=int(info.memorySizeMB),
                media=(
                    int(info.decoderCount),
                    int(info.encoderCount),
                    int(info.jpegCount),
                    int(info.ofaCount),
                ),
            )
        )
    return tuple(out)


def _max_known(a: int | None, b: int | None) -> int | None:
    """The larger of two readings, either of which may be unknown."""
    if a is None or b is None:
        return a if b is None else b
    return max(a, b)


# -- readings a query asks for (gputop query) ----------------------------------------------------
# The NVML calls here are named by engine.probes tables (strings) and made only for the fields
# a query asked for. Every answer is kept: a value, or why there is none (the driver's error).

_UNAVAILABLE: dict[int, Unavailable] = {
    pynvml.NVML_ERROR_NOT_SUPPORTED: Unavailable.NOT_SUPPORTED,
    pynvml.NVML_ERROR_NO_PERMISSION: Unavailable.NO_PERMISSION,
    pynvml.NVML_ERROR_GPU_IS_LOST: Unavailable.GPU_LOST,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: Unavailable.NOT_FOUND,
    getattr(pynvml, "NVML_ERROR_DEPRECATED", 26): Unavailable.DEPRECATED,
}
# The member of an NVML field value's union that holds it, by its valueType (nvmlValueType_t).
_VALUE_MEMBERS = ("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal")
# What a missing binding, constant or struct member raises: a pynvml older than the field.
_MISSING = (AttributeError, TypeError, KeyError, IndexError)


def _why(code: int) -> Unavailable:
    """An NVML return code in words (every code not named here is an unknown error)."""
    return _UNAVAILABLE.get(code, Unavailable.UNKNOWN)


def _const(arg: str | int) -> Any:
    """A probe argument: a pynvml constant by name, or the number itself."""
    return getattr(pynvml, arg) if isinstance(arg, str) else arg


class _Asked:
    """The probes a query asked for, read for one GPU at a time (one driver call per source)."""

    def __init__(self, probes: Iterable[Probe], explain: Iterable[str]) -> None:
        self._probes = tuple(dict.fromkeys(probes))
        self._explain = tuple(a for a in dict.fromkeys(explain) if a in TYPED)

    def read(self, h: Any, values: Mapping[str, Any]) -> dict[str, Any]:
        """GpuSample's ``extra`` and ``unavailable`` for one GPU whose readings are ``values``."""
        # (key, probe, is an extra): an explained reading is on the sample already
        keyed = [(p.key, p, True) for p in self._probes]
        keyed += [(a, TYPED[a], False) for a in self._explain if values.get(a) is None]
        answers = self._field_values(h, [p for _, p, _ in keyed if p.field is not None])
        extra: list[tuple[str, Scalar]] = []
        unavailable: list[tuple[str, Unavailable]] = []
        for key, probe, is_extra in keyed:
            if probe.field is None and probe.source not in answers:
                answers[probe.source] = self._call(h, probe)
            answer = answers[probe.source if probe.field is None else probe.key]
            value = answer if isinstance(answer, Unavailable) else _part(answer, probe)
            if isinstance(value, Unavailable):
                unavailable.append((key, value))
            elif is_extra:
                extra.append((key, value))
        return {"extra": tuple(extra), "unavailable": tuple(unavailable)}

    @staticmethod
    def _call(h: Any, probe: Probe) -> Any:
        """The call's answer, or why there is none."""
        try:
            fn = getattr(pynvml, probe.call)
            if probe.out is not None:
                out = getattr(pynvml, probe.out)()
                if probe.version is not None:
                    out.version = getattr(pynvml, probe.version)
                fn(h, ctypes.byref(out))
                return out
            args = [_const(a) for a in probe.args]
            return fn(h, *args) if probe.device else fn(*args)
        except pynvml.NVMLError as exc:
            return _why(exc.value)
        except _MISSING:
            return Unavailable.NOT_FOUND

    @staticmethod
    def _field_values(h: Any, probes: list[Probe]) -> dict[Any, Any]:
        """Every wanted NVML field value in one call: value or Unavailable, by probe key."""
        wanted: dict[str, Any] = {}
        out: dict[Any, Any] = {}
        for p in probes:
            try:
                fid = getattr(pynvml, str(p.field))
                wanted[p.key] = (fid, getattr(pynvml, p.scope)) if p.scope else fid
            except AttributeError:
                out[p.key] = Unavailable.NOT_FOUND
        if not wanted:
            return out
        try:
            results = pynvml.nvmlDeviceGetFieldValues(h, list(wanted.values()))
        except pynvml.NVMLError as exc:
            return {**out, **dict.fromkeys(wanted, _why(exc.value))}
        for name, v in zip(wanted, results, strict=True):
            if v.nvmlReturn != pynvml.NVML_SUCCESS:
                out[name] = _why(v.nvmlReturn)
            else:
                out[name] = getattr(v.value, _VALUE_MEMBERS[v.valueType])
        return out


def _part(answer: Any, probe: Probe) -> Scalar | Unavailable:
    """The probe's value from a call's answer, as a plain int, float or str."""
    if probe.count:
        return len(answer)
    try:
        if isinstance(probe.part, int):
            answer = answer[probe.part]
        elif probe.part is not None:
            answer = _member(answer, probe.part)
    except _MISSING:
        return Unavailable.NOT_FOUND
    try:
        return _scalar(answer)
    except (TypeError, ValueError):  # an answer of a shape this binding did not promise
        return Unavailable.UNKNOWN


def _member(struct: Any, name: str) -> Any:
    """A struct member; char members raw (pynvml's structs decode them as text, which fails)."""
    ctype = dict(type(struct)._fields_)[name]
    if ctype is ctypes.c_char or getattr(ctype, "_type_", None) in (ctypes.c_char, ctypes.c_uint8):
        where = getattr(type(struct), name)
        return ctypes.string_at(ctypes.addressof(struct) + where.offset, where.size)
    return getattr(struct, name)


def _scalar(value: Any) -> Scalar:
    """bytes: one byte as a number, text as text, anything else as 0x-hex (empty when all 0).

    None is a call that succeeded with nothing to return (nvmlDeviceValidateInforom): 1.
    """
    if value is None:
        return 1
    if isinstance(value, bytes):
        if len(value) == 1:
            return value[0]
        text = value.rstrip(b"\0")
        if text.isascii() and text.decode().isprintable():
            return clean(text.decode())
        return "0x" + value.hex().upper()
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, float) else int(value)
