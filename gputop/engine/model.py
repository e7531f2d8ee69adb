"""Immutable, typed snapshots of the GPUs and the processes that use them.

Stdlib only: every other module (driver layer, sampler, views, UI) speaks these types.
Units are in the field names; ``None`` means the driver does not report the field (shown as N/A).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from operator import attrgetter

# NVML's clocks event (throttle) reason bits, by the names GpuSample.throttle_reasons uses.
THROTTLE_REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


class GpuState(StrEnum):
    """Health of one GPU as the driver layer saw it in this snapshot."""

    OK = "ok"
    LOST = "lost"  # fell off the bus (NVML_ERROR_GPU_IS_LOST): only a reset or reboot helps
    ERROR = "error"  # the driver gave no handle for it, for another reason than a lost GPU
    # The driver did not answer for this GPU in time (a call hung): no reading, see stale_s.
    NOT_RESPONDING = "not-responding"


class Unavailable(StrEnum):
    """Why the driver gave no value for one reading (the NVML error, in words)."""

    NOT_SUPPORTED = "not supported"  # NVML_ERROR_NOT_SUPPORTED
    NO_PERMISSION = "no permission"  # NVML_ERROR_NO_PERMISSION
    GPU_LOST = "gpu lost"  # NVML_ERROR_GPU_IS_LOST
    NOT_FOUND = "not in this driver"  # NVML_ERROR_FUNCTION_NOT_FOUND, or a binding without it
    DEPRECATED = "deprecated"  # NVML_ERROR_DEPRECATED
    UNKNOWN = "unknown error"  # NVML_ERROR_UNKNOWN and every other error


Scalar = int | float | str  # one extra reading, as the driver gave it


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A critical Xid error the driver told of (NVML keeps none from before gputop started)."""

    xid: int
    at_wall: float  # when gputop was told of it (time.time())


class ProcessType(StrEnum):
    """The kind of GPU context NVML reports for a process."""

    COMPUTE = "compute"
    GRAPHICS = "graphics"
    MIXED = "compute+graphics"


class ProcState(StrEnum):
    """What gputop concludes about a GPU-related process."""

    ACTIVE = "active"  # NVML lists a context for it
    HOLDER = "holder"  # has /dev/nvidia* open but NVML lists no context: a stuck worker
    DEFUNCT = "defunct"  # zombie (state Z): its parent is not reaping it
    ORPHAN = "orphan"  # its original parent is gone while it still holds the GPU
    STOPPED = "stopped"  # state T
    NAMESPACE = "other-namespace"  # NVML lists a PID that this PID namespace cannot see
    # NVML lists a PID that has exited (gputop sees every host PID, and not this one): its
    # context's memory stays while other processes hold the device files it had open.
    EXITED = "exited"
    # Holds the device file of a GPU the driver has lost: NVML can list no context there, so
    # whether it works cannot be known. Not called stuck (a holder) for the driver's failure.
    ON_LOST_GPU = "lost-gpu"
    # Holds the device file of a GPU whose process list could not be read (NOT RESPONDING, the
    # driver crashed, or the list call failed): whether it has a context there is unknown.
    UNKNOWN = "unknown"
    # In uninterruptible sleep (state D) in one kernel call (ProcInfo.blocked) while it holds or
    # uses a GPU: no signal, SIGKILL included, acts on it until that call returns.
    UNKILLABLE = "unkillable"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemInfo:
    """Facts about the host and driver, read once per snapshot."""

    hostname: str
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # e.g. "12.4"
    nvml_version: str | None = None
    simulated: bool = False  # True when the data comes from gputop's simulated driver


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuProcess:
    """One process context on one GPU, as NVML reports it."""

    pid: int
    gpu_index: int
    type: ProcessType
    used_memory_bytes: int | None = None
    sm_util_percent: int | None = None
    memory_util_percent: int | None = None
    # nvmlSystemGetProcessName, read only for PIDs this PID namespace cannot see (None otherwise)
    driver_name: str | None = None
    # On a GPU in MIG mode: the GPU instance and compute instance the context runs in (None on
    # a whole GPU, or when the driver does not say).
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None

    @property
    def device_label(self) -> str:
        """Where it runs, as the process table's GPU column shows it: ``"0"``, or ``"0/1"`` (GPU
        0, GPU instance 1) on a MIG device."""
        return device_label(self.gpu_index, self.gpu_instance_id)


def listed_pids(gpus: Iterable[GpuSample]) -> set[int]:
    """The PIDs the driver lists on these GPUs (gathered in C: 5,000 a tick at most)."""
    return set().union(*(map(_pid_of, gpu.processes) for gpu in gpus))


_pid_of = attrgetter("pid")


def device_label(gpu_index: int, gpu_instance_id: int | None = None) -> str:
    """``"0"`` for a whole GPU, ``"0/1"`` for GPU instance 1 of GPU 0 (nvidia-smi's GPU, GI)."""
    return str(gpu_index) if gpu_instance_id is None else f"{gpu_index}/{gpu_instance_id}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigDevice:
    """One MIG device (a compute instance of a GPU instance) of a GPU in MIG mode.

    NVML gives a MIG device its own memory but no utilisation (nor per-process utilisation):
    ``utilization_gpu_percent`` is None on the drivers to date (N/A, as nvidia-smi shows).
    """

    index: int  # nvmlDeviceGetMigDeviceHandleByIndex's index under its GPU
    gpu_index: int  # NVML index of the GPU it is part of
    gpu_instance_id: int | None = None  # GI id, as nvidia-smi's "GI ID"
    compute_instance_id: int | None = None  # CI id, as nvidia-smi's "CI ID"
    profile: str | None = None  # as nvidia-smi names it: "3g.40gb"; "1c.3g.40gb" for a smaller CI
    uuid: str | None = None  # "MIG-...", what CUDA_VISIBLE_DEVICES takes
    cuda_index: int | None = None  # CUDA index in a program started from this shell
    gpu_instance_slices: int | None = None  # the "3" of 3g.40gb
    compute_instance_slices: int | None = None
    multiprocessor_count: int | None = None
    memory_total_bytes: int | None = None  # the GPU instance's memory (its CIs share it)
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    utilization_gpu_percent: int | None = None

    @property
    def label(self) -> str:
        """``"0/1"``: GPU 0, GPU instance 1 (the process table's GPU column for its processes)."""
        return device_label(self.gpu_index, self.gpu_instance_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuCounters:
    """A GPU's counters, health records and profiling readings that the exporter publishes.

    Every reading is optional (None: the driver does not give it). Counters count since the driver
    loaded, but the Xid ones, which count the critical Xid events gputop was told of since it
    started (NVML keeps no history of them). Kept in Snapshot.counters, one per GPU that answered.
    """

    index: int  # the GPU's NVML index
    energy_mj: int | None = None  # nvmlDeviceGetTotalEnergyConsumption
    pcie_replay_count: int | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    nvlink_data_kib: int | None = None  # data sent + received over every NVLink link, KiB
    xid_count: int | None = None  # None: the driver gives no Xid events for this GPU
    xid_last: int | None = None  # the newest Xid (None: none yet)
    xid_last_at_wall: float | None = None  # when gputop was told of it (time.time())
    # GPM (Hopper and later): % of the time between this sample and the previous one
    gpm_graphics_percent: float | None = None
    gpm_tensor_percent: float | None = None
    gpm_dram_percent: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuSample:
    """Everything read from one GPU in one snapshot. Every reading is optional."""

    index: int
    state: GpuState = GpuState.OK
    error: str | None = None  # why the GPU is LOST/ERROR/NOT_RESPONDING, in words
    # NOT_RESPONDING: seconds since the GPU was asked (or last answered) and gave nothing.
    stale_s: float | None = field(default=None, compare=False)
    cuda_index: int | None = None  # index a CUDA program started from this shell would use
    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None
    minor_number: int | None = None  # N of /dev/nvidiaN
    serial: str | None = None  # the board's serial number
    # memory
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    bar1_total_bytes: int | None = None
    bar1_used_bytes: int | None = None
    # utilisation
    utilization_gpu_percent: int | None = None
    utilization_memory_percent: int | None = None
    encoder_percent: int | None = None
    decoder_percent: int | None = None
    # thermals and power
    temperature_c: int | None = None
    temperature_slowdown_c: int | None = None
    temperature_shutdown_c: int | None = None
    temperature_memory_c: int | None = None  # HBM boards only
    fan_speeds_percent: tuple[int, ...] | None = None
    power_draw_mw: int | None = None
    power_limit_mw: int | None = None
    # clocks
    clock_graphics_mhz: int | None = None
    clock_sm_mhz: int | None = None
    clock_memory_mhz: int | None = None
    clock_graphics_max_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_memory_max_mhz: int | None = None
    performance_state: int | None = None  # 0 for P0 ... 15; None when unknown
    throttle_reasons: tuple[str, ...] | None = None  # active reasons, by name
    # PCIe
    pcie_gen: int | None = None
    pcie_gen_max: int | None = None
    pcie_width: int | None = None
    pcie_width_max: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_tx_kbps: int | None = None
    # health and modes
    ecc_errors_uncorrected_volatile: int | None = None
    compute_mode: str | None = None
    persistence_mode: bool | None = None
    mig_mode: bool | None = None
    # What the GPU health verdict (gputop.engine.gpu_health) is made from; None: not readable.
    recovery_action: int | None = None  # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (0: none needed)
    unrepairable_memory: bool | None = None  # nvmlDeviceGetUnrepairableMemoryFlag_v1
    remapped_rows_pending: bool | None = None  # a row remapping waits for the next GPU reset
    remapped_rows_failure: bool | None = None  # a row remapping failed
    retired_pages_pending: bool | None = None  # a page retirement waits for the next reset
    # Xid errors of the last hour, oldest first (None: the driver gives this GPU no Xid events).
    recent_xids: tuple[XidEvent, ...] | None = None
    # Hardware slowdown reasons (hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown)
    # active now, each with the seconds it has been active without a break (None: unreadable).
    slowdowns_held_s: tuple[tuple[str, float], ...] | None = None
    processes: tuple[GpuProcess, ...] = ()
    # Why the driver's process list could not be read (None: it was): ``processes`` then holds
    # only what was read, and a process holding this GPU without an entry is not known stuck.
    process_list_error: str | None = None
    # In MIG mode: its MIG devices, in NVML's index order (empty otherwise, or when unreadable).
    mig_devices: tuple[MigDevice, ...] = ()
    # Only when a query asks for them (empty otherwise): readings beyond the ones above, keyed by
    # engine.probes.Probe.key, and why a reading is None, keyed by that key or attribute name.
    extra: tuple[tuple[str, Scalar], ...] = ()
    unavailable: tuple[tuple[str, Unavailable], ...] = ()

    @property
    def fan_speed_percent(self) -> int | None:
        """The first fan's speed, the one most views show."""
        return self.fan_speeds_percent[0] if self.fan_speeds_percent else None

    def extra_value(self, key: str) -> Scalar | None:
        """The extra reading ``key``, or None."""
        for name, value in self.extra:
            if name == key:
                return value
        return None

    def mig_device_of(self, process: GpuProcess) -> MigDevice | None:
        """The MIG device a context of this GPU runs on (by its GI and CI ids), if any."""
        if process.gpu_instance_id is None:
            return None
        in_gi = [m for m in self.mig_devices if m.gpu_instance_id == process.gpu_instance_id]
        for mig in in_gi:
            if mig.compute_instance_id == process.compute_instance_id:
                return mig
        return in_gi[0] if len(in_gi) == 1 else None

    def why_unavailable(self, key: str) -> Unavailable | None:
        """Why reading ``key`` (an extra's key or an attribute name) is None, when known."""
        for name, why in self.unavailable:
            if name == key:
                return why
        return None


def is_runtime_id(text: str) -> bool:
    """Whether ``text`` is a container runtime's id (64 lowercase hex digits), not a name."""
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)


def silent_gpu(gpu: GpuSample, *, error: str, stale_s: float | None) -> GpuSample:
    """``gpu`` NOT_RESPONDING (a call for it hung, or its driver process crashed): its identity
    kept, every reading None, ``error`` saying why."""
    return GpuSample(
        index=gpu.index,
        state=GpuState.NOT_RESPONDING,
        error=error,
        stale_s=stale_s,
        cuda_index=gpu.cuda_index,
        uuid=gpu.uuid,
        name=gpu.name,
        pci_bus_id=gpu.pci_bus_id,
        compute_capability=gpu.compute_capability,
        minor_number=gpu.minor_number,
        serial=gpu.serial,
    )


@dataclass(frozen=True, slots=True)
class Container:
    """A container a process runs in (from its cgroup); strings are clean."""

    runtime: str  # docker, containerd, cri-o, podman, nspawn, lxc, or "kubernetes" (cgroupfs)
    id: str  # the runtime's id (64 hex digits), or the machine's name (nspawn, LXC)
    name: str | None = None  # the runtime's name for it, where readable
    pod: str | None = None  # Kubernetes pod name, where readable
    namespace: str | None = None  # Kubernetes namespace, where readable
    pod_uid: str | None = None  # from the cgroup path: always known for a pod's container

    @property
    def short_id(self) -> str:
        """The id as ``docker ps`` shows it (12 characters)."""
        return self.id[:12] if is_runtime_id(self.id) else self.id

    @property
    def label(self) -> str:
        """What a table shows: the name, else the short id."""
        return self.name or self.short_id


@dataclass(frozen=True, slots=True)
class Blocked:
    """A process waiting in one kernel call: state D (uninterruptible sleep) on two readings at
    least ``BLOCKED_AFTER_S`` apart, not having run in between (gputop.engine.procs)."""

    since_mono: float  # the reader's clock when it first saw this wait
    wchan: str | None = None  # /proc/PID/wchan: the kernel function it waits in, when readable
    # Frames of /proc/PID/stack in NVIDIA's modules (nvidia, nvidia_uvm...): readable as root only.
    driver_frames: tuple[str, ...] = ()
    stack_read: bool = False  # whether /proc/PID/stack could be read (no frames then means none)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcInfo:
    """What the host OS (psutil) tells about one PID. Fields the OS would not give are None."""

    pid: int
    visible: bool = True  # False: the PID is not in this PID namespace (or has vanished)
    create_time: float | None = None  # seconds since the epoch; with pid, the process identity
    user: str | None = None
    uid: int | None = None
    name: str | None = None
    cmdline: tuple[str, ...] = ()
    status: str | None = None  # psutil status: running, sleeping, zombie, stopped, ...
    ppid: int | None = None
    cpu_percent: float | None = None
    host_rss_bytes: int | None = None
    note: str | None = None  # why something is missing, in words
    container: Container | None = None  # None: none, or not known (yet)
    blocked: Blocked | None = None  # in one kernel call in state D (not: in D at one reading)

    @property
    def command(self) -> str:
        """The command line as one string, or the process name when argv is not readable."""
        if self.cmdline:
            return " ".join(self.cmdline)
        return self.name or ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessRow:
    """A GPU-related process as the dashboard lists it: NVML's view joined with the OS view."""

    pid: int
    info: ProcInfo
    states: tuple[ProcState, ...]  # most important first
    gpu_indices: tuple[int, ...] = ()
    type: ProcessType | None = None
    used_memory_bytes: int | None = None  # summed over its GPUs
    peak_memory_bytes: int | None = None  # since gputop started
    sm_util_percent: int | None = None
    memory_util_percent: int | None = None
    device_files: tuple[str, ...] = ()  # /dev/nvidia* it holds open, where known
    parent_note: str | None = None  # e.g. "parent 1234 (python) is not reaping it"

    @property
    def identity(self) -> tuple[int, float | None]:
        """(PID, create time): a reused PID is another process."""
        return row_identity(self)

    @property
    def state(self) -> ProcState:
        """The single state a table column shows."""
        return self.states[0] if self.states else ProcState.ACTIVE

    @property
    def stuck(self) -> bool:
        """True when the process holds GPU resources without doing GPU work."""
        return self.state in (
            ProcState.HOLDER,
            ProcState.DEFUNCT,
            ProcState.ORPHAN,
            ProcState.STOPPED,
            ProcState.UNKILLABLE,
        )


row_identity = attrgetter("pid", "info.create_time")  # ProcessRow.identity, in C

RowKey = tuple[int, float | None]  # ProcessRow.identity: (PID, create time)


@dataclass(frozen=True, slots=True)
class RowChanges:
    """What changed in ``Snapshot.processes`` since the rows numbered ``since``: made by
    gputop.engine.changes, whose docstring states the rules (when to trust it, when to take all).
    """

    tick: int  # these rows' number (unique in the process: two enrichers never share one)
    since: int  # the rows this is the change from; 0: none (every row is new)
    added: tuple[ProcessRow, ...] = ()  # processes not in those rows
    changed: tuple[ProcessRow, ...] = ()  # the new rows of processes whose row is not equal
    removed: tuple[RowKey, ...] = ()  # processes no longer listed

    def follows(self, tick: int) -> bool:
        """Whether this is the change from the rows numbered ``tick`` (a consumer's last)."""
        return tick != 0 and self.since == tick

    @property
    def quiet(self) -> bool:
        """No process came or went: every row is the one of the same process before."""
        return not self.added and not self.removed


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One complete reading of the box. Consumers receive these and nothing else."""

    seq: int  # 1, 2, ...: the reading's number; 0: no reading (yet) of any GPU
    taken_at_wall: float  # time.time() when the reading started
    taken_at_mono: float  # time.monotonic() when the reading started
    duration_s: float = field(default=0.0, compare=False)
    system: SystemInfo
    gpus: tuple[GpuSample, ...]
    # Filled by the sampler (issue 3); empty when only the driver was read.
    processes: tuple[ProcessRow, ...] = ()
    unattributed_memory_bytes: tuple[tuple[int, int], ...] = ()  # (gpu index, bytes)
    holder_scan_note: str | None = None  # e.g. "not root: other users' files unreadable"
    # Set when gputop runs in a container that cannot see the host's PIDs the driver lists.
    hidden_pids_note: str | None = None
    stale_s: float | None = field(default=None, compare=False)  # set when this is an old reading
    # What is wrong with the driver or the sampler, in one line, while it lasts (e.g. "DRIVER
    # CRASHED (SIGSEGV in libnvidia-ml) — restarting", "nvmlDeviceGetPowerUsage (GPU 3) hung").
    driver_note: str | None = field(default=None, compare=False)
    sampler_restarts: int = field(default=0, compare=False)  # times the driver process restarted
    # The exporter's counters of each GPU that answered (GpuCounters.index), in GPU order.
    counters: tuple[GpuCounters, ...] = ()
    # What changed in ``processes`` since the last enriched snapshot (gputop.engine.changes);
    # None: not known, take them all.
    changes: RowChanges | None = field(default=None, compare=False)

    @property
    def no_reading_yet(self) -> bool:
        """True for the stand-in handed out before the driver gave any reading or even its list
        of GPUs (it may be opening, hung in nvmlInit): its empty GPU list says nothing."""
        return self.seq == 0 and not self.gpus

    def gpu(self, index: int) -> GpuSample | None:
        """The GPU with this NVML index, if present."""
        for g in self.gpus:
            if g.index == index:
                return g
        return None

    def counters_of(self, index: int) -> GpuCounters | None:
        """The counters of the GPU with this NVML index, if read."""
        for c in self.counters:
            if c.index == index:
                return c
        return None

    def device_labels(self, row: ProcessRow) -> tuple[str, ...]:
        """Where a process runs, one label per GPU: ``("0/1",)`` on GPU instance 1 of GPU 0
        (from the driver's per-GPU lists), ``"2"`` on a whole GPU or where the driver lists no
        context for it (a holder)."""
        labels: list[str] = []
        for index in row.gpu_indices:
            gpu = self.gpu(index)
            listed = [p for p in gpu.processes if p.pid == row.pid] if gpu is not None else []
            labels.append(listed[0].device_label if listed else device_label(index))
        return tuple(labels)


@dataclass(frozen=True, slots=True)
class PidMemory:
    """The GPU memory some PIDs use, per GPU: what ``Source.pid_memory`` reads.

    Also, for each GPU they use, its free and total memory (a GPU's own figures, all processes),
    and each GPU's CUDA index (to map torch's devices onto NVML's).
    """

    taken_at_mono: float
    by_gpu_bytes: tuple[tuple[int, int], ...]  # (GPU index, bytes) for each GPU that answered
    # (GPU index, free bytes, total bytes) for each GPU the PIDs use whose memory info answered
    free_bytes: tuple[tuple[int, int, int], ...] = ()
    cuda_indices: tuple[tuple[int, int], ...] = ()  # (GPU index, CUDA index) where it has one

    @property
    def total_bytes(self) -> int:
        """Over all GPUs."""
        return sum(used for _, used in self.by_gpu_bytes)


def pid_memory_of(snapshot: Snapshot, pids: Iterable[int]) -> PidMemory:
    """``pid_memory`` worked out from a whole snapshot (for a source without the light read)."""
    wanted = frozenset(pids)
    by_gpu: list[tuple[int, int]] = []
    free: list[tuple[int, int, int]] = []
    for g in snapshot.gpus:
        if g.state is not GpuState.OK or g.process_list_error is not None:
            continue  # not known
        used = sum(p.used_memory_bytes or 0 for p in g.processes if p.pid in wanted)
        by_gpu.append((g.index, used))
        if used and g.memory_free_bytes is not None and g.memory_total_bytes is not None:
            free.append((g.index, g.memory_free_bytes, g.memory_total_bytes))
    return PidMemory(
        taken_at_mono=snapshot.taken_at_mono,
        by_gpu_bytes=tuple(by_gpu),
        free_bytes=tuple(free),
        cuda_indices=tuple(
            (g.index, g.cuda_index) for g in snapshot.gpus if g.cuda_index is not None
        ),
    )
