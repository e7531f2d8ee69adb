"""THE table of DCGM field names gputop exports and reads: legacy and DCGM 4.7 names, units, types.

A leaf module (imports nothing from gputop): `gputop export` writes these names, `gputop fleet`
reads them back, under either name, in the legacy units (:func:`legacy_value`).

Sources, checked for every row:

* Prometheus type and HELP: NVIDIA/dcgm-exporter ``etc/default-counters.csv`` (rows gputop
  exports that the file leaves commented out keep the type written there; rows it does not have at
  all are gauges).
* DCGM 4.7 names: NVIDIA/DCGM ``dcgmlib/dcgm_fields.h`` (its "Deprecated: renamed per DCGM Field
  Naming Standard" block, ``#define OLD NEW``), NVIDIA/go-dcgm ``pkg/dcgm/dcgm_fields.h`` (the
  base-unit fields 1600-1612, each replacing a legacy field that has a non-base unit, e.g.
  ``DCGM_FI_DEV_SM_CLOCK_HERTZ`` for ``DCGM_FI_DEV_SM_CLOCK``), and the dcgm-exporter 4.9.0 release
  notes (``DCGM_FI_DEV_FB_CAPACITY_BYTES``; clocks to hertz, energy to joules, utilization to a
  0-1 ratio, GPU memory to bytes).
* ``new`` is None where DCGM 4.7 keeps the legacy name, or where no NVIDIA source we could read
  names the new field: never a guessed name. The framebuffer byte fields (``..._FB_USED_BYTES``
  and its siblings), the copy/encoder/decoder utilization ratios (``DCGM_FI_DEV_MEMORY_UTIL_RATIO``
  ...) and the NVLink bytes-per-second total appear only in third-party summaries of NVIDIA's
  field-identifier page, so they are left out until confirmed.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Type(StrEnum):
    """Prometheus metric type, as dcgm-exporter's CSV gives it."""

    GAUGE = "gauge"
    COUNTER = "counter"


@dataclass(frozen=True, slots=True)
class Field:
    """One DCGM field: ``new_value = legacy_value * scale`` (scale 1: same unit)."""

    legacy: str
    new: str | None
    type: Type
    unit: str  # of the legacy name's value
    new_unit: str | None  # of the new name's value (None: no new name)
    scale: float
    help: str  # the legacy name's HELP (dcgm-exporter's where it ships the field)
    new_help: str | None = None  # the new name's HELP (None: no new name)

    @property
    def names(self) -> tuple[str, ...]:
        """Every name this field is exported under somewhere: legacy first."""
        return (self.legacy,) if self.new is None else (self.legacy, self.new)

    def to_new(self, value: float) -> float:
        """A legacy-unit value in the new name's unit."""
        return value * self.scale

    def to_legacy(self, value: float) -> float:
        """A new-name value in the legacy unit."""
        return value / self.scale


# Conversions (legacy -> new)
MHZ_TO_HZ: Final = 1e6
MJ_TO_J: Final = 1e-3
PERCENT_TO_RATIO: Final = 1e-2
MIB_TO_BYTES: Final = float(1 << 20)

_G, _C = Type.GAUGE, Type.COUNTER

FIELDS: tuple[Field, ...] = (
    # Clocks: go-dcgm dcgm_fields.h 1603/1604 "in hertz"
    Field("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_SM_CLOCK_HERTZ", _G, "MHz", "Hz", MHZ_TO_HZ,
          "SM clock frequency (in MHz).", "SM clock frequency (in Hz)."),
    Field("DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", _G, "MHz", "Hz", MHZ_TO_HZ,
          "Memory clock frequency (in MHz).", "Memory clock frequency (in Hz)."),
    # Temperatures and power: renamed aliases (dcgm_fields.h, same field id, same unit)
    Field("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_GPU_TEMP_CELSIUS", _G, "C", "C", 1.0,
          "GPU temperature (in C).", "GPU temperature (in C)."),
    Field("DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", _G, "C", "C", 1.0,
          "Memory temperature (in C).", "Memory temperature (in C)."),
    Field("DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_BOARD_POWER_WATTS", _G, "W", "W", 1.0,
          "Power draw (in W).", "Power draw (in W)."),
    Field("DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_BOARD_POWER_LIMIT_REQUESTED_WATTS", _G,
          "W", "W", 1.0,
          "Power management limit (in W).", "Power management limit (in W)."),
    # go-dcgm 1611: "Total GPU energy consumption in joules since the driver was last reloaded"
    Field("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL", _C,
          "mJ", "J", MJ_TO_J,
          "Total energy consumption since boot (in mJ).",
          "Total energy consumption since boot (in J)."),
    # Utilization: GPU_UTIL_RATIO is dcgm_fields.h's new name; its unit is the 0-1 ratio
    # (dcgm-exporter 4.9.0: "utilization from a percentage to a 0 to 1 ratio").
    Field("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_GPU_UTIL_RATIO", _G, "%", "ratio",
          PERCENT_TO_RATIO, "GPU utilization (in %).", "GPU utilization (ratio, 0.0 to 1.0)."),
    # New names not confirmed from an NVIDIA source (see the module docstring)
    Field("DCGM_FI_DEV_MEM_COPY_UTIL", None, _G, "%", None, 1.0, "Memory utilization (in %)."),
    Field("DCGM_FI_DEV_ENC_UTIL", None, _G, "%", None, 1.0, "Encoder utilization (in %)."),
    Field("DCGM_FI_DEV_DEC_UTIL", None, _G, "%", None, 1.0, "Decoder utilization (in %)."),
    # go-dcgm 1612: "as a ratio of maximum noise-tolerance fan speed (0.0-1.0+)"
    Field("DCGM_FI_DEV_FAN_SPEED", "DCGM_FI_DEV_FAN_SPEED_RATIO", _G, "%", "ratio",
          PERCENT_TO_RATIO, "Fan speed (in %).", "Fan speed (ratio of the maximum, 0.0 to 1.0+)."),
    Field("DCGM_FI_DEV_FB_FREE", None, _G, "MiB", None, 1.0, "Framebuffer memory free (in MiB)."),
    Field("DCGM_FI_DEV_FB_USED", None, _G, "MiB", None, 1.0, "Framebuffer memory used (in MiB)."),
    Field("DCGM_FI_DEV_FB_RESERVED", None, _G, "MiB", None, 1.0,
          "Framebuffer memory reserved (in MiB)."),
    # dcgm-exporter 4.9.0: "Collect DCGM_FI_DEV_FB_CAPACITY_BYTES (total GPU memory in bytes)"
    Field("DCGM_FI_DEV_FB_TOTAL", "DCGM_FI_DEV_FB_CAPACITY_BYTES", _G, "MiB", "bytes",
          MIB_TO_BYTES, "Framebuffer memory total (in MiB).",
          "Framebuffer memory total (in bytes)."),
    # Not renamed in DCGM 4.7: rates in bytes per second already
    Field("DCGM_FI_PROF_PCIE_TX_BYTES", None, _G, "B/s", None, 1.0,
          "The rate of data transmitted over the PCIe bus (in bytes per second)."),
    Field("DCGM_FI_PROF_PCIE_RX_BYTES", None, _G, "B/s", None, 1.0,
          "The rate of data received over the PCIe bus (in bytes per second)."),
    Field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "DCGM_FI_DEV_PCIE_REPLAY_TOTAL", _C, "1", "1", 1.0,
          "Total number of PCIe retries.", "Total number of PCIe retries."),
    Field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", None, _C, "1", None, 1.0,
          "Total number of double-bit volatile ECC errors."),
    Field("DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", _G, "Xid", "Xid", 1.0,
          "Value of the last XID error encountered.", "Value of the last XID error encountered."),
    # dcgm documents its NVLink total as a throughput (a rate); gputop's reading is NVML's
    # cumulative per-link data counters in KiB, summed, exported as the counter the CSV types it:
    # rate() of it is the throughput. Its DCGM 4.7 name, a rate, cannot carry a cumulative value.
    Field("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", None, _C, "KiB", None, 1.0,
          "Total number of NVLink bandwidth counters for all lanes (gputop: KiB sent and "
          "received over the active links since the driver loaded; rate() gives KiB/s)."),
    Field("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL",
          _C, "1", "1", 1.0, "Number of remapped rows for uncorrectable errors",
          "Number of remapped rows for uncorrectable errors"),
    Field("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL",
          _C, "1", "1", 1.0, "Number of remapped rows for correctable errors",
          "Number of remapped rows for correctable errors"),
    Field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_DEV_ROW_REMAP_FAILED", _G, "bool", "bool",
          1.0, "Whether remapping of rows has failed", "Whether remapping of rows has failed"),
    # Profiling: ratios under both names (dcgm_fields.h renamed aliases)
    Field("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", _G, "ratio",
          "ratio", 1.0, "Ratio of time the graphics engine is active.",
          "Ratio of time the graphics engine is active."),
    Field("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_TENSOR_UTIL_RATIO", _G, "ratio",
          "ratio", 1.0, "Ratio of cycles the tensor (HMMA) pipe is active.",
          "Ratio of cycles the tensor (HMMA) pipe is active."),
    Field("DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_DRAM_UTIL_RATIO", _G, "ratio", "ratio", 1.0,
          "Ratio of cycles the device memory interface is active sending or receiving data.",
          "Ratio of cycles the device memory interface is active sending or receiving data."),
)  # fmt: skip

BY_LEGACY: dict[str, Field] = {f.legacy: f for f in FIELDS}
BY_NEW: dict[str, Field] = {f.new: f for f in FIELDS if f.new is not None}

# Labels. dcgm-exporter 4.6.0-4.8.3 and later name the host label "hostname" (#655); earlier
# releases "Hostname". 4.9.0 renames the driver label to DCGM 4.7's field name.
HOST_LABEL: Final = "hostname"
HOST_LABEL_OLD: Final = "Hostname"
HOST_LABELS: Final = (HOST_LABEL, HOST_LABEL_OLD)
DRIVER_LABEL: Final = "DCGM_FI_DRIVER_VERSION"
DRIVER_LABEL_NEW: Final = "DCGM_FI_SYSTEM_DRIVER_VERSION"
MIG_PROFILE_LABEL: Final = "GPU_I_PROFILE"
MIG_INSTANCE_LABEL: Final = "GPU_I_ID"


def field(name: str) -> Field | None:
    """The field exported under ``name`` (legacy or DCGM 4.7), None for another name."""
    return BY_LEGACY.get(name) or BY_NEW.get(name)


def names(legacy: str) -> tuple[str, ...]:
    """Every name of the field whose legacy name is ``legacy`` (legacy first); KeyError if none."""
    return BY_LEGACY[legacy].names


def legacy_value(name: str, value: float) -> float:
    """``value`` read under ``name`` (either name), in the legacy name's unit."""
    f = field(name)
    if f is None or name == f.legacy:
        return value
    return f.to_legacy(value)


# Xid labels of DCGM_FI_DEV_XID_ERRORS, as dcgm-exporter gives them (its
# internal/pkg/collector/gpu_collector.go: err_code is the Xid, err_msg the text below, or
# "Unknown Error" past its end). The texts are copied from NVIDIA/dcgm-exporter
# internal/pkg/collector/xid_errors.go (Apache-2.0), itself based on NVIDIA's Xid catalogue
# (https://docs.nvidia.com/deploy/xid-errors/).
XID_CODE_LABEL: Final = "err_code"
XID_MESSAGE_LABEL: Final = "err_msg"
XID_UNKNOWN: Final = "Unknown Error"


def xid_message(code: int) -> str:
    """dcgm-exporter's err_msg for the Xid ``code``."""
    return XID_MESSAGES[code] if 0 <= code < len(XID_MESSAGES) else XID_UNKNOWN


XID_MESSAGES: tuple[str, ...] = (
    "No Error",  # 0
    "Invalid or corrupted push buffer stream",  # 1
    "Invalid or corrupted push buffer stream",  # 2
    "Invalid or corrupted push buffer stream",  # 3
    "Invalid or corrupted push buffer stream",  # 4
    "Unused",  # 5
    "Invalid or corrupted push buffer stream",  # 6
    "Invalid or corrupted push buffer address",  # 7
    "GPU stopped processing",  # 8
    "Driver error programming GPU",  # 9
    "Unused",  # 10
    "Invalid or corrupted push buffer stream",  # 11
    "Driver error handling GPU exception",  # 12
    "Graphics Engine Exception",  # 13
    "Unused",  # 14
    "Unused",  # 15
    "Display engine hung",  # 16
    "Unused",  # 17
    "Bus mastering disabled in PCI Config Space",  # 18
    "Display Engine error",  # 19
    "Invalid or corrupted Mpeg push buffer",  # 20
    "Invalid or corrupted Motion Estimation push buffer",  # 21
    "Invalid or corrupted Video Processor push buffer",  # 22
    "Unused",  # 23
    "GPU semaphore timeout",  # 24
    "Invalid or illegal push buffer stream",  # 25
    "Framebuffer timeout",  # 26
    "Video processor exception",  # 27
    "Video processor exception",  # 28
    "Video processor exception",  # 29
    "GPU semaphore access error",  # 30
    "GPU memory page fault",  # 31
    "Invalid or corrupted push buffer stream",  # 32
    "Internal micro-controller error",  # 33
    "Video processor exception",  # 34
    "Video processor exception",  # 35
    "Video processor exception",  # 36
    "Driver firmware error",  # 37
    "Driver firmware error",  # 38
    "Unused",  # 39
    "Unused",  # 40
    "Unused",  # 41
    "Video processor exception",  # 42
    "GPU stopped processing",  # 43
    "Graphics Engine fault during context switch",  # 44
    # 45
    "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda",
    "GPU stopped processing",  # 46
    "Video processor exception",  # 47
    "Double Bit ECC Error",  # 48
    "Unused",  # 49
    "Unused",  # 50
    "Unused",  # 51
    "Unused",  # 52
    "Unused",  # 53
    "Auxiliary power is not connected to the GPU board",  # 54
    "Unused",  # 55
    "Display Engine error",  # 56
    "Error programming video memory interface",  # 57
    "Unstable video memory interface detected",  # 58
    "Internal micro-controller error",  # 59
    "Video processor exception",  # 60
    "Internal micro-controller breakpoint/warning",  # 61
    "Internal micro-controller halt",  # 62
    "ECC page retirement or row remapping recording event",  # 63
    "ECC page retirement or row remapper recording failure",  # 64
    "Video processor exception",  # 65
    "Illegal access by driver",  # 66
    "Illegal access by driver",  # 67
    "NVDEC0 Exception",  # 68
    "Graphics Engine class error",  # 69
    "CE3: Unknown Error",  # 70
    "CE4: Unknown Error",  # 71
    "CE5: Unknown Error",  # 72
    "NVENC2 Error",  # 73
    "NVLINK Error",  # 74
    "CE6: Unknown Error",  # 75
    "CE7: Unknown Error",  # 76
    "CE8: Unknown Error",  # 77
    "vGPU Start Error",  # 78
    "GPU has fallen off the bus",  # 79
    "Corrupted data sent to GPU",  # 80
    "VGA Subsystem Error",  # 81
    "NVJPG0 Error",  # 82
    "NVDEC1 Error",  # 83
    "NVDEC2 Error",  # 84
    "CE9: Unknown Error",  # 85
    "OFA Exception",  # 86
    "Reserved",  # 87
    "NVDEC3 Error",  # 88
    "NVDEC4 Error",  # 89
    "Reserved",  # 90
    "Reserved",  # 91
    "High single-bit ECC error rate",  # 92
    "Non-fatal violation of provisioned InfoROM wear limit",  # 93
    "Contained ECC error",  # 94
    "Uncontained ECC error",  # 95
    "NVDEC5 Error",  # 96
    "NVDEC6 Error",  # 97
    "NVDEC7 Error",  # 98
    "NVJPG1 Error",  # 99
    "NVJPG2 Error",  # 100
    "NVJPG3 Error",  # 101
    "NVJPG4 Error",  # 102
    "NVJPG5 Error",  # 103
    "NVJPG6 Error",  # 104
    "NVJPG7 Error",  # 105
    "SMBPBI Test Message",  # 106
    "SMBPBI Test Message Silent",  # 107
    "Reserved",  # 108
    "Context Switch Timeout Error",  # 109
    "Security Fault Error",  # 110
    "Display Bundle Error Event",  # 111
    "Display Supervisor Error",  # 112
    "DP Link Training Error",  # 113
    "Display Pipeline Underflow Error",  # 114
    "Display Core Channel Error",  # 115
    "Display Window Channel Error",  # 116
    "Display Cursor Channel Error",  # 117
    "Display Pixel Pipeline Error",  # 118
    "GSP RPC Timeout",  # 119
    "GSP Error",  # 120
    "C2C Link Error",  # 121
    "SPI PMU RPC Read Failure",  # 122
    "SPI PMU RPC Write Failure",  # 123
    "SPI PMU RPC Erase Failure",  # 124
    "Inforom FS Failure",  # 125
    "Robust Channel CE10 Error",  # 126
    "Robust Channel CE11 Error",  # 127
    "Robust Channel CE12 Error",  # 128
    "Robust Channel CE13 Error",  # 129
    "Robust Channel CE14 Error",  # 130
    "Robust Channel CE15 Error",  # 131
    "Robust Channel CE16 Error",  # 132
    "Robust Channel CE17 Error",  # 133
    "Robust Channel CE18 Error",  # 134
    "Robust Channel CE19 Error",  # 135
    "ALI Training Fail",  # 136
    "NVLink Privilege Error",  # 137
    "Robust Channel DLA Error",  # 138
    "Robust Channel OFA1 Error",  # 139
    "Unrecovered ECC Error",  # 140
    "Robust Channel Fast Path Error",  # 141
    "Robust Channel NVENVC3 Error",  # 142
    "GPU Initialization Failure",  # 143
    "NVLINK: Saw Error",  # 144
    "NVLINK: RLW Error",  # 145
    "NVLINK: TLW Error",  # 146
    "NVLINK: TREX Error",  # 147
    "NVLINK: NVLPW_CTRL Error",  # 148
    "NVLINK: NETIR Error",  # 149
    "NVLINK: MSE Error",  # 150
    "Robust Channel Key rotation Error",  # 151
    "Robust Channel DLA SMMU Error",  # 152
    "Robust Channel DLA timeout Error",  # 153
    "GPU Recovery Action Changed",  # 154
    "NVLINK: SW Defined Error",  # 155
    "Resource Retirement Event",  # 156
    "Resource Retirement Failure",  # 157
    "GPU Fatal Timeout",  # 158
    "Robust Channel CHI Non-Data Error",  # 159
    "Channel Retirement Event",  # 160
    "Channel Retirement Failure",  # 161
    "Power Smoothing HW Circuitry Reengaged",  # 162
    "Power Smoothing HW Circuitry Disengaged",  # 163
    "Power Smoothing HW Circuitry Low Lifetime",  # 164
    "Power Smoothing HW Circuitry Lifetime Exhausted",  # 165
    "NVLINK Secure Crypto Error",  # 166
    "PCIE Fatal Timeout",  # 167
    "Reduced GPU Memory Capacity (Errors found in write protection region)",  # 168
    "Internal micro-controller halt",  # 169
    "NVLINK: Interrupt seen in CC mode",  # 170
    "Uncorrectable DRAM Error",  # 171
    "Uncorrectable SRAM Error",  # 172
)
