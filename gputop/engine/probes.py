"""Driver readings named as data: which NVML call gives a value, with which arguments (pure).

``gputop query`` accepts every field of ``nvidia-smi --help-query-gpu``; most of them are read
nowhere else, so the dashboard never pays for them. A :class:`Probe` names the pynvml function
and its arguments by their pynvml names (strings), and the part of the answer that holds the
value; :mod:`~gputop.engine.nvml.query` resolves the names with ``getattr(pynvml, ...)`` and
makes the call, only for the probes a query asked for. No pynvml here.
"""

from __future__ import annotations

from dataclasses import dataclass

Arg = str | int  # a pynvml constant's name, or a plain number


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One driver reading: ``pynvml.<call>(handle, *args)``, then ``part`` of what it returns.

    ``field`` instead reads an NVML field value (``nvmlDeviceGetFieldValues``; every field a query
    wants is read in one call), ``scope`` its scope. ``out`` is a pynvml struct the caller passes
    in (its ``version`` member set to the constant named ``version``): the call fills it.
    """

    call: str = ""
    args: tuple[Arg, ...] = ()
    part: str | int | None = None  # a struct member, or a position in a returned list
    field: str | None = None  # NVML_FI_* name
    scope: str | None = None  # NVML_POWER_SCOPE_* name, for field values with a scope
    out: str | None = None
    version: str | None = None
    device: bool = True  # False: a system-wide call, without a device handle
    count: bool = False  # the value is how many items the call returned

    @property
    def key(self) -> str:
        """A name for this reading, unique per (call or field, arguments, part)."""
        if self.field is not None:
            return f"{self.field}@{self.scope}" if self.scope else self.field
        args = ",".join(str(a) for a in self.args)
        part = "" if self.part is None else f".{self.part}"
        return f"{self.call}({args}){part}{'#' if self.count else ''}"

    @property
    def source(self) -> tuple[str, tuple[Arg, ...], str | None, str | None, bool]:
        """What the driver is asked: probes with the same source share one call."""
        return self.call, self.args, self.out, self.version, self.device


def call(name: str, *args: Arg, part: str | int | None = None, count: bool = False) -> Probe:
    """A probe of ``pynvml.<name>(handle, *args)``."""
    return Probe(call=name, args=args, part=part, count=count)


def field_value(name: str, scope: str | None = None) -> Probe:
    """A probe of the NVML field value ``name`` (e.g. ``NVML_FI_DEV_POWER_INSTANT``)."""
    return Probe(field=name, scope=scope)


def struct(name: str, out: str, version: str | None, part: str) -> Probe:
    """A probe of a call that fills a caller's struct ``out``; the value is its member ``part``."""
    return Probe(call=name, out=out, version=version, part=part)


# The call behind each GpuSample reading, by attribute name. When a query shows a reading that
# came back None, this call is made again to learn why (the driver's error decides the text);
# the dashboard never makes it.
TYPED: dict[str, Probe] = {
    "serial": call("nvmlDeviceGetSerial"),
    "compute_capability": call("nvmlDeviceGetCudaComputeCapability"),
    "memory_total_bytes": call("nvmlDeviceGetMemoryInfo"),
    "memory_used_bytes": call("nvmlDeviceGetMemoryInfo"),
    "memory_free_bytes": call("nvmlDeviceGetMemoryInfo"),
    "memory_reserved_bytes": call("nvmlDeviceGetMemoryInfo", "nvmlMemory_v2"),
    "utilization_gpu_percent": call("nvmlDeviceGetUtilizationRates"),
    "utilization_memory_percent": call("nvmlDeviceGetUtilizationRates"),
    "encoder_percent": call("nvmlDeviceGetEncoderUtilization"),
    "decoder_percent": call("nvmlDeviceGetDecoderUtilization"),
    "temperature_c": call("nvmlDeviceGetTemperature", "NVML_TEMPERATURE_GPU"),
    "temperature_memory_c": field_value("NVML_FI_DEV_MEMORY_TEMP"),
    "fan_speeds_percent": call("nvmlDeviceGetFanSpeed"),
    "power_draw_mw": call("nvmlDeviceGetPowerUsage"),
    "power_limit_mw": call("nvmlDeviceGetEnforcedPowerLimit"),
    "clock_graphics_mhz": call("nvmlDeviceGetClockInfo", "NVML_CLOCK_GRAPHICS"),
    "clock_sm_mhz": call("nvmlDeviceGetClockInfo", "NVML_CLOCK_SM"),
    "clock_memory_mhz": call("nvmlDeviceGetClockInfo", "NVML_CLOCK_MEM"),
    "clock_graphics_max_mhz": call("nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_GRAPHICS"),
    "clock_sm_max_mhz": call("nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_SM"),
    "clock_memory_max_mhz": call("nvmlDeviceGetMaxClockInfo", "NVML_CLOCK_MEM"),
    "performance_state": call("nvmlDeviceGetPerformanceState"),
    "throttle_reasons": call("nvmlDeviceGetCurrentClocksEventReasons"),
    "pcie_gen": call("nvmlDeviceGetCurrPcieLinkGeneration"),
    "pcie_gen_max": call("nvmlDeviceGetMaxPcieLinkGeneration"),
    "pcie_width": call("nvmlDeviceGetCurrPcieLinkWidth"),
    "pcie_width_max": call("nvmlDeviceGetMaxPcieLinkWidth"),
    "ecc_errors_uncorrected_volatile": call(
        "nvmlDeviceGetTotalEccErrors", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"
    ),
    "compute_mode": call("nvmlDeviceGetComputeMode"),
    "persistence_mode": call("nvmlDeviceGetPersistenceMode"),
    "mig_mode": call("nvmlDeviceGetMigMode"),
}
