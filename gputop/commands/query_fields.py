"""The fields of ``gputop query``: names, aliases, units and values as nvidia-smi prints (pure).

The names and aliases are nvidia-smi's own (``nvidia_smi_fields.txt``, from its
``--help-query-gpu`` and ``--help-query-compute-apps``); how each is read and shown is
:mod:`gputop.commands.query_table`. A value the driver did not give is spelled by the error it gave
instead, as nvidia-smi spells it: ``[Insufficient Permissions]``, ``[GPU is lost]``,
``[Unknown Error]``, ``[Requested functionality has been deprecated]``; a reading the GPU does
not have (NOT_SUPPORTED, or a call this driver lacks) is ``[N/A]``, or ``[Not Supported]`` on
drivers older than :data:`NA_FOR_NOT_SUPPORTED_SINCE`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from importlib import resources

from gputop.commands.query_table import (
    LEGACY_SPECS,
    NA,
    SPECS,
    Spec,
    Value,
    driver_major,
    timestamp_text,
)
from gputop.engine.model import GpuProcess, GpuSample, GpuState, Snapshot, Unavailable
from gputop.engine.probes import Probe
from gputop.units import whole_mib

NOT_SUPPORTED = "[Not Supported]"
LOST = "[GPU is lost]"
UNKNOWN_ERROR = "[Unknown Error]"
NOT_FOUND = "[Not Found]"
# nvidia-smi printed [Not Supported] for NVML_ERROR_NOT_SUPPORTED until about driver R440 (2020)
# and [N/A] since: its CSV from drivers 580 to 610 has [N/A] for every unsupported field.
NA_FOR_NOT_SUPPORTED_SINCE = 440
# How nvidia-smi spells the errors that are not "the GPU has no such reading".
_ERROR_TEXT = {
    Unavailable.NO_PERMISSION: "[Insufficient Permissions]",
    Unavailable.GPU_LOST: LOST,
    Unavailable.UNKNOWN: UNKNOWN_ERROR,
    Unavailable.DEPRECATED: "[Requested functionality has been deprecated]",
}
FIELDS_FILE = "nvidia_smi_fields.txt"


def smi_fields(section: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(name, aliases) of one section of the field list (``query-gpu``), in nvidia-smi's order."""
    text = resources.files("gputop.commands").joinpath(FIELDS_FILE).read_text(encoding="utf-8")
    out: list[tuple[str, tuple[str, ...]]] = []
    current = None
    for line in (raw.strip() for raw in text.splitlines()):
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = line.strip("[]")
        elif current == section:
            name, *aliases = line.split("|")
            out.append((name, tuple(a for a in aliases if a != name)))
    return tuple(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Field(Spec):
    """One queryable column: how it is read and shown (its Spec), under its names."""

    name: str  # the canonical name: also the CSV header
    aliases: tuple[str, ...] = ()

    @property
    def header(self) -> str:
        """``"memory.used [MiB]"``; no brackets for unit-less fields."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name


def _field(name: str, aliases: tuple[str, ...], spec: Spec) -> Field:
    return Field(
        name=name, aliases=aliases, **{f.name: getattr(spec, f.name) for f in fields(spec)}
    )


ALL_GPU_FIELDS: tuple[Field, ...] = tuple(
    _field(name, aliases, SPECS[name]) for name, aliases in smi_fields("query-gpu")
)
# Accepted, from older drivers' nvidia-smi, but not part of the 580 list (nor of its help).
LEGACY_GPU_FIELDS: tuple[Field, ...] = tuple(
    _field(name, (), spec) for name, spec in LEGACY_SPECS.items()
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AppRow:
    """One compute process on one GPU, with its name resolved (``None``: not found)."""

    process: GpuProcess
    gpu: GpuSample
    process_name: str | None


AppReader = Callable[[Snapshot, AppRow], Value]


@dataclass(frozen=True, slots=True, kw_only=True)
class AppField:
    """One --query-compute-apps column."""

    name: str
    help: str
    read: AppReader
    aliases: tuple[str, ...] = ()
    unit: str | None = None
    missing: str = NA

    @property
    def header(self) -> str:
        """As for GPU fields."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name


def _mib(value_bytes: int | None) -> int | None:
    return None if value_bytes is None else whole_mib(value_bytes)


# name -> (help, reader, unit, placeholder); names and aliases come from the field list.
_APP_SPECS: dict[str, tuple[str, AppReader, str | None, str]] = {
    "timestamp": (
        "When the query ran.",
        lambda s, r: timestamp_text(s.taken_at_wall),
        None,
        NA,
    ),
    "gpu_name": ("The GPU's product name.", lambda s, r: r.gpu.name, None, NA),
    "gpu_bus_id": ("The GPU's PCI bus id.", lambda s, r: r.gpu.pci_bus_id, None, NA),
    "gpu_serial": ("The GPU's serial number.", lambda s, r: r.gpu.serial, None, NA),
    "gpu_uuid": ("The GPU's UUID.", lambda s, r: r.gpu.uuid, None, NA),
    "pid": ("Process ID of the compute application.", lambda s, r: r.process.pid, None, NA),
    "process_name": (
        "The process's executable (argv[0]), or [Not Found].",
        lambda s, r: r.process_name,
        None,
        NOT_FOUND,
    ),
    "used_gpu_memory": (
        "GPU memory the process's context holds.",
        lambda s, r: _mib(r.process.used_memory_bytes),
        "MiB",
        NA,
    ),
}

APP_FIELDS: tuple[AppField, ...] = tuple(
    AppField(
        name=name,
        aliases=aliases,
        help=_APP_SPECS[name][0],
        read=_APP_SPECS[name][1],
        unit=_APP_SPECS[name][2],
        missing=_APP_SPECS[name][3],
    )
    for name, aliases in smi_fields("query-compute-apps")
)


def _resolve(names: str, known: dict[str, int], what: str) -> list[int]:
    """Positions in a field table for ``a,b,c`` (case-insensitive, aliases too)."""
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    if not wanted:
        raise ValueError(f"no fields given to --query-{what}")
    out: list[int] = []
    for name in wanted:
        if name.lower() not in known:
            raise ValueError(
                f'Field "{name}" is not a valid field to query '
                f"(see gputop query --help-query-{what})"
            )
        out.append(known[name.lower()])
    return out


def _names(table: Sequence[Field | AppField]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i, item in enumerate(table):
        for key in (item.name, *item.aliases):
            out[key.lower()] = i
    return out


_ACCEPTED_GPU_FIELDS = ALL_GPU_FIELDS + LEGACY_GPU_FIELDS
_GPU_NAMES = _names(_ACCEPTED_GPU_FIELDS)
_APP_NAMES = _names(APP_FIELDS)


def parse_gpu_fields(names: str) -> list[Field]:
    """Fields for ``--query-gpu=a,b,c``; ValueError naming the first unknown one."""
    return [_ACCEPTED_GPU_FIELDS[i] for i in _resolve(names, _GPU_NAMES, "gpu")]


def parse_app_fields(names: str) -> list[AppField]:
    """Fields for ``--query-compute-apps=a,b,c``; ValueError naming the first unknown one."""
    return [APP_FIELDS[i] for i in _resolve(names, _APP_NAMES, "compute-apps")]


def wanted_readings(fields: Sequence[Field]) -> tuple[tuple[Probe, ...], tuple[str, ...]]:
    """What the driver must be asked for these fields: (extra probes, attributes to explain)."""
    probes = tuple(dict.fromkeys(f.probe for f in fields if f.probe is not None))
    explain = tuple(dict.fromkeys(f.reading for f in fields if f.probe is None and f.reading))
    return probes, explain


def render(value: Value, unit: str | None, *, units: bool) -> str:
    """A present value as text: ``45 %``, ``250.12 W`` (two decimals for watts)."""
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if units and unit else text


def gpu_value(field: Field, snapshot: Snapshot, gpu: GpuSample) -> Value:
    """The typed value (None: absent, or the GPU is lost and the field is not identity)."""
    if gpu.state is not GpuState.OK and not field.identity:
        return None
    return field.read(snapshot, gpu)


def _legacy_driver(snapshot: Snapshot) -> bool:
    major = driver_major(snapshot)
    return major is not None and major < NA_FOR_NOT_SUPPORTED_SINCE


def unavailable_text(field: Field, snapshot: Snapshot, gpu: GpuSample) -> str:
    """What nvidia-smi prints for a field with no value: chosen by the driver's error."""
    if gpu.state is GpuState.LOST:
        return LOST
    if gpu.state is GpuState.ERROR:
        return UNKNOWN_ERROR
    why = gpu.why_unavailable(field.reading) if field.reading else None
    if why in _ERROR_TEXT:
        return _ERROR_TEXT[why]
    if why is Unavailable.NOT_SUPPORTED and _legacy_driver(snapshot):
        return NOT_SUPPORTED
    return field.missing


def field_text(field: Field, snapshot: Snapshot, gpu: GpuSample, *, units: bool = True) -> str:
    """One CSV cell for one GPU, exactly as nvidia-smi would print it."""
    value = gpu_value(field, snapshot, gpu)
    if value is not None:
        return render(value, field.unit, units=units)
    return unavailable_text(field, snapshot, gpu)


def app_text(field: AppField, snapshot: Snapshot, row: AppRow, *, units: bool = True) -> str:
    """One CSV cell for one compute process."""
    value = field.read(snapshot, row)
    return field.missing if value is None else render(value, field.unit, units=units)


def help_text(*, apps: bool = False) -> str:
    """``--help-query-gpu`` (or ``--help-query-compute-apps``) laid out as nvidia-smi's."""
    table: Sequence[Field | AppField] = APP_FIELDS if apps else ALL_GPU_FIELDS
    switch = "--query-compute-apps" if apps else "--query-gpu"
    lines = [f'List of valid properties to query for the switch "{switch}":', ""]
    for f in table:
        lines.append(" or ".join(f'"{n}"' for n in (f.name, *f.aliases)))
        lines.extend((f.help, ""))
    if not apps:
        older = ", ".join(f.name for f in LEGACY_GPU_FIELDS)
        lines.extend((f"Also accepted, as drivers before 580 named them: {older}.", ""))
    return "\n".join(lines)
