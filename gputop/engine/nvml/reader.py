"""NvmlSource: every GPU read once a snapshot, into an immutable Snapshot.

Each field is read on its own under the error policy of gputop.engine.nvml.calls; the parts
that keep state from tick to tick live in their own modules (processes, MIG, counters, query
probes); this module reads the rest (memory, clocks, power, PCIe, ...) and puts it together.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

import pynvml

from gputop.engine.cuda_index import DeviceKey, cuda_index_map, cuda_mig_index_map
from gputop.engine.in_flight import calling, reading_gpu
from gputop.engine.model import (
    THROTTLE_REASON_BITS,
    GpuCounters,
    GpuSample,
    GpuState,
    PidMemory,
    Snapshot,
    SystemInfo,
)
from gputop.engine.nvml.calls import Lost, first, is_lost, read
from gputop.engine.nvml.counters import CounterReader
from gputop.engine.nvml.health import HealthReader
from gputop.engine.nvml.mig import read_mig
from gputop.engine.nvml.processes import ProcessReader
from gputop.engine.nvml.query import Asked
from gputop.engine.nvml.static import Static, read_static, read_system
from gputop.engine.probes import Probe
from gputop.engine.sanitize import clean
from gputop.engine.source import SourceBase
from gputop.errors import DriverError, DriverMissing

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


class NvmlSource(SourceBase):
    """Reads complete Snapshots from NVML (real or simulated). Thread-safe for one reader."""

    # Per-process utilisation read for at most about this many listed processes a snapshot:
    # past it, GPUs take turns (every other snapshot at 5,000, every 4th at 10,000), as each
    # new SM % is a new entry and a new row all the way to the screen (the rules of per-tick work:
    # gputop.engine.changes). A GPU whose process list changed is read at once. nvitop refreshes
    # its process list every 2 s.
    PROCESS_UTIL_PER_SNAPSHOT = 2500
    _asked: Asked | None = None  # readings a query asked for (request_probes)

    def __init__(
        self,
        *,
        environ: Mapping[str, str] | None = None,
        simulated: bool = False,
        counters: bool = True,
        dev_dir: str = "/dev",
        pcie_in_line: bool = False,
        clock: Callable[[], float] = time.monotonic,
        slow_every_s: float = 0.0,
    ):
        """Open NVML. ``counters``: also read the exporter's GpuCounters each snapshot; without
        them Snapshot.counters is empty and a tick is cheaper (Xid events are read either way,
        for the health verdict).
        ``dev_dir``: where this box's /dev/nvidia* files are (a simulated box has its own).
        ``pcie_in_line``: never move PCIe reads to their own thread, however slow (a simulated
        box on a hand-moved clock: that thread would read on the real clock).
        ``slow_every_s``: the readings that change only by an administrator's action or rarely
        (_read_slow) are read at most once in this many seconds and kept in between (a monitor
        left running passes gputop.sources.SLOW_EVERY_S: a change is seen that late at most, and
        a 0.2 s interval does not read them fifty times over); 0: every reading (one-shots,
        query loops, the API: what they print is read then).
        ``clock``: seconds, for that cadence; a simulated box on a hand-moved clock passes its own.
        """
        self.simulated = simulated
        self.dev_dir = dev_dir
        self._environ = os.environ if environ is None else environ
        self._seq = 0
        self._lock = threading.Lock()
        self._processes = ProcessReader()
        self._clock = clock
        self._slow_every_s = slow_every_s
        # GPU -> (when its slow readings were read, on ``clock``; those readings)
        self._slow: dict[int, tuple[float, dict[str, Any]]] = {}
        try:
            with calling("nvmlInitWithFlags"):  # the C function pynvml.nvmlInit() calls
                pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            message = _INIT_MESSAGES.get(exc.value) or f"cannot initialise NVML: {exc}"
            if exc.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
                raise DriverMissing(message) from None
            raise DriverError(message) from None
        try:
            with calling("nvmlDeviceGetCount_v2"):
                count = pynvml.nvmlDeviceGetCount()
        except pynvml.NVMLError as exc:
            raise DriverError(f"cannot count GPUs: {exc}") from None
        self._handles: list[Any | None] = []
        self._mig_cuda: dict[str, int] = {}  # MIG device UUID -> CUDA index
        self._handle_errors: dict[int, pynvml.NVMLError] = {}  # why a GPU has no handle
        self._static: list[Static] = []
        for i in range(count):
            try:
                with calling("nvmlDeviceGetHandleByIndex_v2"):
                    self._handles.append(pynvml.nvmlDeviceGetHandleByIndex(i))
            except pynvml.NVMLError as exc:
                self._handles.append(None)
                self._handle_errors[i] = exc
            self._static.append(read_static(self._handles[-1]))
        self._assign_cuda_indices()
        self._system = read_system(simulated=simulated)
        self._pcie = _PcieReader(self._handles, in_line=pcie_in_line)
        # Always: the health verdict's readings (Xid events, memory flags), cheap.
        self._health = HealthReader(self._handles)
        # Opt-in (the exporter, --json): the dashboard never shows them, and they made a tick
        # about half as expensive again.
        self._counters = CounterReader(self._health) if counters else None

    @property
    def system(self) -> SystemInfo:
        """Host and driver facts (read at start)."""
        return self._system

    def close(self) -> None:
        """Release NVML."""
        self._pcie.stop()
        if self._counters is not None:
            self._counters.close()
        self._health.close()
        with contextlib.suppress(pynvml.NVMLError), calling("nvmlShutdown"):
            pynvml.nvmlShutdown()

    def request_probes(self, probes: Iterable[Probe], explain: Iterable[str] = ()) -> None:
        """From the next snapshot on, also read ``probes`` into each GpuSample's ``extra``, and
        for each GpuSample attribute in ``explain`` that is None, record why (``unavailable``).
        """
        self._asked = Asked(probes, explain)

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
        self._health.begin()
        counters: list[GpuCounters] = []
        self._processes.begin(seq)
        for i in range(len(self._handles)):
            if i in skip:
                continue
            gpu = self._read_gpu(i)
            read.append(gpu)
            if reader is not None and gpu.state is GpuState.OK:
                reading = reader.read(i, self._handles[i])
                if reading is not None:
                    counters.append(reading)
        self._health.end()
        gpus = tuple(read)
        self._processes.end(gpus, self.PROCESS_UTIL_PER_SNAPSHOT)
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
        that is lost or fails its list call is left out. On a GPU the PIDs use, one more call
        (nvmlDeviceGetMemoryInfo) for its free and total memory ("will the next batch fit?").
        """
        wanted = frozenset(pids)
        mono = time.monotonic()
        by_gpu: list[tuple[int, int]] = []
        free: list[tuple[int, int, int]] = []
        for index, h in enumerate(self._handles):
            if h is None:
                continue
            try:
                used = self._processes.listed_memory(h)
                mine = sum(used.get(pid) or 0 for pid in wanted)
                mem = read(pynvml.nvmlDeviceGetMemoryInfo, h) if mine else None
            except (Lost, pynvml.NVMLError):
                continue
            by_gpu.append((index, mine))
            if mem is not None:
                free.append((index, int(mem.free), int(mem.total)))
        cuda = tuple(
            (i, st.cuda_index) for i, st in enumerate(self._static) if st.cuda_index is not None
        )
        return PidMemory(
            taken_at_mono=mono,
            by_gpu_bytes=tuple(by_gpu),
            free_bytes=tuple(free),
            cuda_indices=cuda,
        )

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
            with reading_gpu(index):
                return GpuSample(**identity, **self._read_dynamic(index, handle, st))
        except Lost:
            # Back from a reset (if ever), it may come with other modes: read them all at once.
            self._slow.pop(index, None)
            return GpuSample(state=GpuState.LOST, error=LOST_TEXT, **identity)
        except pynvml.NVMLError as exc:  # a bug here, not the driver's: every call is guarded
            return GpuSample(state=GpuState.ERROR, error=clean(str(exc)), **identity)

    def _unreadable(self, index: int, identity: dict[str, Any]) -> GpuSample:
        """A GPU the driver gave no handle for: lost before we started, or another failure."""
        exc = self._handle_errors.get(index)
        if exc is not None and is_lost(exc):
            return GpuSample(state=GpuState.LOST, error=LOST_TEXT, **identity)
        why = f"no handle from the driver: {exc}" if exc is not None else "no handle"
        return GpuSample(state=GpuState.ERROR, error=clean(why), **identity)

    def _read_dynamic(self, index: int, h: Any, st: Static) -> dict[str, Any]:
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
        util = read(pynvml.nvmlDeviceGetUtilizationRates, h)
        if util is not None:
            values["utilization_gpu_percent"] = int(util.gpu)
            values["utilization_memory_percent"] = int(util.memory)
        enc = read(pynvml.nvmlDeviceGetEncoderUtilization, h)
        dec = read(pynvml.nvmlDeviceGetDecoderUtilization, h)
        values["encoder_percent"] = enc[0] if enc else None
        values["decoder_percent"] = dec[0] if dec else None
        values["temperature_c"] = first(
            (
                "nvmlDeviceGetTemperature",
                lambda: pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU),
            ),
            (
                "nvmlDeviceGetTemperatureV",
                lambda: pynvml.nvmlDeviceGetTemperatureV(h, pynvml.NVML_TEMPERATURE_GPU),
            ),
        )
        values["temperature_memory_c"], values["recovery_action"] = _field_readings(h)
        values["fan_speeds_percent"] = self._read_fans(h, st)
        values["power_draw_mw"] = read(pynvml.nvmlDeviceGetPowerUsage, h)
        for key, clock in (
            ("clock_graphics_mhz", pynvml.NVML_CLOCK_GRAPHICS),
            ("clock_sm_mhz", pynvml.NVML_CLOCK_SM),
            ("clock_memory_mhz", pynvml.NVML_CLOCK_MEM),
        ):
            values[key] = read(pynvml.nvmlDeviceGetClockInfo, h, clock)
        pstate = read(pynvml.nvmlDeviceGetPerformanceState, h)
        values["performance_state"] = None if pstate is None or pstate >= 32 else pstate
        values["throttle_reasons"] = self._read_throttle(h)
        values.update(self._health.read(index, h, values["throttle_reasons"]))
        values["pcie_rx_kbps"], values["pcie_tx_kbps"] = self._pcie.read(index, h)
        values.update(self._read_slow(index, h))
        migs = read_mig(index, h, st.mig, self._mig_cuda) if values["mig_mode"] else []
        values["mig_devices"] = tuple(device for device, _ in migs)
        values["processes"], values["process_list_error"] = self._processes.read(
            index, h, migs, mig_mode=bool(values["mig_mode"])
        )
        if self._asked is not None:  # only gputop query asks; the dashboard's tick never does
            values.update(self._asked.read(h, values))
        return values

    def _read_slow(self, index: int, h: Any) -> dict[str, Any]:
        """The readings that change only by an administrator's action or rarely: read when
        ``slow_every_s`` has passed since they last were (the first reading: now), else kept.

        A failed one is None until the next read, as any reading; a lost GPU raises Lost from
        the readings read every time, so keeping these never hides it.
        """
        now = self._clock()
        kept = self._slow.get(index)
        if kept is not None and 0.0 <= now - kept[0] < self._slow_every_s:  # back: read again
            return kept[1]
        values = _slow_readings(h)
        self._slow[index] = (now, values)
        return values

    def _read_memory(self, h: Any) -> dict[str, Any]:
        values: dict[str, Any] = {}
        mem = first(
            (
                "nvmlDeviceGetMemoryInfo_v2",
                lambda: pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2),
            )
        )
        if mem is not None:
            values["memory_reserved_bytes"] = int(mem.reserved)
        else:
            mem = read(pynvml.nvmlDeviceGetMemoryInfo, h)
        if mem is not None:
            values["memory_total_bytes"] = int(mem.total)
            values["memory_used_bytes"] = int(mem.used)
            values["memory_free_bytes"] = int(mem.free)
        bar1 = read(pynvml.nvmlDeviceGetBAR1MemoryInfo, h)
        if bar1 is not None:
            values["bar1_total_bytes"] = int(bar1.bar1Total)
            values["bar1_used_bytes"] = int(bar1.bar1Used)
        return values

    def _read_fans(self, h: Any, st: Static) -> tuple[int, ...] | None:
        if st.fans:
            speeds = [read(pynvml.nvmlDeviceGetFanSpeed_v2, h, i) for i in range(st.fans)]
            known = tuple(s for s in speeds if s is not None)
            return known or None
        if st.fans is None:  # a driver without nvmlDeviceGetNumFans
            speed = read(pynvml.nvmlDeviceGetFanSpeed, h)
            return (speed,) if speed is not None else None
        return None

    def _read_throttle(self, h: Any) -> tuple[str, ...] | None:
        mask = first(
            (
                "nvmlDeviceGetCurrentClocksEventReasons",
                lambda: pynvml.nvmlDeviceGetCurrentClocksEventReasons(h),
            ),
            (
                "nvmlDeviceGetCurrentClocksThrottleReasons",
                lambda: pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(h),
            ),
        )
        if mask is None:
            return None
        return tuple(name for name, bit in THROTTLE_REASON_BITS.items() if mask & bit)


class _PcieReader:
    """PCIe rx/tx throughput, which NVML measures by sampling for ~20 ms per call.

    On real hardware two such calls per GPU would make a snapshot of 8 GPUs take a third of a
    second. When a call is that slow, a daemon thread of its own keeps the latest values and
    snapshots take those; when it is fast (the simulator, some drivers) it is read in line.
    ``in_line``: always in line.
    """

    SLOW_S = 0.005

    def __init__(
        self, handles: list[Any | None], interval_s: float = 1.0, *, in_line: bool = False
    ) -> None:
        self._handles = handles
        self._interval_s = interval_s
        self._in_line = in_line
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
        if not (self._slow or self._in_line) and time.monotonic() - started > self.SLOW_S:
            self._slow = True
            self._thread = threading.Thread(target=self._run, name="gputop-pcie", daemon=True)
            self._thread.start()
        return value

    @staticmethod
    def _read_one(h: Any) -> tuple[int | None, int | None]:
        rx = read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_RX_BYTES)
        tx = read(pynvml.nvmlDeviceGetPcieThroughput, h, pynvml.NVML_PCIE_UTIL_TX_BYTES)
        return rx, tx

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            for index, h in enumerate(self._handles):
                if h is None:
                    continue
                try:
                    self._latest[index] = self._read_one(h)
                except (Lost, pynvml.NVMLError):
                    self._latest[index] = (None, None)

    def stop(self) -> None:
        """End the background thread, if any (it is a daemon: this never waits long)."""
        self._stop.set()


def _slow_readings(h: Any) -> dict[str, Any]:
    """The GpuSample readings NvmlSource may read only every ``slow_every_s``, and why each is
    slow."""
    values: dict[str, Any] = {}
    # Set by an administrator (nvidia-smi -pl) or a host's power capping, not by the load.
    values["power_limit_mw"] = read(pynvml.nvmlDeviceGetEnforcedPowerLimit, h)
    # The link trains to a new speed or width on a power-state change or a link fault: the
    # panel's "gen4 x16" lagging by a few seconds misleads no one.
    values["pcie_gen"] = read(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h)
    values["pcie_width"] = read(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h)
    # A count of faults that rises a few times in a GPU's life; its health verdict and the
    # panel's "ECC n" can wait a few seconds, as the Xid events that come with it do not.
    values["ecc_errors_uncorrected_volatile"] = read(
        pynvml.nvmlDeviceGetTotalEccErrors,
        h,
        pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        pynvml.NVML_VOLATILE_ECC,
    )
    # Modes an administrator sets (nvidia-smi -c, -pm, -mig; MIG mode needs a GPU reset too).
    mode = read(pynvml.nvmlDeviceGetComputeMode, h)
    values["compute_mode"] = COMPUTE_MODES.get(mode) if mode is not None else None
    persistence = read(pynvml.nvmlDeviceGetPersistenceMode, h)
    values["persistence_mode"] = bool(persistence) if persistence is not None else None
    mig = read(pynvml.nvmlDeviceGetMigMode, h)
    values["mig_mode"] = bool(mig[0]) if mig else None
    return values


# Read in one nvmlDeviceGetFieldValues call a tick: the HBM temperature, which NVML only offers
# as a field value, and the driver's recovery action (the health verdict's first reading).
_FIELDS = (pynvml.NVML_FI_DEV_MEMORY_TEMP, 230)  # 230: NVML_FI_DEV_GET_GPU_RECOVERY_ACTION


def _field_readings(h: Any) -> tuple[int | None, int | None]:
    """(memory temperature in °C, recovery action): each None where the driver gives none."""
    values = first(
        (
            "nvmlDeviceGetFieldValues",
            lambda: pynvml.nvmlDeviceGetFieldValues(h, list(_FIELDS)),
        )
    )
    if not values or len(values) != len(_FIELDS):
        return None, None
    temp, action = (
        int(v.value.uiVal) if v.nvmlReturn == pynvml.NVML_SUCCESS else None for v in values
    )
    return (temp if temp is not None and 0 < temp < 200 else None), action  # 0: no sensor
