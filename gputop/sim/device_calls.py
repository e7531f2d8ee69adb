"""The simulated driver's answers about one GPU itself: who it is and what it reads now.

Name, UUID, PCI, serial and compute capability; BAR1, utilisation, temperatures, field values,
fans, power, clocks, PCIe and modes. A mixin of :class:`gputop.sim.library.SimLibrary`, which
dispatches ``nvmlX`` to the method ``_nvmlX`` and hands it the simulated GPU the handle names.
(Memory and process lists, which depend on which processes are present, stay in library.py.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop.sim.answers import (
    ERROR_INVALID_ARGUMENT,
    ERROR_NOT_SUPPORTED,
    SUCCESS,
    _put,
    _set,
    _target,
    _Unsupported,
)
from gputop.sim.scenario import SimGpu
from gputop.units import MiB

if TYPE_CHECKING:
    from gputop.sim.clock import Clock


class DeviceCalls:
    """NVML calls about a GPU's identity and its own readings (no process list)."""

    if TYPE_CHECKING:  # SimLibrary's (and CounterCalls'), which this is mixed into
        clock: Clock

        def _value(self, gpu: SimGpu, key: str) -> float: ...

        def _int(self, gpu: SimGpu, key: str) -> int: ...

        def _position(self, gpu: SimGpu) -> int: ...

        def nvlink_field(self, gpu: SimGpu, field_id: int, link: int) -> int | None: ...

    # -- identity -------------------------------------------------------------------------
    def _nvmlDeviceGetName(self, gpu: SimGpu, buf: Any, size: Any) -> int:
        buf.value = gpu.name.encode()
        return SUCCESS

    def _nvmlDeviceGetUUID(self, gpu: SimGpu, buf: Any, size: Any) -> int:
        buf.value = gpu.uuid.encode()
        return SUCCESS

    def _nvmlDeviceGetPciInfo_v3(self, gpu: SimGpu, out: Any) -> int:
        info = _target(out)
        info.busId = gpu.pci_bus_id.encode()
        info.busIdLegacy = gpu.pci_bus_id.encode()
        domain, bus, rest = gpu.pci_bus_id.split(":")
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(rest[:2], 16)
        info.pciDeviceId = 0x20B010DE
        if gpu.readings.get("pci_sub_device_id") is not None:
            info.pciSubSystemId = self._int(gpu, "pci_sub_device_id")
        return SUCCESS

    def _nvmlDeviceGetSerial(self, gpu: SimGpu, buf: Any, size: Any) -> int:
        if gpu.serial is None:
            raise _Unsupported
        buf.value = gpu.serial.encode()
        return SUCCESS

    def _nvmlDeviceGetMinorNumber(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._position(gpu))
        return SUCCESS

    def _nvmlDeviceGetCudaComputeCapability(self, gpu: SimGpu, major: Any, minor: Any) -> int:
        if gpu.compute_capability is None:
            raise _Unsupported
        _put(major, gpu.compute_capability[0])
        _put(minor, gpu.compute_capability[1])
        return SUCCESS

    # -- BAR1 ---------------------------------------------------------------------------
    def _nvmlDeviceGetBAR1MemoryInfo(self, gpu: SimGpu, out: Any) -> int:
        bar = _target(out)
        total = self._int(gpu, "bar1_total_mib") * MiB
        used = self._int(gpu, "bar1_used_mib") * MiB
        bar.bar1Total, bar.bar1Used, bar.bar1Free = total, used, total - used
        return SUCCESS

    # -- utilisation ----------------------------------------------------------------------
    # In MIG mode the GPU answers no utilisation: not as a whole, nor per process.
    def _nvmlDeviceGetUtilizationRates(self, gpu: SimGpu, out: Any) -> int:
        if gpu.mig:
            raise _Unsupported
        util = _target(out)
        util.gpu = self._int(gpu, "util_gpu")
        util.memory = self._int(gpu, "util_memory")
        return SUCCESS

    def _nvmlDeviceGetEncoderUtilization(self, gpu: SimGpu, util: Any, period: Any) -> int:
        if gpu.mig:
            raise _Unsupported
        _put(util, self._int(gpu, "encoder"))
        _put(period, 167000)
        return SUCCESS

    def _nvmlDeviceGetDecoderUtilization(self, gpu: SimGpu, util: Any, period: Any) -> int:
        if gpu.mig:
            raise _Unsupported
        _put(util, self._int(gpu, "decoder"))
        _put(period, 167000)
        return SUCCESS

    # -- thermals, fans, power ------------------------------------------------------------
    def _nvmlDeviceGetTemperature(self, gpu: SimGpu, sensor: Any, out: Any) -> int:
        _put(out, self._int(gpu, "temperature_c"))
        return SUCCESS

    def _nvmlDeviceGetFieldValues(self, gpu: SimGpu, count: Any, values: Any) -> int:
        for i in range(_target(count).value):
            slot = _target(values)[i]
            try:  # a scope (a module's power, say) is what this simulator has none of, but links
                value = self.nvlink_field(gpu, slot.fieldId, slot.scopeId)
                if value is None:
                    value = None if slot.scopeId else self._field_value(gpu, slot.fieldId)
            except _Unsupported:
                value = None
            if value is None:
                slot.nvmlReturn = ERROR_NOT_SUPPORTED
            else:  # every simulated field value is an unsigned long long (valueType 3)
                slot.valueType, slot.nvmlReturn = 3, SUCCESS
                slot.value.ullVal = value
        return SUCCESS

    # NVML field id -> (reading, scale): NVML_FI_DEV_MEMORY_TEMP, _POWER_AVERAGE, _POWER_INSTANT
    # (milliwatts) and _GET_GPU_RECOVERY_ACTION.
    _FIELDS = {
        82: ("memory_temperature_c", 1),
        185: ("power_average_w", 1000),
        186: ("power_instant_w", 1000),
        230: ("recovery_action", 1),
    }
    # NVML_FI_DEV_CLOCKS_EVENT_REASON_* counters (microseconds) -> the reason's bit
    _REASON_COUNTERS = {74: 0x4, 76: 0x10, 269: 0x20, 270: 0x40, 271: 0x80}

    def _field_value(self, gpu: SimGpu, field_id: int) -> int | None:
        if field_id in self._FIELDS:
            key, scale = self._FIELDS[field_id]
            return round(self._value(gpu, key) * scale)
        bit = self._REASON_COUNTERS.get(field_id)
        if bit is None:
            return None
        # A reason active all along has held the clocks for the whole scenario so far.
        return round(self.clock.now() * 1_000_000) if gpu.throttle_reasons & bit else 0

    def _nvmlDeviceGetTemperatureThreshold(self, gpu: SimGpu, which: Any, out: Any) -> int:
        key = {0: "shutdown_c", 1: "slowdown_c"}.get(_target(which).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key))
        return SUCCESS

    def _nvmlDeviceGetNumFans(self, gpu: SimGpu, out: Any) -> int:
        _put(out, gpu.fans if gpu.readings.get("fan_percent") is not None else 0)
        return SUCCESS

    def _nvmlDeviceGetFanSpeed_v2(self, gpu: SimGpu, fan: Any, out: Any) -> int:
        index = fan if isinstance(fan, int) else _target(fan).value
        if index >= gpu.fans:
            return ERROR_INVALID_ARGUMENT
        # Fans of one card differ a little, as on real boards.
        _put(out, max(0, min(100, self._int(gpu, "fan_percent") + 2 * index)))
        return SUCCESS

    def _nvmlDeviceGetFanSpeed(self, gpu: SimGpu, out: Any) -> int:
        return self._nvmlDeviceGetFanSpeed_v2(gpu, 0, out)

    def _nvmlDeviceGetPowerUsage(self, gpu: SimGpu, out: Any) -> int:
        _put(out, round(self._value(gpu, "power_w") * 1000))
        return SUCCESS

    def _nvmlDeviceGetEnforcedPowerLimit(self, gpu: SimGpu, out: Any) -> int:
        _put(out, round(self._value(gpu, "power_limit_w") * 1000))
        return SUCCESS

    # -- clocks and performance -----------------------------------------------------------
    _CLOCKS = {
        0: "clock_graphics_mhz",
        1: "clock_sm_mhz",
        2: "clock_memory_mhz",
        3: "clock_video_mhz",
    }

    def _nvmlDeviceGetClockInfo(self, gpu: SimGpu, kind: Any, out: Any) -> int:
        key = self._CLOCKS.get(_target(kind).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key))
        return SUCCESS

    def _nvmlDeviceGetMaxClockInfo(self, gpu: SimGpu, kind: Any, out: Any) -> int:
        key = self._CLOCKS.get(_target(kind).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key.replace("_mhz", "_max_mhz")))
        return SUCCESS

    def _nvmlDeviceGetPerformanceState(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pstate"))
        return SUCCESS

    def _nvmlDeviceGetCurrentClocksEventReasons(self, gpu: SimGpu, out: Any) -> int:
        _put(out, gpu.throttle_reasons)
        return SUCCESS

    _nvmlDeviceGetCurrentClocksThrottleReasons = _nvmlDeviceGetCurrentClocksEventReasons

    # -- PCIe -----------------------------------------------------------------------------
    def _nvmlDeviceGetCurrPcieLinkGeneration(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_gen"))
        return SUCCESS

    def _nvmlDeviceGetMaxPcieLinkGeneration(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_gen_max"))
        return SUCCESS

    def _nvmlDeviceGetCurrPcieLinkWidth(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_width"))
        return SUCCESS

    def _nvmlDeviceGetMaxPcieLinkWidth(self, gpu: SimGpu, out: Any) -> int:
        _put(out, self._int(gpu, "pcie_width_max"))
        return SUCCESS

    def _nvmlDeviceGetPcieThroughput(self, gpu: SimGpu, counter: Any, out: Any) -> int:
        key = {0: "pcie_tx_kbps", 1: "pcie_rx_kbps"}.get(_target(counter).value)
        if key is None:
            raise _Unsupported
        _put(out, self._int(gpu, key))
        return SUCCESS

    # -- health and modes -----------------------------------------------------------------
    def _nvmlDeviceGetTotalEccErrors(self, gpu: SimGpu, kind: Any, counter: Any, out: Any) -> int:
        # Uncorrected errors since the driver loaded count in the lifetime (aggregate) total too.
        uncorrected = _target(kind).value == 1
        errors = self._int(gpu, "ecc_uncorrected")  # a board without ECC has neither count
        _put(out, errors if uncorrected else self._int(gpu, "ecc_corrected"))
        return SUCCESS

    def _nvmlDeviceGetUnrepairableMemoryFlag_v1(self, gpu: SimGpu, out: Any) -> int:
        _set(_target(out), "unrepairableMemory", self._int(gpu, "unrepairable_memory"))
        return SUCCESS

    def _nvmlDeviceGetComputeMode(self, gpu: SimGpu, out: Any) -> int:
        _put(out, gpu.compute_mode)
        return SUCCESS

    def _nvmlDeviceGetPersistenceMode(self, gpu: SimGpu, out: Any) -> int:
        if gpu.persistence is None:
            raise _Unsupported
        _put(out, int(gpu.persistence))
        return SUCCESS

    def _nvmlDeviceGetMigMode(self, gpu: SimGpu, current: Any, pending: Any) -> int:
        if gpu.mig is None:
            raise _Unsupported
        _put(current, int(gpu.mig))
        _put(pending, int(gpu.mig if gpu.mig_pending is None else gpu.mig_pending))
        return SUCCESS
