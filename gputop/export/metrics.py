"""Snapshot -> Prometheus metric families, as plain data (stdlib only; the exporter renders them).

GPU metrics use NVIDIA dcgm-exporter's names, HELP texts, units and labels (``gpu``,
``UUID``, ``pci_bus_id``, ``device="nvidiaN"``, ``modelName``, ``Hostname``,
``DCGM_FI_DRIVER_VERSION``; see its etc/default-counters.csv and rendermetrics), so dashboards
built for it (Grafana 12239) work unchanged. gputop's own metrics start with ``gputop_``.
A reading the driver does not report (None) is left out, as dcgm-exporter leaves out blank values.
dcgm-exporter's counters are exposed as gauges of the same name: prometheus-client names a
counter family ``<name>_total``, which would break the names (rate() and increase() work on
them all the same).

A GPU in MIG mode keeps its own series and adds, for each MIG device, the framebuffer series of
the device's GPU instance, labelled as dcgm-exporter labels them: the GPU's labels and
``GPU_I_PROFILE`` (``3g.40gb``) and ``GPU_I_ID`` (the GPU instance id), after ``modelName``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from gputop.engine.model import (
    GpuCounters,
    GpuSample,
    GpuState,
    MigDevice,
    ProcessRow,
    ProcState,
    Snapshot,
)
from gputop.units import KiB, whole_mib

# dcgm-exporter's per-GPU labels, in its order; the host's is added when known, then the driver
# version label its default counters add.
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_LABELS = ("GPU_I_PROFILE", "GPU_I_ID")  # dcgm-exporter's, on a MIG device's series only
PROCESS_LABELS = ("gpu", "UUID", "pid", "user", "command", "container", "pod", "namespace")
# Every released dcgm-exporter names the host label "Hostname"; its unreleased main (#655) says
# "hostname". `gputop export --hostname-label hostname` picks the other.
HOST_LABEL = "Hostname"
HOST_LABELS = ("Hostname", "hostname")
DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"
STUCK_STATES = (ProcState.HOLDER, ProcState.DEFUNCT, ProcState.ORPHAN, ProcState.STOPPED)


class Kind(StrEnum):
    """Prometheus metric type."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One time series value: label values in the family's label order, or in its own."""

    labels: tuple[str, ...]
    value: float
    # Its own label names where they are not its family's (a MIG device's series has two more).
    label_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """One metric family. ``name`` is the exposed name (a counter's without ``_total``)."""

    name: str
    kind: Kind
    help: str
    label_names: tuple[str, ...]
    samples: tuple[Sample, ...]


@dataclass(frozen=True, slots=True)
class DcgmField:
    """A dcgm-exporter field that gputop can fill from a GpuSample (and a MigDevice)."""

    name: str
    help: str
    read: Callable[[GpuSample], float | None]
    read_mig: Callable[[MigDevice], float | None] | None = None  # None: not per MIG device


def _div(value: int | None, by: int) -> float | None:
    return None if value is None else value / by


def _mib(value: int | None) -> float | None:
    # DCGM reports whole MiB, by the rule every gputop view uses
    return None if value is None else float(whole_mib(value))


def _fan(g: GpuSample) -> float | None:
    return None if g.fan_speed_percent is None else float(g.fan_speed_percent)


# HELP texts are dcgm-exporter's (default-counters.csv) where it ships the field.
DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", lambda g: g.clock_sm_mhz),
    DcgmField(
        "DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", lambda g: g.clock_memory_mhz
    ),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", lambda g: g.temperature_c),
    DcgmField(
        "DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", lambda g: g.temperature_memory_c
    ),
    DcgmField(
        "DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda g: _div(g.power_draw_mw, 1000)
    ),
    DcgmField(
        "DCGM_FI_DEV_POWER_MGMT_LIMIT",
        "Power management limit (in W).",
        lambda g: _div(g.power_limit_mw, 1000),
    ),
    DcgmField(
        "DCGM_FI_DEV_GPU_UTIL",
        "GPU utilization (in %).",
        lambda g: g.utilization_gpu_percent,
        lambda m: m.utilization_gpu_percent,  # NVML gives none in MIG mode: left out
    ),
    DcgmField(
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "Memory utilization (in %).",
        lambda g: g.utilization_memory_percent,
    ),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).", lambda g: g.encoder_percent),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", "Decoder utilization (in %).", lambda g: g.decoder_percent),
    DcgmField("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %).", _fan),
    DcgmField(
        "DCGM_FI_DEV_FB_FREE",
        "Framebuffer memory free (in MiB).",
        lambda g: _mib(g.memory_free_bytes),
        lambda m: _mib(m.memory_free_bytes),
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_USED",
        "Framebuffer memory used (in MiB).",
        lambda g: _mib(g.memory_used_bytes),
        lambda m: _mib(m.memory_used_bytes),
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_RESERVED",
        "Framebuffer memory reserved (in MiB).",
        lambda g: _mib(g.memory_reserved_bytes),
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_TOTAL",
        "Framebuffer memory total (in MiB).",
        lambda g: _mib(g.memory_total_bytes),
        lambda m: _mib(m.memory_total_bytes),
    ),
    # NVML's PCIe counter (KiB/s over 20 ms) is what DCGM's deprecated PCIE_*_THROUGHPUT fields
    # read; current DCGM points them at these names, a rate in bytes per second.
    DcgmField(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "The rate of data transmitted over the PCIe bus (in bytes per second).",
        lambda g: None if g.pcie_tx_kbps is None else float(g.pcie_tx_kbps * KiB),
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "The rate of data received over the PCIe bus (in bytes per second).",
        lambda g: None if g.pcie_rx_kbps is None else float(g.pcie_rx_kbps * KiB),
    ),
    # A counter in DCGM; exposed as a gauge because prometheus-client would rename a counter to
    # ..._TOTAL_total. rate()/increase() work on it all the same.
    DcgmField(
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "Total number of double-bit volatile ECC errors.",
        lambda g: g.ecc_errors_uncorrected_volatile,
    ),
)


@dataclass(frozen=True, slots=True)
class CounterField:
    """A dcgm-exporter field that gputop fills from a GPU's GpuCounters."""

    name: str
    help: str
    read: Callable[[GpuCounters], float | None]


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


def _ratio(percent: float | None) -> float | None:
    """DCGM's profiling fields are ratios (0.0 to 1.0); NVML's GPM metrics are percentages."""
    return None if percent is None else percent / 100


def _last_xid(c: GpuCounters) -> float | None:
    """The newest Xid, 0 while there has been none (None: the driver gives no Xid events)."""
    if c.xid_count is None:
        return None
    return float(c.xid_last or 0)


# dcgm-exporter's default counters that NVML gives beyond a sample's readings. HELP texts are
# dcgm-exporter's; its counters among them are gauges here (see the module's docstring).
COUNTER_FIELDS: tuple[CounterField, ...] = (
    CounterField(
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "Total energy consumption since boot (in mJ).",
        lambda c: c.energy_mj,
    ),
    CounterField(
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "Total number of PCIe retries.",
        lambda c: c.pcie_replay_count,
    ),
    CounterField("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", _last_xid),
    # NVML's per-link data counters (KiB), sent and received, summed over the active links.
    CounterField(
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "Total number of NVLink bandwidth counters for all lanes.",
        lambda c: c.nvlink_data_kib,
    ),
    CounterField(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for uncorrectable errors",
        lambda c: c.remapped_rows_uncorrectable,
    ),
    CounterField(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "Number of remapped rows for correctable errors",
        lambda c: c.remapped_rows_correctable,
    ),
    CounterField(
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "Whether remapping of rows has failed",
        lambda c: _flag(c.remapped_rows_failure),
    ),
    # GPM (Hopper and later) over the time since the previous sample.
    CounterField(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "Ratio of time the graphics engine is active.",
        lambda c: _ratio(c.gpm_graphics_percent),
    ),
    CounterField(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
        lambda c: _ratio(c.gpm_tensor_percent),
    ),
    CounterField(
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
        lambda c: _ratio(c.gpm_dram_percent),
    ),
)


def dcgm_labels(
    gpu: GpuSample,
    snapshot: Snapshot,
    mig: MigDevice | None = None,
    host_label: str = HOST_LABEL,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(label names, label values) dcgm-exporter attaches to this GPU's series (or to those of
    its MIG device ``mig``: the GPU's, with GPU_I_PROFILE and GPU_I_ID after modelName).
    ``host_label`` names the host's label: ``Hostname`` (every release) or ``hostname``."""
    names = list(DCGM_LABELS)
    values = [
        str(gpu.index),
        gpu.uuid or "",
        gpu.pci_bus_id or "",
        f"nvidia{gpu.index}",  # dcgm-exporter uses the GPU id here, not the minor number
        gpu.name or "",
    ]
    if mig is not None:
        names += MIG_LABELS
        gi = mig.gpu_instance_id
        values += [mig.profile or "", "" if gi is None else str(gi)]
    if snapshot.system.hostname:
        names.append(host_label)
        values.append(snapshot.system.hostname)
    names.append(DRIVER_LABEL)
    values.append(snapshot.system.driver_version or "")
    return tuple(names), tuple(values)


def answered(snapshot: Snapshot) -> tuple[GpuSample, ...]:
    """The GPUs whose readings in ``snapshot`` are current: the driver answered for them.

    Not a GPU that is NOT_RESPONDING (a call hung), LOST or ERROR, and none of a snapshot
    re-sent as stale (``stale_s`` set: the sampler's last reading again while the driver hangs,
    fails or restarts), whose values are old: served as current, they would hide the trouble.
    """
    if snapshot.stale_s is not None:
        return ()
    return tuple(g for g in snapshot.gpus if g.state is GpuState.OK and g.stale_s is None)


def dcgm_families(snapshot: Snapshot, host_label: str = HOST_LABEL) -> list[Family]:
    """The dcgm-exporter compatible families of the GPUs that answered (see :func:`answered`);
    unreported readings are left out."""
    families = []
    live = answered(snapshot)
    labels = {g.index: dcgm_labels(g, snapshot, host_label=host_label) for g in live}
    for field in DCGM_FIELDS:
        samples = []
        label_names: tuple[str, ...] = ()
        for gpu in live:
            value = field.read(gpu)
            if value is not None:
                label_names, label_values = labels[gpu.index]
                samples.append(Sample(labels=label_values, value=float(value)))
            samples += _mig_samples(field, gpu, snapshot, host_label)
        if samples:
            label_names = label_names or (samples[0].label_names or ())
            families.append(
                Family(
                    name=field.name,
                    kind=Kind.GAUGE,
                    help=field.help,
                    label_names=label_names,
                    samples=tuple(samples),
                )
            )
    return families + _counter_families(snapshot, labels)


def _counter_families(
    snapshot: Snapshot, labels: dict[int, tuple[tuple[str, ...], tuple[str, ...]]]
) -> list[Family]:
    """COUNTER_FIELDS' families, for the GPUs that answered (``labels``: theirs, by index)."""
    counters = [c for c in snapshot.counters if c.index in labels]
    families = []
    for field in COUNTER_FIELDS:
        samples = []
        for c in counters:
            value = field.read(c)
            if value is not None:
                samples.append(Sample(labels=labels[c.index][1], value=float(value)))
        if samples:
            families.append(
                Family(
                    name=field.name,
                    kind=Kind.GAUGE,
                    help=field.help,
                    label_names=labels[counters[0].index][0],
                    samples=tuple(samples),
                )
            )
    return families


def xid_families(snapshot: Snapshot) -> list[Family]:
    """gputop's Xid count and the time of the newest, for GPUs whose driver gives Xid events."""
    uuids = {g.index: g.uuid or "" for g in snapshot.gpus}
    known = [c for c in snapshot.counters if c.xid_count is not None]
    seen = [c for c in known if c.xid_last_at_wall is not None]
    return [
        Family(
            name="gputop_xid_errors",
            kind=Kind.COUNTER,
            help="Critical Xid errors the driver reported for the GPU since the exporter started "
            "(DCGM_FI_DEV_XID_ERRORS is the newest one's Xid).",
            label_names=("gpu", "UUID"),
            samples=tuple(
                Sample(labels=(str(c.index), uuids.get(c.index, "")), value=float(c.xid_count or 0))
                for c in known
            ),
        ),
        Family(
            name="gputop_xid_last_timestamp_seconds",
            kind=Kind.GAUGE,
            help="When the exporter was told of the GPU's newest critical Xid error (Unix time).",
            label_names=("gpu", "UUID"),
            samples=tuple(
                Sample(
                    labels=(str(c.index), uuids.get(c.index, "")), value=c.xid_last_at_wall or 0.0
                )
                for c in seen
            ),
        ),
    ]


def _mig_samples(
    field: DcgmField, gpu: GpuSample, snapshot: Snapshot, host_label: str = HOST_LABEL
) -> list[Sample]:
    """The field's series for each MIG device of the GPU (one per GPU instance: its compute
    instances share its memory)."""
    if field.read_mig is None:
        return []
    samples = []
    seen: set[int | None] = set()
    for mig in gpu.mig_devices:
        value = field.read_mig(mig)
        if value is None or mig.gpu_instance_id in seen:
            continue
        seen.add(mig.gpu_instance_id)
        names, values = dcgm_labels(gpu, snapshot, mig, host_label)
        samples.append(Sample(labels=values, value=float(value), label_names=names))
    return samples


def short_command(row: ProcessRow | None) -> str:
    """The process name only (psutil's name, as in /proc/PID/comm): never argv, which can
    hold secrets such as tokens passed on the command line."""
    if row is None or row.info.name is None:
        return ""
    return row.info.name


def _current_lists(snapshot: Snapshot) -> tuple[GpuSample, ...]:
    """The GPUs whose process lists in ``snapshot`` are current: none of a stale re-send, nor a
    GPU that did not answer; an ERROR GPU's list is the driver's own answer (it may be empty)."""
    if snapshot.stale_s is not None:
        return ()
    return tuple(
        g for g in snapshot.gpus if g.state is not GpuState.NOT_RESPONDING and g.stale_s is None
    )


def process_family(snapshot: Snapshot) -> Family:
    """GPU memory per (process, GPU), from the driver's current per-GPU process lists."""
    rows = {row.pid: row for row in snapshot.processes}
    samples = []
    for gpu in _current_lists(snapshot):
        for proc in gpu.processes:
            if proc.used_memory_bytes is None:
                continue
            row = rows.get(proc.pid)
            user = row.info.user if row is not None and row.info.user else ""
            box = row.info.container if row is not None else None
            labels = (
                str(gpu.index),
                gpu.uuid or "",
                str(proc.pid),
                user,
                short_command(row),
                # dcgm-exporter's Kubernetes label names; empty outside containers.
                box.label if box is not None else "",
                (box.pod or "") if box is not None else "",
                (box.namespace or "") if box is not None else "",
            )
            value = float(proc.used_memory_bytes)
            mig = gpu.mig_device_of(proc)
            if mig is None:
                samples.append(Sample(labels=labels, value=value))
            else:  # on a MIG device: dcgm-exporter's two labels of it, as on its FB series
                gi = "" if mig.gpu_instance_id is None else str(mig.gpu_instance_id)
                samples.append(
                    Sample(
                        labels=(*labels, mig.profile or "", gi),
                        value=value,
                        label_names=(*PROCESS_LABELS, *MIG_LABELS),
                    )
                )
    return Family(
        name="gputop_process_gpu_memory_bytes",
        kind=Kind.GAUGE,
        help="GPU memory used by a process on a GPU (in bytes); command is the short name only; "
        "container, pod and namespace are empty outside containers; GPU_I_PROFILE and GPU_I_ID "
        "name the MIG device it runs on, if any.",
        label_names=PROCESS_LABELS,
        samples=tuple(samples),
    )


def stuck_family(snapshot: Snapshot) -> Family:
    """How many processes hold a GPU without working, by state (every state, zeros included)."""
    counts = dict.fromkeys(STUCK_STATES, 0)
    for row in snapshot.processes:
        if row.state in counts:
            counts[row.state] += 1
    return Family(
        name="gputop_stuck_processes",
        kind=Kind.GAUGE,
        help="Processes holding a GPU without doing GPU work, by state "
        "(holder: device open but no context; defunct: zombie; orphan: parent gone; stopped).",
        label_names=("state",),
        samples=tuple(Sample(labels=(str(s),), value=float(n)) for s, n in counts.items()),
    )


def unattributed_family(snapshot: Snapshot) -> Family:
    """GPU memory in use that no listed process accounts for (GPUs that answered only)."""
    by_index = {g.index: g for g in answered(snapshot)}
    samples = []
    for index, nbytes in snapshot.unattributed_memory_bytes:
        gpu = by_index.get(index)
        if gpu is None:  # not answered now: an old figure, not this sample's
            continue
        uuid = gpu.uuid or ""
        samples.append(Sample(labels=(str(index), uuid), value=float(nbytes)))
    return Family(
        name="gputop_unattributed_memory_bytes",
        kind=Kind.GAUGE,
        help="GPU memory in use that no process listed by the driver accounts for (in bytes).",
        label_names=("gpu", "UUID"),
        samples=tuple(samples),
    )


def lost_family(snapshot: Snapshot) -> Family:
    """1 for a GPU that fell off the bus, 0 for the others."""
    return Family(
        name="gputop_gpu_lost",
        kind=Kind.GAUGE,
        help="1 when the GPU fell off the bus (NVML: GPU is lost), else 0.",
        label_names=("gpu",),
        samples=tuple(
            Sample(labels=(str(g.index),), value=float(g.state is GpuState.LOST))
            for g in snapshot.gpus
        ),
    )


def responding_family(snapshot: Snapshot) -> Family:
    """1 for a GPU the driver answered for with readings, 0 for one it did not (any reason)."""
    live = {g.index for g in answered(snapshot)}
    return Family(
        name="gputop_gpu_responding",
        kind=Kind.GAUGE,
        help="1 when the driver answered for the GPU in the newest sample (its DCGM_FI_* series "
        "are present), 0 when it did not: a driver call for it hung (not responding), it fell off "
        "the bus (see gputop_gpu_lost), it could not be read, or the driver failed or its "
        "process is restarting (see gputop_driver_up).",
        label_names=("gpu",),
        samples=tuple(
            Sample(labels=(str(g.index),), value=float(g.index in live)) for g in snapshot.gpus
        ),
    )


def driver_family(up: bool) -> Family:
    """gputop_driver_up: whether the exporter can read the NVIDIA driver at all."""
    return _single(
        "gputop_driver_up",
        Kind.GAUGE,
        "1 while gputop gets readings from the NVIDIA driver (for at least one GPU); 0 when the "
        "newest sample has none: no reading yet, the driver could not be (re)opened, its reads "
        "fail, its process crashed and is restarting, or it hangs on every GPU. A call that "
        "hangs on one GPU leaves it 1: see gputop_gpu_responding.",
        float(up),
    )


def info_family(snapshot: Snapshot | None, version: str) -> Family:
    """gputop_info: constant 1 with the versions and host as labels."""
    system = snapshot.system if snapshot is not None else None
    labels = (
        version,
        (system.driver_version or "") if system else "",
        (system.cuda_driver_version or "") if system else "",
        system.hostname if system else "",
        str(bool(system and system.simulated)).lower(),
    )
    return Family(
        name="gputop_info",
        kind=Kind.GAUGE,
        help="gputop exporter and driver versions (value is always 1).",
        label_names=("version", "driver_version", "cuda_driver_version", "hostname", "simulated"),
        samples=(Sample(labels=labels, value=1.0),),
    )


def _single(name: str, kind: Kind, help_text: str, value: float) -> Family:
    return Family(
        name=name,
        kind=kind,
        help=help_text,
        label_names=(),
        samples=(Sample(labels=(), value=value),),
    )


def sample_age_s(snapshot: Snapshot | None, now_mono: float, since_mono: float) -> float:
    """Seconds since the newest fresh driver reading at ``now_mono`` (time.monotonic()).

    The reading's own start (``taken_at_mono``), also for a stale re-send of it, whose ``stale_s``
    says how old it was when re-sent; ``since_mono`` (the collector's start) before the first one.
    """
    if snapshot is None:
        return max(0.0, now_mono - since_mono)
    return max(0.0, now_mono - snapshot.taken_at_mono, snapshot.stale_s or 0.0)


def snapshot_families(
    snapshot: Snapshot | None,
    *,
    age_s: float,
    sampler_errors: int,
    version: str,
    sampler_restarts: int | None = None,
    host_label: str = HOST_LABEL,
    driver_up: bool | None = None,
) -> list[Family]:
    """Every family for one scrape of ``snapshot`` (None: nothing sampled yet).

    ``age_s`` is how old the newest good sample is (see :func:`sample_age_s`); it grows while
    the driver hangs. ``sampler_restarts`` is how often the driver process was restarted, by
    default the snapshot's count. ``host_label`` names the host label of the DCGM series.
    ``driver_up`` adds gputop_driver_up (None: not known, left out).
    """
    if sampler_restarts is None:
        sampler_restarts = snapshot.sampler_restarts if snapshot is not None else 0
    families = dcgm_families(snapshot, host_label) if snapshot is not None else []
    if snapshot is not None:
        families += xid_families(snapshot)
        families += [
            process_family(snapshot),
            stuck_family(snapshot),
            unattributed_family(snapshot),
            lost_family(snapshot),
            responding_family(snapshot),
            _single(
                "gputop_sample_duration_seconds",
                Kind.GAUGE,
                "How long the last good driver read took (in seconds).",
                snapshot.duration_s,
            ),
        ]
    if driver_up is not None:
        families.append(driver_family(driver_up))
    families += [
        _single(
            "gputop_sample_age_seconds",
            Kind.GAUGE,
            "Seconds since the newest fresh driver reading started, at scrape time; grows while "
            "the driver hangs or its process restarts.",
            age_s,
        ),
        _single(
            "gputop_sampler_errors",
            Kind.COUNTER,
            "Failed driver reads since the exporter started.",
            float(sampler_errors),
        ),
        _single(
            "gputop_sampler_restarts",
            Kind.COUNTER,
            "Times the driver reader process was restarted after it died (e.g. a SIGSEGV in "
            "libnvidia-ml) since the exporter started.",
            float(sampler_restarts),
        ),
        info_family(snapshot, version),
    ]
    return families
