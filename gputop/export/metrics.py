"""Snapshot -> Prometheus metric families, as plain data (stdlib only; the exporter renders them).

GPU metrics use NVIDIA dcgm-exporter's names, types, HELP texts, units and labels (``gpu``,
``UUID``, ``pci_bus_id``, ``device="nvidiaN"``, ``modelName``, ``hostname``,
``DCGM_FI_DRIVER_VERSION``; see its etc/default-counters.csv and rendermetrics), so dashboards
built for it (Grafana 12239) work unchanged; the names, types and units are gputop.dcgm's table.
dcgm-exporter's counters are counters under their exact names (no ``_total``: gputop.export.prom
renders them). gputop's own metrics start with ``gputop_``. A reading the driver does not report
(None) is left out, as dcgm-exporter leaves out blank values.

A GPU in MIG mode with GPU instances has no whole-GPU series, as dcgm-exporter's default
(``--devices f``: internal/pkg/devicemonitoring monitors the GPU instances of a MIG GPU, the GPU
itself otherwise): each field once per GPU instance, labelled with the GPU's labels and
``GPU_I_PROFILE`` (``3g.40gb``) and ``GPU_I_ID`` (the GPU instance id) after ``modelName``. The
fields DCGM keeps per GPU instance (dcgmlib/src/dcgm_fields.cpp: entity level GPU_I or GPU_CI) carry
the instance's value: the framebuffer ones; every other field (entity level GPU) carries the
parent GPU's value on each instance, as DCGM answers them (DcgmCacheManager maps the instance to
its GPU). gputop has no per-instance profiling (GPM) readings: those are left out on a MIG GPU.

A GPU (or GPU instance) whose processes all run in one Kubernetes pod gets dcgm-exporter's
``pod``, ``namespace`` and ``container`` labels on its DCGM series (its
internal/pkg/transformation/kubernetes.go, device-to-pod mapping); DCGM_FI_DEV_XID_ERRORS gets
``err_code`` and ``err_msg`` (its internal/pkg/collector/gpu_collector.go).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from gputop import dcgm
from gputop.engine.gpu_health import Verdict, assess_all
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
# version label its default counters add, then pod/namespace/container and err_code/err_msg.
DCGM_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_LABELS = (dcgm.MIG_PROFILE_LABEL, dcgm.MIG_INSTANCE_LABEL)  # on a GPU instance's series
POD_LABELS = ("container", "namespace", "pod")  # dcgm-exporter's, in its (sorted) order
XID_LABELS = (dcgm.XID_CODE_LABEL, dcgm.XID_MESSAGE_LABEL)
PROCESS_LABELS = ("gpu", "UUID", "pid", "user", "command", "container", "pod", "namespace")
# dcgm-exporter 4.6.0-4.8.3 and later name the host label "hostname" (#655); older releases
# "Hostname": `gputop export --hostname-label Hostname` for dashboards built on those.
HOST_LABEL = dcgm.HOST_LABEL
HOST_LABELS = dcgm.HOST_LABELS
DRIVER_LABEL = dcgm.DRIVER_LABEL
STUCK_STATES = (
    ProcState.HOLDER,
    ProcState.DEFUNCT,
    ProcState.ORPHAN,
    ProcState.STOPPED,
    ProcState.UNKILLABLE,
)


class Kind(StrEnum):
    """Prometheus metric type."""

    GAUGE = "gauge"
    COUNTER = "counter"


class FieldNames(StrEnum):
    """Which DCGM field names the exporter serves (``--field-names``)."""

    LEGACY = "legacy"  # dcgm-exporter up to 4.8: DCGM_FI_DEV_GPU_UTIL (%), ...
    DCGM47 = "dcgm4.7"  # DCGM 4.7's names and units where gputop.dcgm has one, else the legacy
    BOTH = "both"  # each field under both names (for a dashboard migration)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """One time series value: label values in the family's label order, or in its own."""

    labels: tuple[str, ...]
    value: float
    # Its own label names where they are not its family's (a MIG device's series has two more).
    label_names: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Family:
    """One metric family. ``name`` is the exposed name; ``exact``: a counter served under that
    very name (dcgm-exporter's), not prometheus-client's ``<name>_total``."""

    name: str
    kind: Kind
    help: str
    label_names: tuple[str, ...]
    samples: tuple[Sample, ...]
    exact: bool = False


Reader = Callable[[GpuSample, GpuCounters | None], float | None]


@dataclass(frozen=True, slots=True)
class DcgmField:
    """A DCGM field gputop fills from a GPU's sample and counters (and a MIG device's).

    On a GPU in MIG mode: ``read_mig`` gives the GPU instance's own value; without it the
    parent GPU's value is repeated on each instance (``per_gpu``), or the field is left out.
    """

    name: str  # the legacy name: its row in gputop.dcgm
    read: Reader
    read_mig: Callable[[MigDevice], float | None] | None = None
    per_gpu: bool = True  # False: no series on a MIG GPU (no per-instance reading)

    @property
    def info(self) -> dcgm.Field:
        """The field's names, type, units and HELP texts."""
        return dcgm.BY_LEGACY[self.name]

    @property
    def help(self) -> str:
        return self.info.help


def _div(value: int | None, by: int) -> float | None:
    return None if value is None else value / by


def _mib(value: int | None) -> float | None:
    # DCGM reports whole MiB, by the rule every gputop view uses
    return None if value is None else float(whole_mib(value))


def _num(value: float | None) -> float | None:
    return None if value is None else float(value)


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


def _g(read: Callable[[GpuSample], float | int | None]) -> Reader:
    """A reader of the GPU's sample."""
    return lambda g, _c: _num(read(g))


def _c(read: Callable[[GpuCounters], float | int | None]) -> Reader:
    """A reader of the GPU's counters (None: the GPU has none)."""
    return lambda _g, c: None if c is None else _num(read(c))


# Every DCGM field gputop exports, in dcgm-exporter's CSV order where it has them.
DCGM_FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", _g(lambda g: g.clock_sm_mhz)),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", _g(lambda g: g.clock_memory_mhz)),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", _g(lambda g: g.temperature_c)),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", _g(lambda g: g.temperature_memory_c)),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", _g(lambda g: _div(g.power_draw_mw, 1000))),
    DcgmField("DCGM_FI_DEV_POWER_MGMT_LIMIT", _g(lambda g: _div(g.power_limit_mw, 1000))),
    # NVML gives no utilisation for a GPU in MIG mode: then left out, as DCGM's blank value
    DcgmField("DCGM_FI_DEV_GPU_UTIL", _g(lambda g: g.utilization_gpu_percent)),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", _g(lambda g: g.utilization_memory_percent)),
    DcgmField("DCGM_FI_DEV_ENC_UTIL", _g(lambda g: g.encoder_percent)),
    DcgmField("DCGM_FI_DEV_DEC_UTIL", _g(lambda g: g.decoder_percent)),
    DcgmField("DCGM_FI_DEV_FAN_SPEED", _g(lambda g: g.fan_speed_percent)),
    DcgmField(
        "DCGM_FI_DEV_FB_FREE",
        _g(lambda g: _mib(g.memory_free_bytes)),
        lambda m: _mib(m.memory_free_bytes),
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_USED",
        _g(lambda g: _mib(g.memory_used_bytes)),
        lambda m: _mib(m.memory_used_bytes),
    ),
    # per GPU instance in DCGM, which gputop does not have: left out on a MIG GPU
    DcgmField(
        "DCGM_FI_DEV_FB_RESERVED", _g(lambda g: _mib(g.memory_reserved_bytes)), per_gpu=False
    ),
    DcgmField(
        "DCGM_FI_DEV_FB_TOTAL",
        _g(lambda g: _mib(g.memory_total_bytes)),
        lambda m: _mib(m.memory_total_bytes),
    ),
    # NVML's PCIe counter (KiB/s over 20 ms) is what DCGM's deprecated PCIE_*_THROUGHPUT fields
    # read; current DCGM points them at these names, a rate in bytes per second.
    DcgmField(
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        _g(lambda g: None if g.pcie_tx_kbps is None else g.pcie_tx_kbps * KiB),
    ),
    DcgmField(
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        _g(lambda g: None if g.pcie_rx_kbps is None else g.pcie_rx_kbps * KiB),
    ),
    DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", _g(lambda g: g.ecc_errors_uncorrected_volatile)),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", _c(lambda c: c.energy_mj)),
    DcgmField("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", _c(lambda c: c.pcie_replay_count)),
    DcgmField("DCGM_FI_DEV_XID_ERRORS", _c(_last_xid)),
    # NVML's per-link data counters (KiB), sent and received, summed over the active links: a
    # cumulative count (DCGM documents a rate here; rate() of this is that rate, in KiB/s).
    DcgmField("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", _c(lambda c: c.nvlink_data_kib)),
    DcgmField(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", _c(lambda c: c.remapped_rows_uncorrectable)
    ),
    DcgmField("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", _c(lambda c: c.remapped_rows_correctable)),
    DcgmField("DCGM_FI_DEV_ROW_REMAP_FAILURE", _c(lambda c: _flag(c.remapped_rows_failure))),
    # GPM (Hopper and later) over the time since the previous sample; whole-GPU readings only
    DcgmField(
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        _c(lambda c: _ratio(c.gpm_graphics_percent)),
        per_gpu=False,
    ),
    DcgmField(
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        _c(lambda c: _ratio(c.gpm_tensor_percent)),
        per_gpu=False,
    ),
    DcgmField("DCGM_FI_PROF_DRAM_ACTIVE", _c(lambda c: _ratio(c.gpm_dram_percent)), per_gpu=False),
)
COUNTER_FIELDS = tuple(f for f in DCGM_FIELDS if f.info.type is dcgm.Type.COUNTER)
XID_FIELD = "DCGM_FI_DEV_XID_ERRORS"


@dataclass(frozen=True, slots=True)
class _Series:
    """One DCGM series' labels, before its field's value: a GPU's, or one of its GPU instances'."""

    names: tuple[str, ...]
    values: tuple[str, ...]
    driver: str  # the driver version label's value (its name depends on the field names)
    gpu: GpuSample
    mig: MigDevice | None = None


def dcgm_labels(
    gpu: GpuSample,
    snapshot: Snapshot,
    mig: MigDevice | None = None,
    host_label: str = HOST_LABEL,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(label names, label values) dcgm-exporter attaches to this GPU's series (or to those of
    its GPU instance ``mig``: the GPU's, with GPU_I_PROFILE and GPU_I_ID after modelName), up to
    the driver version label. ``host_label`` names the host's label (``hostname``, or
    ``Hostname`` as dcgm-exporter before 4.6.0-4.8.3)."""
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
        values += [gpu_instance_profile(mig), "" if gi is None else str(gi)]
    if snapshot.system.hostname:
        names.append(host_label)
        values.append(snapshot.system.hostname)
    return tuple(names), tuple(values)


def gpu_instance_profile(mig: MigDevice) -> str:
    """The profile of the MIG device's GPU instance (``3g.40gb``), as dcgm-exporter's
    GPU_I_PROFILE: not a smaller compute instance's (``1c.3g.40gb``)."""
    profile = mig.profile or ""
    head, dot, rest = profile.partition(".")
    return rest if dot and head.endswith("c") and head[:-1].isdigit() else profile


def answered(snapshot: Snapshot) -> tuple[GpuSample, ...]:
    """The GPUs whose readings in ``snapshot`` are current: the driver answered for them.

    Not a GPU that is NOT_RESPONDING (a call hung), LOST or ERROR, and none of a snapshot
    re-sent as stale (``stale_s`` set: the sampler's last reading again while the driver hangs,
    fails or restarts), whose values are old: served as current, they would hide the trouble.
    """
    if snapshot.stale_s is not None:
        return ()
    return tuple(g for g in snapshot.gpus if g.state is GpuState.OK and g.stale_s is None)


def gpu_instances(gpu: GpuSample) -> tuple[MigDevice, ...]:
    """The GPU's GPU instances, one MIG device for each (its compute instances share its memory
    and its series); none for a GPU not in MIG mode or without instances."""
    seen: set[int | None] = set()
    found = []
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id not in seen:
            seen.add(mig.gpu_instance_id)
            found.append(mig)
    return tuple(found)


def pod_of(
    gpu: GpuSample, snapshot: Snapshot, mig: MigDevice | None = None
) -> tuple[str, str, str] | None:
    """(container, namespace, pod) when every process on the GPU (or on its GPU instance
    ``mig``) runs in the same Kubernetes pod, as dcgm-exporter labels a device allocated to a
    pod; container is empty when they run in several of its containers. None otherwise."""
    rows = {row.pid: row for row in snapshot.processes}
    pods: set[tuple[str, str]] = set()
    containers: set[str] = set()
    procs = gpu.processes
    if mig is not None:
        procs = tuple(
            p
            for p in procs
            if (m := gpu.mig_device_of(p)) is not None and m.gpu_instance_id == mig.gpu_instance_id
        )
    for proc in procs:
        row = rows.get(proc.pid)
        box = row.info.container if row is not None else None
        if box is None or not box.pod:
            return None  # a process outside any pod: the GPU is not one pod's
        pods.add((box.namespace or "", box.pod))
        containers.add(box.name or "")
    if len(pods) != 1:
        return None
    ((namespace, pod),) = pods
    return (containers.pop() if len(containers) == 1 else ""), namespace, pod


def _series(snapshot: Snapshot, live: Iterable[GpuSample], host_label: str) -> list[_Series]:
    """The series of the GPUs that answered: one per GPU, or one per GPU instance of a MIG GPU."""
    driver = snapshot.system.driver_version or ""
    found = []
    for gpu in live:
        for mig in gpu_instances(gpu) or (None,):
            names, values = dcgm_labels(gpu, snapshot, mig, host_label)
            found.append(_Series(names, values, driver, gpu, mig))
    return found


def _names(fields: FieldNames, info: dcgm.Field) -> list[tuple[str, bool]]:
    """(name, new) pairs a field is served under."""
    if info.new is None:
        return [(info.legacy, False)]
    if fields is FieldNames.LEGACY:
        return [(info.legacy, False)]
    if fields is FieldNames.DCGM47:
        return [(info.new, True)]
    return [(info.legacy, False), (info.new, True)]


def dcgm_families(
    snapshot: Snapshot,
    host_label: str = HOST_LABEL,
    field_names: FieldNames = FieldNames.LEGACY,
) -> list[Family]:
    """The dcgm-exporter compatible families of the GPUs that answered (see :func:`answered`);
    unreported readings are left out. ``field_names`` picks the legacy names, DCGM 4.7's, or
    both (see gputop.dcgm)."""
    live = answered(snapshot)
    counters = {c.index: c for c in snapshot.counters}
    series = _series(snapshot, live, host_label)
    pods = {(s.gpu.index, _gi(s.mig)): pod_of(s.gpu, snapshot, s.mig) for s in series}
    # dcgm-exporter 4.9.0 renames the driver label with the field names (DCGM 4.7's name)
    new_driver = field_names is FieldNames.DCGM47
    families = []
    for field in DCGM_FIELDS:
        info = field.info
        raw: list[tuple[_Series, float]] = []
        for s in series:
            value = _value(field, s, counters.get(s.gpu.index))
            if value is not None:
                raw.append((s, value))
        if not raw:
            continue
        for name, new in _names(field_names, info):
            driver_label = dcgm.DRIVER_LABEL_NEW if new or new_driver else dcgm.DRIVER_LABEL
            samples = []
            for s, value in raw:
                names = (*s.names, driver_label)
                values = (*s.values, s.driver)
                pod = pods[(s.gpu.index, _gi(s.mig))]
                if pod is not None:
                    names += POD_LABELS
                    values += pod
                if field.name == XID_FIELD:
                    code = int(value)
                    names += XID_LABELS
                    values += (str(code), dcgm.xid_message(code))
                samples.append(
                    Sample(
                        labels=values,
                        value=info.to_new(value) if new else value,
                        label_names=names,
                    )
                )
            families.append(
                Family(
                    name=name,
                    kind=Kind(str(info.type)),
                    help=(info.new_help or info.help) if new else info.help,
                    label_names=samples[0].label_names or (),
                    samples=tuple(samples),
                    exact=info.type is dcgm.Type.COUNTER,
                )
            )
    return families


def _gi(mig: MigDevice | None) -> int | None:
    return None if mig is None else mig.gpu_instance_id


def _value(field: DcgmField, s: _Series, counters: GpuCounters | None) -> float | None:
    """The field's value on the series ``s`` (see :class:`DcgmField`)."""
    if s.mig is None:
        return field.read(s.gpu, counters)
    if field.read_mig is not None:
        return _num(field.read_mig(s.mig))
    return field.read(s.gpu, counters) if field.per_gpu else None


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
        "(holder: device open but no context; defunct: zombie; orphan: parent gone; stopped; "
        "unkillable: state D in a kernel call, no signal acts on it).",
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


def health_families(snapshot: Snapshot) -> list[Family]:
    """The GPU health verdict (gputop.engine.gpu_health): one series per GPU and verdict, 1 for
    the GPU's own (alert on ``gputop_gpu_health{verdict="reset needed"} == 1``), and one series
    per reason with the evidence behind it."""
    verdicts = []
    reasons = []
    for health, gpu in zip(assess_all(snapshot), snapshot.gpus, strict=True):
        labels = (str(gpu.index), gpu.uuid or "")
        verdicts += [
            Sample(labels=(*labels, v.value), value=float(v is health.verdict)) for v in Verdict
        ]
        reasons += [
            Sample(labels=(*labels, r.verdict.value, r.evidence, r.source), value=1.0)
            for r in health.reasons
        ]
    return [
        Family(
            name="gputop_gpu_health",
            kind=Kind.GAUGE,
            help="1 for the GPU's health verdict from what the driver says (ok, degraded, reset "
            "needed, reboot needed, replace; unknown: none of it could be read), 0 for the others.",
            label_names=("gpu", "UUID", "verdict"),
            samples=tuple(verdicts),
        ),
        Family(
            name="gputop_gpu_health_reason",
            kind=Kind.GAUGE,
            help="One series per piece of evidence behind a GPU's health verdict: the verdict it "
            "gives, the evidence and what was read (an NVML call, field or event).",
            label_names=("gpu", "UUID", "verdict", "evidence", "source"),
            samples=tuple(reasons),
        ),
    ]


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
    field_names: FieldNames = FieldNames.LEGACY,
) -> list[Family]:
    """Every family for one scrape of ``snapshot`` (None: nothing sampled yet).

    ``age_s`` is how old the newest good sample is (see :func:`sample_age_s`); it grows while
    the driver hangs. ``sampler_restarts`` is how often the driver process was restarted, by
    default the snapshot's count. ``host_label`` names the host label of the DCGM series,
    ``field_names`` picks their names (see :class:`FieldNames`).
    ``driver_up`` adds gputop_driver_up (None: not known, left out).
    """
    if sampler_restarts is None:
        sampler_restarts = snapshot.sampler_restarts if snapshot is not None else 0
    families = dcgm_families(snapshot, host_label, field_names) if snapshot is not None else []
    if snapshot is not None:
        families += xid_families(snapshot)
        families += [
            process_family(snapshot),
            stuck_family(snapshot),
            unattributed_family(snapshot),
            lost_family(snapshot),
            responding_family(snapshot),
            *health_families(snapshot),
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
