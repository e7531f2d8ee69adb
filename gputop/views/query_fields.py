"""The fields of ``gputop query``: names, aliases, units and values as nvidia-smi prints (pure).

Each field reads a typed value from a (Snapshot, GpuSample) pair; :func:`field_text` turns it into
nvidia-smi's text (``"45 %"``, ``"61234 MiB"``, ``"250.12 W"``). The driver layer records only
"no value" (``None``); the placeholder printed for it is the one nvidia-smi prints for that field
on a GPU that lacks it: ``[Not Supported]`` for readings the hardware does not have (utilisation,
power, clocks, PCIe, P-state, clock event reasons) and ``[N/A]`` for the rest (fan on a fanless
board, ECC, MIG, reserved memory). A lost GPU prints ``[GPU is lost]`` for everything but its
identity, a GPU that could not be read ``[Unknown Error]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gputop.model import THROTTLE_REASON_BITS, GpuProcess, GpuSample, GpuState, Snapshot

MiB = 1024**2
NA = "[N/A]"
NOT_SUPPORTED = "[Not Supported]"
LOST = "[GPU is lost]"
UNKNOWN_ERROR = "[Unknown Error]"

Value = int | float | str | None
Reader = Callable[[Snapshot, GpuSample], Value]


@dataclass(frozen=True, slots=True, kw_only=True)
class Field:
    """One queryable column."""

    name: str  # the canonical name: also the CSV header
    help: str
    read: Reader
    aliases: tuple[str, ...] = ()
    unit: str | None = None  # header "[unit]" and value suffix, e.g. "MiB"
    missing: str = NA  # printed when the value is None on a healthy GPU
    identity: bool = False  # known even for a lost GPU (index, name, ...)

    @property
    def header(self) -> str:
        """``"memory.used [MiB]"``; no brackets for unit-less fields."""
        return f"{self.name} [{self.unit}]" if self.unit else self.name


def timestamp_text(wall_s: float) -> str:
    """Local time as nvidia-smi prints it: ``2024/01/31 12:34:56.789``."""
    whole = int(wall_s)
    millis = round((wall_s - whole) * 1000)
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(whole)) + f".{millis:03d}"


def _mib(value_bytes: int | None) -> int | None:
    return None if value_bytes is None else value_bytes // MiB


def _watts(value_mw: int | None) -> float | None:
    return None if value_mw is None else round(value_mw / 1000, 2)


def _enabled(value: bool | None) -> str | None:
    return None if value is None else ("Enabled" if value else "Disabled")


def reasons_mask(reasons: tuple[str, ...] | None) -> int | None:
    """The NVML bitmask for decoded reason names (unknown names are ignored)."""
    if reasons is None:
        return None
    mask = 0
    for name in reasons:
        mask |= THROTTLE_REASON_BITS.get(name, 0)
    return mask


def _reasons_hex(s: Snapshot, g: GpuSample) -> str | None:
    mask = reasons_mask(g.throttle_reasons)
    return None if mask is None else f"0x{mask:016X}"


def _reason_reader(name: str) -> Reader:
    def read(s: Snapshot, g: GpuSample) -> str | None:
        if g.throttle_reasons is None:
            return None
        return "Active" if name in g.throttle_reasons else "Not Active"

    return read


def _compute_cap(s: Snapshot, g: GpuSample) -> str | None:
    cc = g.compute_capability
    return None if cc is None else f"{cc[0]}.{cc[1]}"


def _pstate(s: Snapshot, g: GpuSample) -> str | None:
    return None if g.performance_state is None else f"P{g.performance_state}"


def _g(attr: str) -> Reader:
    def read(s: Snapshot, g: GpuSample) -> Value:
        value: Value = getattr(g, attr)
        return value

    return read


_U = NOT_SUPPORTED
_ID = "identity"
# (name, aliases, unit, placeholder when None or _ID, reader, help)
_GPU_TABLE: tuple[tuple[str, tuple[str, ...], str | None, str, Reader, str], ...] = (
    ("timestamp", (), None, _ID, lambda s, g: timestamp_text(s.taken_at_wall),
     'When the query was made, "YYYY/MM/DD HH:MM:SS.msec" (local time).'),
    ("driver_version", (), None, _ID, lambda s, g: s.system.driver_version,
     "The version of the installed NVIDIA display driver."),
    ("count", (), None, _ID, lambda s, g: len(s.gpus), "The number of NVIDIA GPUs in the system."),
    ("name", ("gpu_name",), None, _ID, _g("name"), "The official product name of the GPU."),
    ("serial", ("gpu_serial",), None, NA, _g("serial"),
     "The board serial number, as printed on the board."),
    ("uuid", ("gpu_uuid",), None, _ID, _g("uuid"),
     "The globally unique immutable identifier of the GPU."),
    ("pci.bus_id", ("gpu_bus_id",), None, _ID, _g("pci_bus_id"),
     'PCI bus id as "domain:bus:device.function", in hex.'),
    ("index", (), None, _ID, _g("index"), "Zero based index of the GPU (NVML order)."),
    ("compute_cap", (), None, NA, _compute_cap, "The CUDA compute capability, major.minor."),
    ("pstate", (), None, _U, _pstate,
     "The current performance state, P0 (maximum) to P12 (minimum)."),
    ("temperature.gpu", (), None, NA, _g("temperature_c"), "Core GPU temperature, in degrees C."),
    ("temperature.memory", (), None, "N/A", _g("temperature_memory_c"),
     "HBM memory temperature, in degrees C (N/A on boards without the sensor)."),
    ("utilization.gpu", (), "%", _U, _g("utilization_gpu_percent"),
     "Percent of time over the past sample period during which a kernel was executing."),
    ("utilization.memory", (), "%", _U, _g("utilization_memory_percent"),
     "Percent of time over the past sample period during which memory was read or written."),
    ("utilization.encoder", (), "%", _U, _g("encoder_percent"),
     "Percent of time the video encoder was busy."),
    ("utilization.decoder", (), "%", _U, _g("decoder_percent"),
     "Percent of time the video decoder was busy."),
    ("memory.total", (), "MiB", NA, lambda s, g: _mib(g.memory_total_bytes),
     "Total installed GPU memory."),
    ("memory.reserved", (), "MiB", NA, lambda s, g: _mib(g.memory_reserved_bytes),
     "Memory reserved by the driver and firmware."),
    ("memory.used", (), "MiB", NA, lambda s, g: _mib(g.memory_used_bytes),
     "Memory allocated by active contexts."),
    ("memory.free", (), "MiB", NA, lambda s, g: _mib(g.memory_free_bytes), "Total free memory."),
    ("power.draw", (), "W", _U, lambda s, g: _watts(g.power_draw_mw),
     "The last measured power draw for the entire board, in watts."),
    ("power.limit", (), "W", _U, lambda s, g: _watts(g.power_limit_mw),
     "The power limit the driver enforces, in watts."),
    ("enforced.power.limit", (), "W", _U, lambda s, g: _watts(g.power_limit_mw),
     "The power management algorithm's power ceiling, in watts."),
    ("clocks.current.graphics", ("clocks.gr",), "MHz", _U, _g("clock_graphics_mhz"),
     "Current frequency of the graphics (shader) clock."),
    ("clocks.current.sm", ("clocks.sm",), "MHz", _U, _g("clock_sm_mhz"),
     "Current frequency of the SM (Streaming Multiprocessor) clock."),
    ("clocks.current.memory", ("clocks.mem",), "MHz", _U, _g("clock_memory_mhz"),
     "Current frequency of the memory clock."),
    ("clocks.max.graphics", ("clocks.max.gr",), "MHz", _U, _g("clock_graphics_max_mhz"),
     "Maximum frequency of the graphics (shader) clock."),
    ("clocks.max.sm", (), "MHz", _U, _g("clock_sm_max_mhz"), "Maximum frequency of the SM clock."),
    ("clocks.max.memory", ("clocks.max.mem",), "MHz", _U, _g("clock_memory_max_mhz"),
     "Maximum frequency of the memory clock."),
    ("fan.speed", (), "%", NA, lambda s, g: g.fan_speed_percent,
     "The fan speed as a percent of its maximum (first fan)."),
    ("pcie.link.gen.current", (), None, _U, _g("pcie_gen"), "The current PCIe link generation."),
    ("pcie.link.gen.max", (), None, _U, _g("pcie_gen_max"), "The maximum PCIe link generation."),
    ("pcie.link.width.current", (), None, _U, _g("pcie_width"),
     "The current PCIe link width (lanes)."),
    ("pcie.link.width.max", (), None, _U, _g("pcie_width_max"),
     "The maximum PCIe link width (lanes)."),
    ("compute_mode", (), None, NA, _g("compute_mode"),
     "Default, Exclusive_Thread, Prohibited or Exclusive_Process."),
    ("persistence_mode", (), None, NA, lambda s, g: _enabled(g.persistence_mode),
     "Whether persistence mode is Enabled or Disabled."),
    ("mig.mode.current", (), None, NA, lambda s, g: _enabled(g.mig_mode),
     "The MIG mode the GPU is in: Enabled or Disabled."),
    ("ecc.errors.uncorrected.volatile.total", (), None, NA,
     _g("ecc_errors_uncorrected_volatile"), "Uncorrected ECC errors since the last driver load."),
)  # fmt: skip

GPU_FIELDS: tuple[Field, ...] = tuple(
    Field(
        name=name,
        aliases=aliases,
        unit=unit,
        missing=NA if missing == _ID else missing,
        identity=missing == _ID,
        read=read,
        help=help_,
    )
    for name, aliases, unit, missing, read, help_ in _GPU_TABLE
)


def _reason_fields() -> tuple[Field, ...]:
    """clocks_event_reasons.* (current nvidia-smi's headers; the older throttle names alias)."""
    out = [
        Field(
            name="clocks_event_reasons.active",
            aliases=("clocks_throttle_reasons.active",),
            help="Bitmask of active clock event reasons (see nvml.h), e.g. 0x0000000000000004.",
            read=_reasons_hex,
            missing=_U,
        )
    ]
    out.extend(
        Field(
            name=f"clocks_event_reasons.{name}",
            aliases=(f"clocks_throttle_reasons.{name}",),
            help=f"Active or Not Active: {name.replace('_', ' ')}.",
            read=_reason_reader(name),
            missing=_U,
        )
        for name in THROTTLE_REASON_BITS
        if name != "display_clock_setting"  # in the mask, but nvidia-smi has no field for it
    )
    return tuple(out)


ALL_GPU_FIELDS: tuple[Field, ...] = GPU_FIELDS + _reason_fields()


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


APP_FIELDS: tuple[AppField, ...] = (
    AppField(
        name="timestamp",
        help="When the query was made.",
        read=lambda s, r: timestamp_text(s.taken_at_wall),
    ),
    AppField(name="gpu_name", help="The GPU's product name.", read=lambda s, r: r.gpu.name),
    AppField(name="gpu_bus_id", help="The GPU's PCI bus id.", read=lambda s, r: r.gpu.pci_bus_id),
    AppField(
        name="gpu_serial",
        help="The GPU's serial number.",
        read=lambda s, r: r.gpu.serial,
    ),
    AppField(name="gpu_uuid", help="The GPU's UUID.", read=lambda s, r: r.gpu.uuid),
    AppField(
        name="pid", help="Process ID of the compute application.", read=lambda s, r: r.process.pid
    ),
    AppField(
        name="process_name",
        help="The process's executable (argv[0]), or [Not Found].",
        read=lambda s, r: r.process_name,
        aliases=("name",),
        missing="[Not Found]",
    ),
    AppField(
        name="used_gpu_memory",
        help="GPU memory used by the process.",
        read=lambda s, r: _mib(r.process.used_memory_bytes),
        aliases=("used_memory",),
        unit="MiB",
    ),
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


def parse_gpu_fields(names: str) -> list[Field]:
    """Fields for ``--query-gpu=a,b,c``; ValueError naming the first unknown one."""
    return [ALL_GPU_FIELDS[i] for i in _resolve(names, _names(ALL_GPU_FIELDS), "gpu")]


def parse_app_fields(names: str) -> list[AppField]:
    """Fields for ``--query-compute-apps=a,b,c``; ValueError naming the first unknown one."""
    return [APP_FIELDS[i] for i in _resolve(names, _names(APP_FIELDS), "compute-apps")]


def render(value: Value, unit: str | None, *, units: bool) -> str:
    """A present value as text: ``45 %``, ``250.12 W`` (two decimals for watts)."""
    text = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{text} {unit}" if units and unit else text


def gpu_value(field: Field, snapshot: Snapshot, gpu: GpuSample) -> Value:
    """The typed value (None: absent, or the GPU is lost and the field is not identity)."""
    if gpu.state is not GpuState.OK and not field.identity:
        return None
    return field.read(snapshot, gpu)


def field_text(field: Field, snapshot: Snapshot, gpu: GpuSample, *, units: bool = True) -> str:
    """One CSV cell for one GPU, exactly as nvidia-smi would print it."""
    value = gpu_value(field, snapshot, gpu)
    if value is not None:
        return render(value, field.unit, units=units)
    if gpu.state is GpuState.LOST:
        return LOST
    if gpu.state is GpuState.ERROR:
        return UNKNOWN_ERROR
    return field.missing


def app_text(field: AppField, snapshot: Snapshot, row: AppRow, *, units: bool = True) -> str:
    """One CSV cell for one compute process."""
    value = field.read(snapshot, row)
    return field.missing if value is None else render(value, field.unit, units=units)


def help_text(*, apps: bool = False) -> str:
    """``--help-query-gpu`` (or ``--help-query-compute-apps``): fields with aliases, one a line."""
    table: Sequence[Field | AppField] = APP_FIELDS if apps else ALL_GPU_FIELDS
    what = "--query-compute-apps" if apps else "--query-gpu"
    lines = [f"Fields for {what} (nvidia-smi names; aliases after 'or'):", ""]
    for f in table:
        names = f'"{f.name}"' + "".join(f' or "{a}"' for a in f.aliases)
        lines.append(f"{names}: {f.help}")
    return "\n".join(lines) + "\n"
