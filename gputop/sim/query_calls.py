"""The simulated driver's answers to the calls only ``gputop query``'s extra fields make.

Power limits, application and video clocks, ECC modes, VBIOS and InfoROM versions, retired pages
and the like: a mixin of :class:`gputop.sim.library.SimLibrary`, which dispatches ``nvmlX`` to the
method ``_nvmlX`` and hands it the simulated GPU the handle names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop.engine.model import THROTTLE_REASON_BITS
from gputop.sim.answers import (
    ERROR_INSUFFICIENT_SIZE,
    ERROR_NOT_SUPPORTED,
    SUCCESS,
    _put,
    _set,
    _target,
    _Unsupported,
)
from gputop.sim.scenario import SimGpu

if TYPE_CHECKING:
    from gputop.sim.clock import Clock


class QueryCalls:
    """NVML calls read only when a query asks for the fields behind them."""

    if TYPE_CHECKING:  # SimLibrary's, which this is mixed into
        clock: Clock

        def _value(self, gpu: SimGpu, key: str) -> float: ...

        def _int(self, gpu: SimGpu, key: str) -> int: ...

    def _nvmlDeviceGetPowerManagementLimit(self, gpu: SimGpu, out: Any) -> int:
        _put(out, round(self._value(gpu, "power_limit_w") * 1000))
        return SUCCESS

    def _nvmlDeviceGetPowerManagementDefaultLimit(self, gpu: SimGpu, out: Any) -> int:
        _put(out, round(self._value(gpu, "power_default_limit_w") * 1000))
        return SUCCESS

    def _nvmlDeviceGetPowerManagementLimitConstraints(
        self, gpu: SimGpu, low: Any, high: Any
    ) -> int:
        _put(low, round(self._value(gpu, "power_min_limit_w") * 1000))
        _put(high, round(self._value(gpu, "power_max_limit_w") * 1000))
        return SUCCESS

    def _nvmlDeviceGetPowerManagementMode(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "power_management"))
        return SUCCESS

    # applications clocks, by NVML clock type: graphics (0) and memory (2)
    _APP_CLOCKS = {0: "clock_app_graphics_mhz", 2: "clock_app_memory_mhz"}

    def _nvmlDeviceGetApplicationsClock(self, gpu: SimGpu, kind: Any, out: Any) -> int:
        key = self._APP_CLOCKS.get(_target(kind).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key))
        return SUCCESS

    def _nvmlDeviceGetDefaultApplicationsClock(self, gpu: SimGpu, kind: Any, out: Any) -> int:
        key = self._APP_CLOCKS.get(_target(kind).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key.replace("_app_", "_default_app_")))
        return SUCCESS

    def _nvmlDeviceGetEccMode(self, gpu: SimGpu, current: Any, pending: Any) -> int:
        _put(current, self._int(gpu, "ecc_mode"))
        _put(pending, self._int(gpu, "ecc_mode_pending"))
        return SUCCESS

    # NVML memory locations with a counter here: device memory / DRAM (2, one location) has the
    # total's uncorrected volatile count; SRAM (7) has none. The rest: NOT_SUPPORTED (Hopper).
    def _nvmlDeviceGetMemoryErrorCounter(
        self, gpu: SimGpu, kind: Any, counter: Any, location: Any, out: Any
    ) -> int:
        where = _target(location).value
        if where not in (2, 7):
            raise _Unsupported
        counted = where == 2 and _target(kind).value == 1
        _put(out, self._int(gpu, "ecc_uncorrected") if counted else 0)
        return SUCCESS

    def _text(self, gpu: SimGpu, key: str, buf: Any) -> int:
        value = gpu.texts.get(key)
        if value is None:
            raise _Unsupported
        buf.value = value.encode()
        return SUCCESS

    def _nvmlDeviceGetVbiosVersion(self, gpu: SimGpu, buf: Any, size: Any) -> int:
        return self._text(gpu, "vbios_version", buf)

    def _nvmlDeviceGetInforomImageVersion(self, gpu: SimGpu, buf: Any, size: Any) -> int:
        return self._text(gpu, "inforom_image", buf)

    _INFOROM = {0: "inforom_oem", 1: "inforom_ecc", 2: "inforom_power"}

    def _nvmlDeviceGetInforomVersion(self, gpu: SimGpu, which: Any, buf: Any, size: Any) -> int:
        key = self._INFOROM.get(_target(which).value)
        if key is None:
            raise _Unsupported
        return self._text(gpu, key, buf)

    def _nvmlDeviceValidateInforom(self, gpu: SimGpu) -> int:
        if gpu.texts.get("inforom_image") is None:
            raise _Unsupported
        return SUCCESS

    def _nvmlDeviceGetMarginTemperature(self, gpu: SimGpu, out: Any) -> int:
        # The margin (T.Limit) is how far the GPU is below its slowdown temperature.
        margin = self._int(gpu, "slowdown_c") - self._int(gpu, "temperature_c")
        _set(_target(out), "marginTemperature", margin)
        return SUCCESS

    def _flag(self, gpu: SimGpu, key: str, out: Any) -> int:
        _put(out, self._int(gpu, key))
        return SUCCESS

    def _nvmlDeviceGetDisplayMode(self, gpu: SimGpu, out: Any) -> int:
        return self._flag(gpu, "display_attached", out)

    def _nvmlDeviceGetDisplayActive(self, gpu: SimGpu, out: Any) -> int:
        return self._flag(gpu, "display_active", out)

    def _nvmlDeviceGetAccountingMode(self, gpu: SimGpu, out: Any) -> int:
        return self._flag(gpu, "accounting_mode", out)

    def _nvmlDeviceGetAccountingBufferSize(self, gpu: SimGpu, out: Any) -> int:
        return self._flag(gpu, "accounting_buffer_size", out)

    def _nvmlDeviceGetRetiredPagesPendingStatus(self, gpu: SimGpu, out: Any) -> int:
        return self._flag(gpu, "retired_pages_pending", out)

    def _nvmlDeviceGetGpuOperationMode(self, gpu: SimGpu, current: Any, pending: Any) -> int:
        _put(current, self._int(gpu, "gom"))
        _put(pending, self._int(gpu, "gom"))
        return SUCCESS

    def _nvmlDeviceGetJpgUtilization(self, gpu: SimGpu, util: Any, period: Any) -> int:
        if gpu.mig:  # no utilisation in MIG mode
            raise _Unsupported
        _put(util, self._int(gpu, "jpeg"))
        _put(period, 167000)
        return SUCCESS

    def _nvmlDeviceGetOfaUtilization(self, gpu: SimGpu, util: Any, period: Any) -> int:
        if gpu.mig:  # no utilisation in MIG mode
            raise _Unsupported
        _put(util, self._int(gpu, "ofa"))
        _put(period, 167000)
        return SUCCESS

    # NVML_PERF_POLICY_POWER (0) and _THERMAL (1) -> the clock event reasons each counts
    _VIOLATIONS = {0: 0x4 | 0x80, 1: 0x20 | 0x40}

    def _nvmlDeviceGetViolationStatus(self, gpu: SimGpu, policy: Any, out: Any) -> int:
        bits = self._VIOLATIONS.get(_target(policy).value)
        if bits is None:
            raise _Unsupported
        # As the clock event reason counters: a reason active all along has held the clocks
        # for the whole scenario so far. referenceTime is microseconds, violationTime ns.
        now = self.clock.now()
        viol = _target(out)
        _set(viol, "referenceTime", round(now * 1_000_000))
        _set(viol, "violationTime", round(now * 1e9) if gpu.throttle_reasons & bits else 0)
        return SUCCESS

    def _nvmlDeviceGetEncoderStats(self, gpu: SimGpu, sessions: Any, fps: Any, latency: Any) -> int:
        count = self._int(gpu, "encoder_sessions")
        _put(sessions, count)
        _put(fps, 30 * bool(count))
        _put(latency, 2000 * bool(count))
        return SUCCESS

    def _nvmlDeviceGetRetiredPages(self, gpu: SimGpu, cause: Any, count: Any, pages: Any) -> int:
        key = ("retired_pages_sbe", "retired_pages_dbe")[_target(cause).value]
        retired, n = self._int(gpu, key), _target(count)
        if pages is None or n.value < retired:
            n.value = retired
            return ERROR_INSUFFICIENT_SIZE if retired else SUCCESS
        for i in range(retired):
            pages[i] = 0x1000 * (i + 1)
        n.value = retired
        return SUCCESS

    def _nvmlDeviceGetRemappedRows(
        self, gpu: SimGpu, corrected: Any, uncorrected: Any, pending: Any, failed: Any
    ) -> int:
        _put(corrected, self._int(gpu, "remapped_rows_correctable"))
        _put(uncorrected, self._int(gpu, "remapped_rows_uncorrectable"))
        _put(pending, self._int(gpu, "remapped_rows_pending"))
        _put(failed, self._int(gpu, "remapped_rows_failure"))
        return SUCCESS

    def _nvmlDeviceGetRowRemapperHistogram(self, gpu: SimGpu, out: Any) -> int:
        hist = _target(out)
        hist.max = self._int(gpu, "remap_banks")
        hist.high = hist.partial = hist.low = hist.none = 0
        return SUCCESS

    def _nvmlDeviceGetPciInfoExt(self, gpu: SimGpu, out: Any) -> int:
        info = _target(out)
        domain, bus, rest = gpu.pci_bus_id.split(":")
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest[:2], 16)
        info.pciDeviceId = 0x20B010DE
        info.pciSubSystemId = self._int(gpu, "pci_sub_device_id")
        info.baseClass, info.subClass = 0x3, 0x2  # a display controller: 3D
        info.busId = gpu.pci_bus_id.encode()
        return SUCCESS

    def _nvmlDeviceGetGpuMaxPcieLinkGeneration(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_gen_max"))
        return SUCCESS

    def _nvmlDeviceGetSupportedClocksEventReasons(self, gpu: SimGpu, out: Any) -> int:
        _put(out, sum(THROTTLE_REASON_BITS.values()))
        return SUCCESS

    _nvmlDeviceGetSupportedClocksThrottleReasons = _nvmlDeviceGetSupportedClocksEventReasons

    def _not_supported(self, *args: Any) -> int:
        """What a driver answers for a feature this box lacks (vGPU, fabric, Windows ...)."""
        return ERROR_NOT_SUPPORTED


# Calls a Linux driver of this generation has but that answer NOT_SUPPORTED on a bare-metal box
# without the feature. Calls newer than the simulated driver (the hostname, addressing and DRAM
# encryption modes ...) are absent: pynvml says NVML_ERROR_FUNCTION_NOT_FOUND.
_NOT_SUPPORTED_CALLS = (
    "nvmlGetVgpuDriverCapabilities",
    "nvmlDeviceGetVgpuCapabilities",
    "nvmlDeviceGetDriverModel_v2",
    "nvmlDeviceGetSramEccErrorStatus",
    "nvmlDeviceGetRemappedRows_v2",
    "nvmlDeviceGetGspFirmwareMode",
    "nvmlDeviceGetC2cModeInfoV",
    "nvmlDeviceGetConfComputeProtectedMemoryUsage",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetPlatformInfo",
)
for _name in _NOT_SUPPORTED_CALLS:
    setattr(QueryCalls, "_" + _name, QueryCalls._not_supported)
