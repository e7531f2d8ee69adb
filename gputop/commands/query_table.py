"""Where each ``--query-gpu`` field's value comes from, its unit, its text and its help (pure).

Field names and aliases are data (``nvidia_smi_fields.txt``, from nvidia-smi's own help);
this table says, for each name, how gputop gets it: a GpuSample attribute the dashboard reads
anyway, an extra driver reading (a :class:`~gputop.engine.probes.Probe`, read only when a query
asks), or nothing (the field is printed as unavailable). Units and value formats are
nvidia-smi's, as its CSV output on a driver 580 box shows them; the help texts are gputop's own
words.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gputop.engine.model import THROTTLE_REASON_BITS, GpuSample, Scalar, Snapshot
from gputop.engine.probes import Probe, call, field_value, struct
from gputop.units import whole_mib

NA = "[N/A]"
PLAIN_NA = "N/A"  # what nvidia-smi prints, unbracketed, for an HBM sensor or fabric it lacks

Value = int | float | str | None
Reader = Callable[[Snapshot, GpuSample], Value]
Show = Callable[[Scalar], Value]


@dataclass(frozen=True, slots=True, kw_only=True)
class Spec:
    """How one field is read and shown (the name and aliases come from the data file)."""

    help: str
    read: Reader
    unit: str | None = None
    missing: str = NA  # the text for "not available here" (not supported, not applicable)
    identity: bool = False  # known even for a lost GPU (index, name, ...)
    reading: str | None = None  # the attribute or probe key whose driver error explains a None
    probe: Probe | None = None  # the extra reading a query must ask the driver for


# -- how values are shown ------------------------------------------------------------------------


def _same(value: Scalar) -> Value:
    return value


def _enabled(value: Scalar) -> Value:
    return "Enabled" if value else "Disabled"


def _yes_no(value: Scalar) -> Value:
    return "Yes" if value else "No"


def _hex(digits: int) -> Show:
    return lambda value: f"0x{int(value):0{digits}X}"


def _named(names: dict[int, str]) -> Show:
    return lambda value: names.get(int(value), str(value))


def _watts_from_mw(value: Scalar) -> Value:
    return round(int(value) / 1000, 2)


def _watts(value: Scalar) -> Value:
    return round(float(value), 2)


def _mib(value: Scalar) -> Value:
    return whole_mib(int(value))


def _uuid(value: Scalar) -> Value:
    """16 bytes as hex (``0x...``; empty when all zero) to 8-4-4-4-12 text."""
    digits = str(value).removeprefix("0x").lower().rjust(32, "0")[:32]
    return "-".join((digits[:8], digits[8:12], digits[12:16], digits[16:20], digits[20:]))


def _guid(value: Scalar) -> Value:
    digits = str(value).removeprefix("0x") or "0"
    return f"0x{int(digits, 16) & (2**64 - 1):016X}"


# -- field kinds ---------------------------------------------------------------------------------


def attr(
    name: str,
    help_: str,
    *,
    show: Callable[[Any], Value] | None = None,
    unit: str | None = None,
    missing: str = NA,
) -> Spec:
    """A GpuSample attribute the dashboard reads anyway, as it is or converted by ``show``."""

    def read(s: Snapshot, g: GpuSample) -> Value:
        value = getattr(g, name)
        return value if show is None or value is None else show(value)

    return Spec(help=help_, read=read, reading=name, unit=unit, missing=missing)


def extra(
    probe: Probe, help_: str, show: Show = _same, *, unit: str | None = None, missing: str = NA
) -> Spec:
    """An extra driver reading, asked for only by a query that shows it."""
    key = probe.key

    def read(s: Snapshot, g: GpuSample) -> Value:
        value = g.extra_value(key)
        return None if value is None else show(value)

    return Spec(help=help_, read=read, reading=key, probe=probe, unit=unit, missing=missing)


def absent(help_: str, missing: str = NA) -> Spec:
    """A field gputop has no driver reading for: always ``missing``."""
    return Spec(help=help_, read=lambda s, g: None, missing=missing)


def fixed(text: str, help_: str) -> Spec:
    """The same text on every GPU."""
    return Spec(help=help_, read=lambda s, g: text)


def system(read: Reader, help_: str) -> Spec:
    """A fact of the box or of the query, known for a lost GPU too."""
    return Spec(help=help_, read=read, identity=True)


# -- the derived readers of the typed fields -----------------------------------------------------


def reasons_mask(reasons: tuple[str, ...] | None) -> int | None:
    """The NVML bitmask for decoded reason names (unknown names are ignored)."""
    if reasons is None:
        return None
    mask = 0
    for name in reasons:
        mask |= THROTTLE_REASON_BITS.get(name, 0)
    return mask


def _reason(name: str) -> Callable[[tuple[str, ...]], Value]:
    return lambda reasons: "Active" if name in reasons else "Not Active"


def _compute_cap(cc: tuple[int, int]) -> Value:
    return f"{cc[0]}.{cc[1]}"


def _first_fan(speeds: tuple[int, ...]) -> Value:
    return speeds[0] if speeds else None


# -- the table -----------------------------------------------------------------------------------

_UNCORRECTED, _CORRECTED = "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_MEMORY_ERROR_TYPE_CORRECTED"
_VOLATILE, _AGGREGATE = "NVML_VOLATILE_ECC", "NVML_AGGREGATE_ECC"
_ECC_LOCATIONS = {
    "device_memory": ("NVML_MEMORY_LOCATION_DEVICE_MEMORY", "global device memory"),
    "dram": ("NVML_MEMORY_LOCATION_DRAM", "DRAM"),
    "register_file": ("NVML_MEMORY_LOCATION_REGISTER_FILE", "the register file"),
    "l1_cache": ("NVML_MEMORY_LOCATION_L1_CACHE", "the L1 cache"),
    "l2_cache": ("NVML_MEMORY_LOCATION_L2_CACHE", "the L2 cache"),
    "texture_memory": ("NVML_MEMORY_LOCATION_TEXTURE_MEMORY", "texture memory (parity)"),
    "cbu": ("NVML_MEMORY_LOCATION_CBU", "the CBU (parity)"),
    "sram": ("NVML_MEMORY_LOCATION_SRAM", "on-chip SRAM"),
}
_SRAM_STATUS = ("nvmlDeviceGetSramEccErrorStatus", "c_nvmlEccSramErrorStatus_v1_t")
_SRAM_VERSION = "nvmlEccSramErrorStatus_v1"
_SRAM_PARTS = {
    "volatile.sram.parity": ("volatileUncParity", "Uncorrected SRAM parity errors since load."),
    "volatile.sram.secded": ("volatileUncSecDed", "Uncorrected SRAM SEC-DED errors since load."),
    "aggregate.sram.parity": ("aggregateUncParity", "Uncorrected SRAM parity errors, lifetime."),
    "aggregate.sram.secded": ("aggregateUncSecDed", "Uncorrected SRAM SEC-DED errors, lifetime."),
    "aggregate.sram.l2": ("aggregateUncBucketL2", "Lifetime uncorrected SRAM errors in L2."),
    "aggregate.sram.sm": ("aggregateUncBucketSm", "Lifetime uncorrected SRAM errors in the SMs."),
    "aggregate.sram.mcu": ("aggregateUncBucketMcu", "Lifetime uncorrected SRAM errors in MCUs."),
    "aggregate.sram.pcie": ("aggregateUncBucketPcie", "Lifetime uncorrected SRAM errors in PCIe."),
    "aggregate.sram.other": ("aggregateUncBucketOther", "Lifetime uncorrected SRAM errors, rest."),
}
_VGPU_CAPS = {
    "fractional_multiVgpu": ("FRACTIONAL_MULTI_VGPU", "fractional vGPU profiles in multi-vGPU"),
    "heterogeneous_timeSlice_profile": (
        "HETEROGENEOUS_TIMESLICE_PROFILES",
        "time-sliced vGPU profiles of different types at once",
    ),
    "heterogeneous_timeSlice_sizes": (
        "HETEROGENEOUS_TIMESLICE_SIZES",
        "time-sliced vGPU profiles of different memory sizes at once",
    ),
    "homogeneous_placements": ("HOMOGENEOUS_PLACEMENTS", "placements of same-size vGPUs"),
    "mig_timeSlicing": ("MIG_TIMESLICING_SUPPORTED", "time-sliced vGPU on MIG"),
    "mig_timeSlicing_mode": ("MIG_TIMESLICING_ENABLED", "time-sliced vGPU on MIG is on"),
}
_REASON_COUNTERS = {
    "sw_power_cap": ("SW_POWER_CAP", "the software power cap"),
    "sync_boost": ("SYNC_BOOST", "its sync boost group"),
    "sw_thermal_slowdown": ("SW_THERM_SLOWDOWN", "software thermal capping"),
    "hw_thermal_slowdown": ("HW_THERM_SLOWDOWN", "hardware thermal slowdown"),
    "hw_power_brake_slowdown": ("HW_POWER_BRAKE_SLOWDOWN", "an external power brake"),
}
_MODULE_POWER = {
    "module.power.draw.average": ("POWER_AVERAGE", "Average power draw of the whole module."),
    "module.power.draw.instant": ("POWER_INSTANT", "Instant power draw of the whole module."),
    "module.power.limit": ("POWER_REQUESTED_LIMIT", "The module's software power limit."),
    "module.enforced.power.limit": ("POWER_CURRENT_LIMIT", "The module's enforced power limit."),
    "module.power.default_limit": ("POWER_DEFAULT_LIMIT", "The module's default power limit."),
    "module.power.min_limit": ("POWER_MIN_LIMIT", "Lowest module power limit allowed."),
    "module.power.max_limit": ("POWER_MAX_LIMIT", "Highest module power limit allowed."),
}
# power_smoothing.<name> -> (NVML_FI_PWR_SMOOTHING_<id>, unit, help)
_SMOOTHING: dict[str, tuple[str, str | None, str]] = {
    "delayed_power_smoothing_supported": (
        "DELAYED_PWR_SMOOTHING_SUPPORTED",
        None,
        "Whether delayed power smoothing is available: Yes or No.",
    ),
    "primary_power_floor": ("PRIMARY_POWER_FLOOR", "W", "The primary power floor in use."),
    "secondary_power_floor": ("SECONDARY_POWER_FLOOR", "W", "The secondary power floor in use."),
    "min_primary_floor_activation_offset": (
        "MIN_PRIMARY_FLOOR_ACT_OFFSET",
        "W",
        "Smallest primary floor activation offset.",
    ),
    "min_primary_floor_activation_point": (
        "MIN_PRIMARY_FLOOR_ACT_POINT",
        "W",
        "Smallest primary floor activation point.",
    ),
    "window_multiplier": ("WINDOW_MULTIPLIER", "ms", "The power smoothing window multiplier."),
    "curr_profile.secondary_power_floor": (
        "PROFILE_SECONDARY_POWER_FLOOR",
        "W",
        "The active profile's secondary power floor.",
    ),
    "curr_profile.primary_floor_act_window_multiplier": (
        "PROFILE_PRIMARY_FLOOR_ACT_WIN_MULT",
        None,
        "The active profile's primary floor activation window multiplier.",
    ),
    "curr_profile.primary_floor_tar_window_multiplier": (
        "PROFILE_PRIMARY_FLOOR_TAR_WIN_MULT",
        None,
        "The active profile's primary floor target window multiplier.",
    ),
    "curr_profile.primary_floor_act_offset": (
        "PROFILE_PRIMARY_FLOOR_ACT_OFFSET",
        "W",
        "The active profile's primary floor activation offset.",
    ),
    "admin_override.secondary_power_floor": (
        "ADMIN_OVERRIDE_SECONDARY_POWER_FLOOR",
        "W",
        "An administrator's secondary power floor, when set.",
    ),
    "admin_override.primary_floor_act_window_multiplier": (
        "ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_WIN_MULT",
        None,
        "An administrator's primary floor activation window multiplier, when set.",
    ),
    "admin_override.primary_floor_tar_window_multiplier": (
        "ADMIN_OVERRIDE_PRIMARY_FLOOR_TAR_WIN_MULT",
        None,
        "An administrator's primary floor target window multiplier, when set.",
    ),
    "admin_override.primary_floor_act_offset": (
        "ADMIN_OVERRIDE_PRIMARY_FLOOR_ACT_OFFSET",
        "W",
        "An administrator's primary floor activation offset, when set.",
    ),
}
_FABRIC = ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t", "nvmlGpuFabricInfo_v3")
_PLATFORM = ("nvmlDeviceGetPlatformInfo", "c_nvmlPlatformInfo_v2_t", "nvmlPlatformInfo_v2")
_PCI_EXT = ("nvmlDeviceGetPciInfoExt", "nvmlPciInfoExt_v1_t", "nvmlPciInfoExt_v1")
_GOM = {0: "All On", 1: "Compute", 2: "Low Double Precision"}
_RECOVERY = {
    0: "None",
    1: "Reset",
    2: "Reboot",
    3: "Drain P2P",
    4: "Drain and Reset",
    5: "Recover IMEX Domain",
    6: "Bus Reset",
    7: "System Reboot",
}


def _ecc_specs() -> dict[str, Spec]:
    """ecc.errors.{corrected,uncorrected}.{volatile,aggregate}.<where> and .total."""
    out: dict[str, Spec] = {}
    for kind, kind_arg in (("corrected", _CORRECTED), ("uncorrected", _UNCORRECTED)):
        for span, span_arg, since in (
            ("volatile", _VOLATILE, "since the driver loaded"),
            ("aggregate", _AGGREGATE, "over the board's life"),
        ):
            prefix = f"ecc.errors.{kind}.{span}"
            for where, (location, what) in _ECC_LOCATIONS.items():
                out[f"{prefix}.{where}"] = extra(
                    call("nvmlDeviceGetMemoryErrorCounter", kind_arg, span_arg, location),
                    f"{kind.capitalize()} ECC errors in {what}, {since}.",
                )
            out[f"{prefix}.total"] = extra(
                call("nvmlDeviceGetTotalEccErrors", kind_arg, span_arg),
                f"{kind.capitalize()} ECC errors on the whole chip, {since}.",
            )
    # The one ECC counter the dashboard reads anyway.
    out["ecc.errors.uncorrected.volatile.total"] = attr(
        "ecc_errors_uncorrected_volatile",
        "Uncorrected ECC errors on the whole chip, since the driver loaded.",
    )
    for name, (member, help_) in _SRAM_PARTS.items():
        out[f"ecc.errors.uncorrected.{name}"] = extra(
            struct(*_SRAM_STATUS, _SRAM_VERSION, member), help_
        )
    out["ecc.errors.uncorrected.aggregate.sram.thresholdExceeded"] = extra(
        struct(*_SRAM_STATUS, _SRAM_VERSION, "bThresholdExceeded"),
        "Whether SRAM errors passed the threshold that needs attention: Yes or No.",
        _yes_no,
    )
    return out


def _reason_specs() -> dict[str, Spec]:
    """clocks_event_reasons.* (the dashboard reads the mask) and the counters behind them."""
    out = {
        "clocks_event_reasons.supported": extra(
            call("nvmlDeviceGetSupportedClocksEventReasons"),
            "Bitmask of the clock event reasons this GPU can report (see nvml.h).",
            _hex(16),
        ),
        "clocks_event_reasons.active": attr(
            "throttle_reasons",
            "Bitmask of the clock event reasons holding the clocks down now (see nvml.h).",
            show=lambda r: f"0x{reasons_mask(r):016X}",
        ),
    }
    for name in THROTTLE_REASON_BITS:
        if name == "display_clock_setting":  # in the mask, but nvidia-smi has no field for it
            continue
        out[f"clocks_event_reasons.{name}"] = attr(
            "throttle_reasons",
            f"Active or Not Active: {name.replace('_', ' ')} holds the clocks down.",
            show=_reason(name),
        )
    for name, (fid, what) in _REASON_COUNTERS.items():
        out[f"clocks_event_reasons_counters.{name}"] = extra(
            field_value(f"NVML_FI_DEV_CLOCKS_EVENT_REASON_{fid}"),
            f"Microseconds the clocks have been held down by {what}.",
            unit="us",
        )
    return out


def _power_specs() -> dict[str, Spec]:
    """power.*, module.power.* and power_smoothing.*."""
    mw = "NVML_FI_DEV_"
    out = {
        "power.management": extra(
            call("nvmlDeviceGetPowerManagementMode"),
            "Whether the driver manages this board's power: Enabled or Disabled.",
            _enabled,
        ),
        "power.draw": attr(
            "power_draw_mw",
            "Board power draw (a 1 s average on Ampere and newer, else instant).",
            show=_watts_from_mw,
            unit="W",
        ),
        "power.draw.average": extra(
            field_value(mw + "POWER_AVERAGE"),
            "Board power draw averaged over the last second.",
            _watts_from_mw,
            unit="W",
        ),
        "power.draw.instant": extra(
            field_value(mw + "POWER_INSTANT"),
            "Board power draw right now.",
            _watts_from_mw,
            unit="W",
        ),
        "power.limit": extra(
            call("nvmlDeviceGetPowerManagementLimit"),
            "The power limit software asked for (nvidia-smi -pl).",
            _watts_from_mw,
            unit="W",
        ),
        "enforced.power.limit": attr(
            "power_limit_mw",
            "The power limit in force: the lowest of every limiter.",
            show=_watts_from_mw,
            unit="W",
        ),
        "power.default_limit": extra(
            call("nvmlDeviceGetPowerManagementDefaultLimit"),
            "The power limit the board returns to when the driver reloads.",
            _watts_from_mw,
            unit="W",
        ),
        "power.min_limit": extra(
            call("nvmlDeviceGetPowerManagementLimitConstraints", part=0),
            "The lowest power limit that can be set.",
            _watts_from_mw,
            unit="W",
        ),
        "power.max_limit": extra(
            call("nvmlDeviceGetPowerManagementLimitConstraints", part=1),
            "The highest power limit that can be set.",
            _watts_from_mw,
            unit="W",
        ),
    }
    for name, (fid, help_) in _MODULE_POWER.items():
        out[name] = extra(
            field_value(mw + fid, "NVML_POWER_SCOPE_MODULE"), help_, _watts_from_mw, unit="W"
        )
    for name, (fid, unit, help_) in _SMOOTHING.items():
        show = _yes_no if unit is None and name.startswith("delayed") else _same
        out[f"power_smoothing.{name}"] = extra(
            field_value(f"NVML_FI_PWR_SMOOTHING_{fid}"),
            help_,
            _watts if unit == "W" else show,
            unit=unit,
        )
    return out


def _clock_specs() -> dict[str, Spec]:
    """clocks.current.*, clocks.applications.*, clocks.default_applications.*, clocks.max.*."""
    out: dict[str, Spec] = {}
    for part, clock, attr_name in (
        ("graphics", "NVML_CLOCK_GRAPHICS", "clock_graphics"),
        ("sm", "NVML_CLOCK_SM", "clock_sm"),
        ("memory", "NVML_CLOCK_MEM", "clock_memory"),
    ):
        what = {"graphics": "graphics (shader)", "sm": "SM", "memory": "memory"}[part]
        out[f"clocks.current.{part}"] = attr(
            f"{attr_name}_mhz", f"The {what} clock now.", unit="MHz"
        )
        out[f"clocks.max.{part}"] = attr(
            f"{attr_name}_max_mhz", f"The highest {what} clock the GPU is built for.", unit="MHz"
        )
        if part == "sm":
            continue
        out[f"clocks.applications.{part}"] = extra(
            call("nvmlDeviceGetApplicationsClock", clock),
            f"The {what} clock set for applications (nvidia-smi -ac).",
            unit="MHz",
        )
        out[f"clocks.default_applications.{part}"] = extra(
            call("nvmlDeviceGetDefaultApplicationsClock", clock),
            f"The default {what} clock for applications.",
            unit="MHz",
        )
    out["clocks.current.video"] = extra(
        call("nvmlDeviceGetClockInfo", "NVML_CLOCK_VIDEO"),
        "The video encoder/decoder clock now.",
        unit="MHz",
    )
    return out


def _memory_specs() -> dict[str, Spec]:
    """memory.*, protected_memory.*, retired_pages.*, remapped_rows.*."""
    out = {
        "memory.total": attr("memory_total_bytes", "Installed GPU memory.", show=_mib, unit="MiB"),
        "memory.reserved": attr(
            "memory_reserved_bytes",
            "Memory the driver and firmware keep for themselves.",
            show=_mib,
            unit="MiB",
        ),
        "memory.used": attr(
            "memory_used_bytes", "Memory held by running contexts.", show=_mib, unit="MiB"
        ),
        "memory.free": attr("memory_free_bytes", "Memory not in use.", show=_mib, unit="MiB"),
    }
    for part in ("total", "used", "free"):
        out[f"protected_memory.{part}"] = extra(
            call("nvmlDeviceGetConfComputeProtectedMemoryUsage", part=part),
            f"Confidential-computing protected memory: {part}.",
            _mib,
            unit="MiB",
        )
    retired = "nvmlDeviceGetRetiredPages"
    out["retired_pages.single_bit_ecc.count"] = extra(
        call(retired, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", count=True),
        "Memory pages retired after repeated single-bit ECC errors.",
    )
    out["retired_pages.double_bit.count"] = extra(
        call(retired, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", count=True),
        "Memory pages retired after a double-bit ECC error.",
    )
    out["retired_pages.pending"] = extra(
        call("nvmlDeviceGetRetiredPagesPendingStatus"),
        "Whether pages wait to be retired at the next reboot: Yes or No.",
        _yes_no,
    )
    rows = "nvmlDeviceGetRemappedRows"
    v2 = ("nvmlDeviceGetRemappedRows_v2", "c_nvmlRemappedRowsInfo_v2_t", None)
    for name, probe, show, help_ in (
        ("correctable", call(rows, part=0), _same, "Rows remapped after correctable errors."),
        ("correctable_inactive", struct(*v2, "corrInactiveRemaps"), _same,
         "Rows remapped after correctable errors, not yet in use."),
        ("uncorrectable", call(rows, part=1), _same, "Rows remapped after uncorrectable errors."),
        ("uncorrectable_inactive", struct(*v2, "uncInactiveRemaps"), _same,
         "Rows remapped after uncorrectable errors, not yet in use."),
        ("pending", call(rows, part=2), _yes_no, "Whether a remap waits for a GPU reset."),
        ("failure", call(rows, part=3), _yes_no, "Whether a remap has ever failed."),
    ):  # fmt: skip
        out[f"remapped_rows.{name}"] = extra(probe, help_, show)
    for level in ("max", "high", "partial", "low", "none"):
        out[f"remapped_rows.histogram.{level}"] = extra(
            call("nvmlDeviceGetRowRemapperHistogram", part=level),
            f"Memory banks whose remap availability is {level}.",
        )
    return out


def _identity_specs() -> dict[str, Spec]:
    """The box, the GPU's names and its PCI identity."""
    pci = "nvmlDeviceGetPciInfo"
    return {
        "timestamp": system(
            lambda s, g: timestamp_text(s.taken_at_wall),
            'When the query ran, as "YYYY/MM/DD HH:MM:SS.msec" (local time).',
        ),
        "driver_version": system(
            lambda s, g: s.system.driver_version, "The installed NVIDIA driver's version."
        ),
        "vgpu_driver_capability.heterogenous_multivGPU": extra(
            Probe(
                call="nvmlGetVgpuDriverCapabilities",
                args=("NVML_VGPU_DRIVER_CAP_HETEROGENEOUS_MULTI_VGPU",),
                device=False,
            ),
            "Whether the driver runs vGPUs of different types on one GPU: Yes or No.",
            _yes_no,
        ),
        "count": system(lambda s, g: len(s.gpus), "How many NVIDIA GPUs the box has."),
        "name": system(lambda s, g: g.name, "The GPU's product name."),
        "serial": attr("serial", "The serial number printed on the board."),
        "uuid": system(lambda s, g: g.uuid, "The GPU's unique, unchanging identifier."),
        "pci.bus_id": system(
            lambda s, g: g.pci_bus_id, 'PCI address as "domain:bus:device.function" (hex).'
        ),
        "pci.domain": extra(call(pci, part="domain"), "PCI domain (hex).", _hex(4)),
        "pci.bus": extra(call(pci, part="bus"), "PCI bus (hex).", _hex(2)),
        "pci.device": extra(call(pci, part="device"), "PCI device (hex).", _hex(2)),
        "pci.baseClass": extra(
            struct(*_PCI_EXT, "baseClass"), "PCI base class code (hex).", _hex(1)
        ),
        "pci.subClass": extra(struct(*_PCI_EXT, "subClass"), "PCI sub class code (hex).", _hex(1)),
        "pci.device_id": extra(
            call(pci, part="pciDeviceId"), "PCI device and vendor id (hex).", _hex(8)
        ),
        "pci.sub_device_id": extra(
            call(pci, part="pciSubSystemId"), "PCI subsystem id (hex).", _hex(8)
        ),
        "index": system(lambda s, g: g.index, "The GPU's NVML index (may change across boots)."),
        "hostname": extra(
            call("nvmlDeviceGetHostname_v1"), "The hostname stored with the GPU (--set-hostname)."
        ),
    }


def _pcie_specs() -> dict[str, Spec]:
    return {
        "pcie.link.gen.current": attr(
            "pcie_gen", "PCIe generation of the link now (drops when idle); older name."
        ),
        "pcie.link.gen.gpucurrent": attr(
            "pcie_gen", "PCIe generation of the link now (drops when idle)."
        ),
        "pcie.link.gen.max": attr(
            "pcie_gen_max", "Highest PCIe generation this GPU and this slot together allow."
        ),
        "pcie.link.gen.gpumax": extra(
            call("nvmlDeviceGetGpuMaxPcieLinkGeneration"),
            "Highest PCIe generation the GPU itself supports.",
        ),
        "pcie.link.gen.hostmax": absent(
            "Highest PCIe generation of the slot's root port (gputop has no NVML reading)."
        ),
        "pcie.link.width.current": attr("pcie_width", "PCIe lanes in use now (drops when idle)."),
        "pcie.link.width.max": attr(
            "pcie_width_max", "Most PCIe lanes this GPU and this slot together allow."
        ),
    }


def _mode_specs() -> dict[str, Spec]:
    """Display, persistence, accounting, driver model, GOM, ECC, MIG, GSP, C2C, DRAM encryption."""
    dram = "nvmlDeviceGetDramEncryptionMode"
    return {
        "display_mode": _display_mode(),
        "display_attached": extra(
            call("nvmlDeviceGetDisplayMode"),
            "Whether a monitor is plugged into the GPU: Yes or No.",
            _yes_no,
        ),
        "display_active": extra(
            call("nvmlDeviceGetDisplayActive"),
            "Whether a display is set up on the GPU, monitor or not: Enabled or Disabled.",
            _enabled,
        ),
        "persistence_mode": attr(
            "persistence_mode",
            "Whether the driver stays loaded with no clients: Enabled or Disabled (Linux).",
            show=_enabled,
        ),
        "addressing_mode": extra(
            call("nvmlDeviceGetAddressingMode"),
            "How the GPU reaches host memory: HMM, ATS or None (Linux).",
            _named({0: "None", 1: "HMM", 2: "ATS"}),
        ),
        "accounting.mode": extra(
            call("nvmlDeviceGetAccountingMode"),
            "Whether per-process accounting is on: Enabled or Disabled.",
            _enabled,
        ),
        "accounting.buffer_size": extra(
            call("nvmlDeviceGetAccountingBufferSize"),
            "How many processes the accounting buffer remembers.",
        ),
        "driver_model.current": extra(
            call("nvmlDeviceGetDriverModel", part=0),
            "Windows driver model in use (WDDM, TCC or MCDM); N/A on Linux.",
            _named({0: "WDDM", 1: "TCC", 2: "MCDM"}),
        ),
        "driver_model.pending": extra(
            call("nvmlDeviceGetDriverModel", part=1),
            "Windows driver model after the next reboot; N/A on Linux.",
            _named({0: "WDDM", 1: "TCC", 2: "MCDM"}),
        ),
        "compute_mode": attr(
            "compute_mode", "Default, Exclusive_Thread, Prohibited or Exclusive_Process."
        ),
        "compute_cap": attr(
            "compute_capability", "CUDA compute capability, major.minor.", show=_compute_cap
        ),
        "gom.current": extra(
            call("nvmlDeviceGetGpuOperationMode", part=0),
            "GPU operation mode now: All On, Compute or Low Double Precision.",
            _named(_GOM),
        ),
        "gom.pending": extra(
            call("nvmlDeviceGetGpuOperationMode", part=1),
            "GPU operation mode after the next reboot.",
            _named(_GOM),
        ),
        "dramEncryption.mode.current": extra(
            call(dram, part=0), "Whether DRAM encryption is on now.", _enabled
        ),
        "dramEncryption.mode.pending": extra(
            call(dram, part=1), "Whether DRAM encryption is on after the next reboot.", _enabled
        ),
        "ecc.mode.current": extra(
            call("nvmlDeviceGetEccMode", part=0), "Whether ECC is on now.", _enabled
        ),
        "ecc.mode.pending": extra(
            call("nvmlDeviceGetEccMode", part=1),
            "Whether ECC is on after the next reboot.",
            _enabled,
        ),
        "mig.mode.current": attr("mig_mode", "Whether MIG is on now.", show=_enabled),
        "mig.mode.pending": extra(
            call("nvmlDeviceGetMigMode", part=1),
            "Whether MIG is on after the next reset.",
            _enabled,
        ),
        "gsp.mode.current": extra(
            call("nvmlDeviceGetGspFirmwareMode", part=0),
            "Whether the GPU runs GSP firmware now.",
            _enabled,
        ),
        "gsp.mode.default": extra(
            call("nvmlDeviceGetGspFirmwareMode", part=1),
            "Whether GSP firmware is on by default.",
            _enabled,
        ),
        "c2c.mode": extra(
            call("nvmlDeviceGetC2cModeInfoV", part="isC2cEnabled"),
            "Whether the chip-to-chip (C2C) link is on, where there is one.",
            _enabled,
        ),
    }


def driver_major(snapshot: Snapshot) -> int | None:
    """The driver's major version (``580`` of ``580.173.02``), or None when unknown."""
    major = (snapshot.system.driver_version or "").split(".", 1)[0]
    return int(major) if major.isdigit() else None


DISPLAY_MODE_DEPRECATED_SINCE = 580  # nvidia-smi's display_mode answers this text from 580 on
DEPRECATED = "[Requested functionality has been deprecated]"


def _display_mode() -> Spec:
    """Before driver 580, display_attached's reading as Enabled/Disabled; deprecated since."""
    probe = call("nvmlDeviceGetDisplayMode")
    attached = extra(probe, "")

    def read(s: Snapshot, g: GpuSample) -> Value:
        major = driver_major(s)
        if major is not None and major >= DISPLAY_MODE_DEPRECATED_SINCE:
            return DEPRECATED
        value = attached.read(s, g)
        return None if value is None else _enabled(value)

    return Spec(
        help="Whether a monitor is plugged into the GPU: Enabled or Disabled; deprecated by "
        "NVIDIA from driver 580 on (use display_attached).",
        read=read,
        reading=probe.key,
        probe=probe,
    )


# Fields nvidia-smi had before driver 580, which names gpu_recovery_action instead: accepted so
# that scripts written for those drivers keep working, but not in the 580 list nor in its help.
# Each is read from the recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION): Yes or No.
_RESET_NEEDED = frozenset({1, 2, 6, 7})  # GPU reset, node reboot, bus reset, system reboot
_DRAIN_AND_RESET = frozenset({4})


def _recovery_says(actions: frozenset[int]) -> Show:
    return lambda value: "Yes" if int(value) in actions else "No"


def _legacy_specs() -> dict[str, Spec]:
    recovery = field_value("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION")
    return {
        "reset_status.reset_required": extra(
            recovery,
            "Whether the GPU needs a reset (or a reboot) to recover: Yes or No.",
            _recovery_says(_RESET_NEEDED),
        ),
        "reset_status.drain_and_reset_recommended": extra(
            recovery,
            "Whether the driver recommends draining the GPU's work and resetting it: Yes or No.",
            _recovery_says(_DRAIN_AND_RESET),
        ),
    }


def _board_specs() -> dict[str, Spec]:
    """VBIOS, inforom, recovery action, vGPU capabilities."""
    inforom = "nvmlDeviceGetInforomVersion"
    out = {
        "vbios_version": extra(call("nvmlDeviceGetVbiosVersion"), "The board's VBIOS version."),
        "inforom.img": extra(
            call("nvmlDeviceGetInforomImageVersion"), "Version of the whole infoROM image."
        ),
        "inforom.oem": extra(
            call(inforom, "NVML_INFOROM_OEM"), "infoROM version of the OEM settings."
        ),
        "inforom.ecc": extra(
            call(inforom, "NVML_INFOROM_ECC"), "infoROM version of the ECC records."
        ),
        "inforom.pwr": extra(
            call(inforom, "NVML_INFOROM_POWER"), "infoROM version of the power settings."
        ),
        "inforom.checksum_validation": extra(
            call("nvmlDeviceValidateInforom"),
            'Whether the infoROM checksum is right ("valid").',
            lambda v: "valid",
        ),
        "gpu_recovery_action": extra(
            field_value("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"),
            "What the driver says it takes to recover the GPU: None, Reset, Reboot, ...",
            _named(_RECOVERY),
        ),
    }
    for name, (cap, what) in _VGPU_CAPS.items():
        out[f"vgpu_device_capability.{name}"] = extra(
            call("nvmlDeviceGetVgpuCapabilities", f"NVML_DEVICE_VGPU_CAP_{cap}"),
            f"vGPU: whether the GPU supports {what}: Yes or No.",
            _yes_no,
        )
    return out


def _load_specs() -> dict[str, Spec]:
    """Temperatures, fan, P-state, utilisation, encoder statistics."""
    return {
        "fan.speed": attr(
            "fan_speeds_percent",
            "The first fan's target speed, in percent of its maximum.",
            show=_first_fan,
            unit="%",
        ),
        "pstate": attr(
            "performance_state",
            "Performance state, P0 (fastest) to P12 (slowest).",
            show=lambda p: f"P{p}",
        ),
        "temperature.gpu": attr("temperature_c", "GPU core temperature, degrees C."),
        "temperature.gpu.tlimit": extra(
            call("nvmlDeviceGetMarginTemperature"),
            "Degrees C below the temperature where the GPU slows down (T.Limit).",
        ),
        "temperature.memory": attr(
            "temperature_memory_c",
            "HBM temperature, degrees C (N/A on boards without the sensor).",
            missing=PLAIN_NA,
        ),
        "utilization.gpu": attr(
            "utilization_gpu_percent", "Percent of the last sample period a kernel ran.", unit="%"
        ),
        "utilization.memory": attr(
            "utilization_memory_percent",
            "Percent of the last sample period device memory was read or written.",
            unit="%",
        ),
        "utilization.encoder": attr(
            "encoder_percent", "Percent of the last sample period the encoder was busy.", unit="%"
        ),
        "utilization.decoder": attr(
            "decoder_percent", "Percent of the last sample period the decoder was busy.", unit="%"
        ),
        "utilization.jpeg": extra(
            call("nvmlDeviceGetJpgUtilization", part=0),
            "Percent of the last sample period the JPEG engine was busy.",
            unit="%",
        ),
        "utilization.ofa": extra(
            call("nvmlDeviceGetOfaUtilization", part=0),
            "Percent of the last sample period the optical flow engine was busy.",
            unit="%",
        ),
        "encoder.stats.sessionCount": extra(
            call("nvmlDeviceGetEncoderStats", part=0), "Encoder sessions running now."
        ),
        "encoder.stats.averageFps": extra(
            call("nvmlDeviceGetEncoderStats", part=1), "Average frames a second of those sessions."
        ),
        "encoder.stats.averageLatency": extra(
            call("nvmlDeviceGetEncoderStats", part=2), "Average latency of those sessions, in us."
        ),
    }


def _fabric_specs() -> dict[str, Spec]:
    """NVLink fabric registration and the platform (chassis, slot, tray) it places the GPU in."""
    state = _named({0: PLAIN_NA, 1: "Not Started", 2: "In Progress", 3: "Completed"})
    out = {
        "fabric.state": extra(
            struct(*_FABRIC, "state"),
            "Where the GPU is in registering with the NVLink fabric.",
            state,
            missing=PLAIN_NA,
        ),
        "fabric.status": extra(
            struct(*_FABRIC, "status"),
            "The registration's outcome, once it is Completed.",
            _named({0: "Success"}),
            missing=PLAIN_NA,
        ),
        "fabric.cliqueId": extra(
            struct(*_FABRIC, "cliqueId"), "The fabric clique the GPU is in.", missing=PLAIN_NA
        ),
        "fabric.clusterUuid": extra(
            struct(*_FABRIC, "clusterUuid"),
            "UUID of the fabric cluster the GPU is in.",
            _uuid,
            missing=PLAIN_NA,
        ),
    }
    for name, what in (
        ("summary", "overall"),
        ("bandwidth", "degraded bandwidth"),
        ("route_recovery_in_progress", "route recovery in progress"),
        ("route_unhealthy", "unhealthy route"),
        ("access_timeout_recovery", "access timeout recovery"),
        ("incorrect_configuration", "incorrect configuration"),
        ("partition_assigned", "partition assigned"),
    ):
        out[f"fabric.health.{name}"] = absent(
            f"Fabric health: {what} (gputop does not decode it yet).", missing=PLAIN_NA
        )
    for name, member, show, help_ in (
        ("chassis_serial_number", "chassisSerialNumber", _same, "Serial of the GPU's chassis."),
        ("slot_number", "slotNumber", _same, "Chassis slot of the GPU's tray, switches counted."),
        ("tray_index", "trayIndex", _same, "Index of the GPU's compute tray in the chassis."),
        ("host_id", "hostId", _same, "Index of the GPU's node within its slot."),
        ("peer_type", "peerType", _named({0: "Direct Connected", 1: "Switch Connected"}),
         "How the GPU's NVLink peers are reached: directly or through a switch."),
        ("module_id", "moduleId", _same, "The GPU's number within its node."),
        ("gpu_fabric_guid", "ibGuid", _guid, "The GPU's fabric GUID."),
    ):  # fmt: skip
        out[f"platform.{name}"] = extra(struct(*_PLATFORM, member), help_, show)
    return out


def timestamp_text(wall_s: float) -> str:
    """Local time as nvidia-smi prints it: ``2024/01/31 12:34:56.789``."""
    whole = int(wall_s)
    millis = round((wall_s - whole) * 1000)
    if millis == 1000:
        whole, millis = whole + 1, 0
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(whole)) + f".{millis:03d}"


SPECS: dict[str, Spec] = {
    **_identity_specs(),
    **_pcie_specs(),
    **_mode_specs(),
    **_board_specs(),
    **_load_specs(),
    **_reason_specs(),
    **_memory_specs(),
    **_ecc_specs(),
    **_power_specs(),
    **_clock_specs(),
    **_fabric_specs(),
}
LEGACY_SPECS: dict[str, Spec] = _legacy_specs()
