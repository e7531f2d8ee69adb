"""Scenario files for the simulated driver: GPUs, processes, time-varying load and faults.

A scenario is TOML or JSON. Any numeric reading may be a constant or a wave
``{base = 60, amp = 10, period = 30, noise = 2, phase = 0.0}`` evaluated at the scenario clock, so
a run is deterministic for a given seed and clock. See gputop/sim/scenarios/demo.toml.
"""

from __future__ import annotations

import functools
import math
import os
import stat
import zlib
from _random import Random  # random.Random's C generator: see _unit_random
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gputop.engine.model import THROTTLE_REASON_BITS
from gputop.engine.sanitize import clean
from gputop.errors import UsageError
from gputop.sim.actors import ActorSpec
from gputop.sim.mig import ScenarioKey, SimMigDevice, mig_devices

_TWO_PI = 2 * math.pi  # the same float `2 * math.pi * t` starts with


@dataclass(frozen=True, slots=True)
class Wave:
    """A reading that varies with time: base + amp*sin(2πt/period + phase) + seeded noise."""

    base: float
    amp: float = 0.0
    period: float = 60.0
    noise: float = 0.0
    phase: float = 0.0
    lo: float | None = None
    hi: float | None = None
    step_at: float | None = None  # from this many seconds on, the value is `step_to`
    step_to: float | None = None
    until: float | None = None  # after this many seconds, the value is `after`
    after: float | None = None
    # The value at any time, worked out once, when it never moves (None otherwise): the
    # simulated driver keeps a process list whose memory readings are all fixed as bytes.
    fixed: float | None = field(init=False, default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.amp and not self.noise and self.step_at is None and self.until is None:
            object.__setattr__(self, "fixed", self.at(0.0, 0))

    def at(self, t: float, seed: int) -> float:
        """The value at scenario time t (seconds since the scenario started)."""
        fixed = self.fixed
        if fixed is not None:
            return fixed
        if self.until is not None and t >= self.until and self.after is not None:
            return self.after
        if self.step_at is not None and t >= self.step_at and self.step_to is not None:
            return self.step_to
        value = self.base
        if self.amp:
            value += self.amp * math.sin(_TWO_PI * t / self.period + self.phase)
        if self.noise:
            # Noise depends only on (seed, whole second) so repeated reads within a tick agree.
            low, high = -self.noise, self.noise
            value += low + (high - low) * _unit_random(seed * 1_000_003 + int(t))  # = uniform()
        # As max(lo, value) and min(hi, value), without the builtin calls.
        lo, hi = self.lo, self.hi
        if lo is not None and not value > lo:
            value = lo
        if hi is not None and not value < hi:
            value = hi
        return value


def _reading(raw: Any, where: str) -> Wave:
    if isinstance(raw, bool):
        return Wave(base=float(raw))
    if isinstance(raw, int | float):
        return Wave(base=float(raw))
    if isinstance(raw, dict):
        unknown = set(raw) - {f.name for f in fields(Wave) if f.init}  # not `fixed`
        if unknown:
            raise UsageError(f"scenario: {where}: unknown wave keys {sorted(unknown)}")
        if "base" not in raw:
            raise UsageError(f"scenario: {where}: a wave needs 'base'")
        return Wave(**{k: float(v) for k, v in raw.items()})
    raise UsageError(f"scenario: {where}: expected a number or a wave table, got {raw!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimProcess:
    """A process context on a simulated GPU."""

    pid: int
    type: str = "compute"  # compute | graphics | compute+graphics (listed in both lists)
    used_memory_mib: Wave = field(default_factory=lambda: Wave(base=1024))
    sm_util: Wave | None = None
    mem_util: Wave | None = None
    name: str = "python"
    actor: str | None = None  # with --demo, the PID of this real actor process replaces pid
    start_s: float = 0.0  # appears at this scenario time
    end_s: float | None = None  # disappears at this scenario time
    gpu_instance: int | None = None  # on a GPU in MIG mode: the GPU instance it runs in
    compute_instance: int | None = None  # ... and its compute instance (default: the GI's first)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The driver's lists this process is in: a C+G context is in both."""
        return ("compute", "graphics") if self.type == "compute+graphics" else (self.type,)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimGpu:
    """One simulated GPU: identity, readings (Wave or None for NOT_SUPPORTED) and faults."""

    name: str
    uuid: str
    pci_bus_id: str
    memory_total_mib: int
    readings: dict[str, Wave | None]
    processes: tuple[SimProcess, ...] = ()
    fans: int = 1
    throttle_reasons: int = 0
    compute_mode: int = 0
    persistence: bool | None = True
    mig: bool | None = False
    mig_pending: bool | None = None  # MIG mode after the next reset (None: as now)
    mig_devices: tuple[SimMigDevice, ...] = ()  # in MIG mode: its compute instances
    mig_call_errors: dict[str, int] = field(default_factory=dict)  # as call_errors, MIG handles
    compute_capability: tuple[int, int] | None = (8, 0)
    serial: str | None = None  # None: the board has none (NOT_SUPPORTED)
    extra_used_by: str | None = None  # the actor whose death frees extra_used_mib
    lost_after_s: float | None = None
    slow_calls: dict[str, float] = field(default_factory=dict)  # NVML function -> delay seconds
    unsupported: frozenset[str] = frozenset()  # NVML function names answering NOT_SUPPORTED
    call_errors: dict[str, int] = field(default_factory=dict)  # NVML function -> its error code
    texts: dict[str, str | None] = field(default_factory=dict)  # DEFAULT_TEXTS; None: unsupported
    # Critical Xid errors the driver reports as events: (scenario time in s, Xid), by time.
    xids: tuple[tuple[float, int], ...] = ()


# Readings every GPU has, with defaults; names map to NVML calls in library.py.
DEFAULT_READINGS: dict[str, Any] = {
    "memory_reserved_mib": 512,
    "extra_used_mib": 0,  # memory in use that no listed process owns
    "bar1_total_mib": 65536,
    "bar1_used_mib": 8,
    "util_gpu": 0,
    "util_memory": 0,
    "encoder": 0,
    "decoder": 0,
    "temperature_c": 35,
    "memory_temperature_c": "unsupported",
    "slowdown_c": 90,
    "shutdown_c": 95,
    "fan_percent": 30,
    "power_w": 60,
    "power_limit_w": 300,
    "clock_graphics_mhz": 210,
    "clock_sm_mhz": 210,
    "clock_memory_mhz": 1593,
    "clock_graphics_max_mhz": 1980,
    "clock_sm_max_mhz": 1980,
    "clock_memory_max_mhz": 1593,
    "pstate": 0,
    "pcie_gen": 4,
    "pcie_gen_max": 4,
    "pcie_width": 16,
    "pcie_width_max": 16,
    "pcie_rx_kbps": 0,
    "pcie_tx_kbps": 0,
    "ecc_uncorrected": 0,
    "ecc_corrected": 0,  # corrected (single-bit) errors since the driver loaded
    # Read only by `gputop query` (its extra fields).
    "power_min_limit_w": 100,
    "power_management": 1,  # 1: Enabled
    "clock_video_mhz": 1275,
    "clock_video_max_mhz": 1950,
    "ecc_mode": 1,  # 1: Enabled
    "display_attached": 0,
    "display_active": 0,
    "accounting_mode": 0,
    "accounting_buffer_size": 4000,
    "gom": "unsupported",  # GPU operation mode: 0 All On, 1 Compute, 2 Low Double Precision
    "jpeg": 0,
    "ofa": 0,
    "encoder_sessions": 0,
    "retired_pages_sbe": 0,
    "retired_pages_dbe": 0,
    "retired_pages_pending": 0,
    "remapped_rows_correctable": 0,
    "remapped_rows_uncorrectable": 0,
    "remapped_rows_pending": 0,
    "remapped_rows_failure": 0,
    "remap_banks": 640,  # banks with full remap availability (the histogram's "max")
    "pci_sub_device_id": 0x134F10DE,
    "recovery_action": 0,  # 0: None; 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset,
    # 5 recover IMEX domain, 6 bus reset, 7 system reboot (NVML_GPU_RECOVERY_ACTION_*)
    "unrepairable_memory": "unsupported",  # 1: memory the GPU can no longer repair (newer drivers)
    # Read by the exporter (gputop.sim.counters): counters and GPM metrics.
    "pcie_replay_count": 0,
    "nvlink_links": 0,  # active NVLink links (0: none, NOT_SUPPORTED)
    "nvlink_tx_kibps": 0,  # each link's data rate, KiB/s
    "nvlink_rx_kibps": 0,
    "gpm_tensor_util": 0,  # % of time tensor cores were busy (GPM: compute capability >= 9.0)
}

# Readings whose default is another reading's value on the same GPU (a limit, a mode).
DERIVED_READINGS: dict[str, str] = {
    "power_default_limit_w": "power_limit_w",
    "power_max_limit_w": "power_limit_w",
    "power_average_w": "power_w",
    "power_instant_w": "power_w",
    "clock_app_graphics_mhz": "clock_graphics_max_mhz",
    "clock_app_memory_mhz": "clock_memory_max_mhz",
    "clock_default_app_graphics_mhz": "clock_graphics_max_mhz",
    "clock_default_app_memory_mhz": "clock_memory_max_mhz",
    "ecc_mode_pending": "ecc_mode",
    "gpm_graphics_util": "util_gpu",  # GPM's graphics engine activity, %
    "gpm_dram_bw_util": "util_memory",  # GPM's DRAM bandwidth use, %
}

# Text facts every GPU has ("unsupported": the call answers NOT_SUPPORTED).
DEFAULT_TEXTS: dict[str, str] = {
    "vbios_version": "92.00.45.00.06",
    "inforom_image": "G506.0200.00.04",
    "inforom_oem": "2.0",
    "inforom_ecc": "6.16",
    "inforom_power": "unsupported",
}

# The errors call_errors may name, as NVML's codes.
CALL_ERRORS = {
    "not_supported": 3,
    "no_permission": 4,
    "gpu_is_lost": 15,
    "deprecated": 26,
    "unknown": 999,
}


COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}

# A [[gpu]] table's keys besides its readings and texts, with the defaults the parser uses.
GPU_SETTINGS: dict[str, ScenarioKey] = {
    "name": ScenarioKey("string", "NVIDIA A100-SXM4-80GB", "the product name"),
    "count": ScenarioKey("integer", 1, "this many GPUs alike"),
    "uuid": ScenarioKey("string", note="default: made from the seed and the GPU's index"),
    "pci_bus_id": ScenarioKey("string", note="default: 00000000:10:00.0, 00000000:20:00.0, ..."),
    "memory_total_mib": ScenarioKey("integer", 81920),
    "processes": ScenarioKey("array of tables", [], "[[gpu.processes]]: its process contexts"),
    "fans": ScenarioKey("integer", 1),
    "throttle_reasons": ScenarioKey(
        "array of strings", [], "of: " + ", ".join(THROTTLE_REASON_BITS)
    ),
    "compute_mode": ScenarioKey("string", "default", "one of: " + ", ".join(COMPUTE_MODES)),
    "persistence": ScenarioKey('boolean or "unsupported"', True),
    "mig": ScenarioKey('boolean or "unsupported"', False, "MIG mode"),
    "mig_pending": ScenarioKey(
        'boolean or "unsupported"', note="MIG mode after the next reset; default: as now"
    ),
    "gpu_instances": ScenarioKey(
        "array of tables", [], "[[gpu.gpu_instances]]: its MIG devices (needs mig = true)"
    ),
    "mig_call_errors": ScenarioKey(
        "table", {}, "as call_errors, for the calls on its MIG devices' handles"
    ),
    "compute_capability": ScenarioKey("array [major, minor]", [8, 0]),
    "serial": ScenarioKey(
        'string or "unsupported"', note="default: made from the seed and the GPU's index"
    ),
    "extra_used_by": ScenarioKey("string", note="the actor whose death frees extra_used_mib"),
    "lost_after_s": ScenarioKey("number", note="the GPU falls off the bus at this scenario time"),
    "slow_calls": ScenarioKey("table", {}, "NVML function name = delay in seconds"),
    "unsupported": ScenarioKey(
        "array of strings", [], "NVML function names that answer NOT_SUPPORTED"
    ),
    "call_errors": ScenarioKey(
        "table", {}, "NVML function name = the error it answers: " + ", ".join(CALL_ERRORS)
    ),
    "xids": ScenarioKey(
        "array of tables", [], "critical Xid errors: {at_s = 40, xid = 13}, both required"
    ),
}

GPU_KEYS = {*GPU_SETTINGS, *DEFAULT_READINGS, *DERIVED_READINGS, *DEFAULT_TEXTS}


def _setting(spec: dict[str, Any], key: str) -> Any:
    """The [[gpu]] table's ``key``, or its default."""
    return spec.get(key, GPU_SETTINGS[key].default)


FAULT_KINDS = ("hang", "crash")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallFault:
    """A driver call that hangs or crashes the process, from ``after_s`` until ``until_s``.

    ``hang``: the call blocks until scenario time ``until_s`` (forever without one), then answers
    as usual. ``crash``: the call kills the calling process with SIGSEGV, as a broken
    libnvidia-ml does. ``gpu`` limits it to one GPU's calls (any call, with or without a device,
    when None).
    """

    call: str  # an NVML function name, e.g. "nvmlDeviceGetPowerUsage", "nvmlInitWithFlags"
    kind: str  # one of FAULT_KINDS
    gpu: int | None = None
    after_s: float = 0.0
    until_s: float | None = None

    def active(self, t: float) -> bool:
        """True at scenario time ``t``."""
        return self.after_s <= t and (self.until_s is None or t < self.until_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A whole simulated box."""

    name: str
    description: str = ""
    seed: int = 0
    driver_version: str = "550.54.15"
    cuda_driver_version: int = 12040
    nvml_version: str = "12.550.54.15"
    process_api: str = "v3"  # newest process-info call the "driver" has: v3, v2 or v1
    init_error: str | None = None  # e.g. "driver_not_loaded", "lib_rm_version_mismatch"
    gpus: tuple[SimGpu, ...] = ()
    actors: tuple[ActorSpec, ...] = ()
    faults: tuple[CallFault, ...] = ()  # [[fault]] tables: calls that hang or crash

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        """Build and validate a scenario from parsed TOML/JSON."""
        top_keys = {*cls.__dataclass_fields__, "gpu", "actor", "fault"} - {
            "gpus",
            "actors",
            "faults",
        }
        unknown = set(data) - top_keys
        if unknown:
            raise UsageError(f"scenario: unknown keys {sorted(unknown)}")
        seed = int(data.get("seed", 0))
        gpus: list[SimGpu] = []
        for spec in data.get("gpu", []):
            for _ in range(int(spec.get("count", GPU_SETTINGS["count"].default))):
                gpus.append(_gpu_from_dict(spec, len(gpus), seed))
        if data.get("process_api", "v3") not in ("v1", "v2", "v3"):
            raise UsageError("scenario: process_api must be v1, v2 or v3")
        return cls(
            name=str(data.get("name", "scenario")),
            description=str(data.get("description", "")),
            seed=seed,
            driver_version=str(data.get("driver_version", "550.54.15")),
            cuda_driver_version=int(data.get("cuda_driver_version", 12040)),
            nvml_version=str(data.get("nvml_version", "12.550.54.15")),
            process_api=str(data.get("process_api", "v3")),
            init_error=data.get("init_error"),
            gpus=tuple(gpus),
            actors=tuple(_actor_from_dict(a) for a in data.get("actor", [])),
            faults=tuple(_fault_from_dict(f, len(gpus)) for f in data.get("fault", [])),
        )


def _gpu_from_dict(spec: dict[str, Any], index: int, seed: int) -> SimGpu:
    where = f"gpu {index}"
    unknown = set(spec) - GPU_KEYS
    if unknown:
        raise UsageError(f"scenario: {where}: unknown keys {sorted(unknown)}")
    readings: dict[str, Wave | None] = {}
    for key, default in DEFAULT_READINGS.items():
        raw = spec.get(key, default)
        # The string "unsupported" makes that reading answer NOT_SUPPORTED.
        readings[key] = None if raw == "unsupported" else _reading(raw, f"{where}: {key}")
    for key, like in DERIVED_READINGS.items():
        raw = spec.get(key, spec.get(like, DEFAULT_READINGS[like]))
        readings[key] = None if raw == "unsupported" else _reading(raw, f"{where}: {key}")
    reasons = 0
    for reason in _setting(spec, "throttle_reasons"):
        if reason not in THROTTLE_REASON_BITS:
            raise UsageError(f"scenario: {where}: unknown throttle reason {reason!r}")
        reasons |= THROTTLE_REASON_BITS[reason]
    mode = str(_setting(spec, "compute_mode")).lower()
    if mode not in COMPUTE_MODES:
        raise UsageError(f"scenario: {where}: unknown compute_mode {mode!r}")
    crc = zlib.crc32(f"{seed}:{index}".encode())
    cc = _setting(spec, "compute_capability")
    mig = _flag(_setting(spec, "mig"))
    memory_total_mib = int(_setting(spec, "memory_total_mib"))
    migs = mig_devices(_setting(spec, "gpu_instances"), memory_total_mib, where, f"{seed}:{index}")
    if migs and mig is not True:
        raise UsageError(f"scenario: {where}: gpu_instances need mig = true")
    made: dict[Any, Wave] = {}  # one Wave for each distinct reading of the GPU's processes
    processes = tuple(
        _placed(_process_from_dict(p, f"{where}: process", made), migs, f"{where}: process")
        for p in _setting(spec, "processes")
    )
    return SimGpu(
        name=str(_setting(spec, "name")),
        uuid=str(
            spec.get("uuid") or f"GPU-{crc:08x}-{index:04x}-4{crc % 4096:03x}-8000-{crc:012x}"
        ),
        pci_bus_id=str(spec.get("pci_bus_id") or f"00000000:{0x10 + index * 0x10:02X}:00.0"),
        memory_total_mib=memory_total_mib,
        readings=readings,
        processes=processes,
        fans=int(_setting(spec, "fans")),
        throttle_reasons=reasons,
        compute_mode=COMPUTE_MODES[mode],
        persistence=_flag(_setting(spec, "persistence")),
        mig=mig,
        mig_pending=None if "mig_pending" not in spec else _flag(spec["mig_pending"]),
        mig_devices=migs,
        mig_call_errors=_call_errors(_setting(spec, "mig_call_errors"), where),
        compute_capability=(int(cc[0]), int(cc[1])) if cc else None,
        serial=None
        if spec.get("serial") == "unsupported"
        else str(spec.get("serial") or f"1652{crc:09d}"[:13]),
        extra_used_by=spec.get("extra_used_by"),
        lost_after_s=spec.get("lost_after_s"),
        slow_calls={str(k): float(v) for k, v in _setting(spec, "slow_calls").items()},
        unsupported=frozenset(_setting(spec, "unsupported")),
        call_errors=_call_errors(_setting(spec, "call_errors"), where),
        texts={
            k: None if (v := spec.get(k, d)) == "unsupported" else str(v)
            for k, d in DEFAULT_TEXTS.items()
        },
        xids=_xids(_setting(spec, "xids"), where),
    )


def _xids(raw: list[dict[str, Any]], where: str) -> tuple[tuple[float, int], ...]:
    """``xids = [{at_s = 40, xid = 13}]``: critical Xid errors, in the order they happen."""
    out = []
    for spec in raw:
        if not isinstance(spec, dict) or set(spec) != {"at_s", "xid"}:
            raise UsageError(f"scenario: {where}: xids: each needs at_s and xid, nothing else")
        out.append((float(spec["at_s"]), int(spec["xid"])))
    return tuple(sorted(out))


def _call_errors(raw: dict[str, str], where: str) -> dict[str, int]:
    """``{nvmlDeviceGetX = "no_permission"}``: the NVML error code each named call answers."""
    unknown = {str(v) for v in raw.values()} - set(CALL_ERRORS)
    if unknown:
        raise UsageError(f"scenario: {where}: call_errors: unknown errors {sorted(unknown)}")
    return {str(name): CALL_ERRORS[str(error)] for name, error in raw.items()}


def _placed(proc: SimProcess, migs: tuple[SimMigDevice, ...], where: str) -> SimProcess:
    """The process with its compute instance filled in; UsageError when it names no MIG device
    of its GPU (or runs outside one on a GPU that has them)."""
    if not migs:
        if proc.gpu_instance is not None or proc.compute_instance is not None:
            raise UsageError(f"scenario: {where}: gpu_instance on a GPU without gpu_instances")
        return proc
    if proc.gpu_instance is None:
        raise UsageError(f"scenario: {where}: a process on a MIG GPU needs its gpu_instance")
    in_gi = [m for m in migs if m.gpu_instance_id == proc.gpu_instance]
    if not in_gi:
        raise UsageError(f"scenario: {where}: no gpu instance {proc.gpu_instance}")
    if proc.compute_instance is None:
        return replace(proc, compute_instance=in_gi[0].compute_instance_id)
    if all(m.compute_instance_id != proc.compute_instance for m in in_gi):
        raise UsageError(
            f"scenario: {where}: gpu instance {proc.gpu_instance} has no compute instance "
            f"{proc.compute_instance}"
        )
    return proc


def _flag(raw: Any) -> bool | None:
    """A mode switch: true/false, or "unsupported" (None)."""
    return None if raw == "unsupported" else bool(raw)


def _within(wave: Wave, lo: float, hi: float | None) -> Wave:
    """The wave kept within what the driver can report (a percentage, a size), unless the
    scenario set its own bounds: a wave of base 0 would otherwise swing below zero."""
    return replace(
        wave,
        lo=lo if wave.lo is None else wave.lo,
        hi=hi if wave.hi is None else wave.hi,
    )


def _bounded(
    raw: Any, where: str, lo: float, hi: float | None, made: dict[Any, Wave] | None = None
) -> Wave:
    """``_within(_reading(raw))``, the same Wave again for the same spec within one scenario
    (``made``): a scenario of 5,000 processes has a few hundred distinct readings, and making
    each anew held the simulated driver's first snapshot back by a third of a second."""
    if made is None:
        return _within(_reading(raw, where), lo, hi)
    try:
        key = (type(raw), tuple(sorted(raw.items())) if isinstance(raw, dict) else raw, lo, hi)
        wave = made.get(key)
    except TypeError:  # an unhashable value: made as it is, and its error raised
        return _within(_reading(raw, where), lo, hi)
    if wave is None:
        wave = made[key] = _within(_reading(raw, where), lo, hi)
    return wave


def _process_from_dict(
    spec: dict[str, Any], where: str, made: dict[Any, Wave] | None = None
) -> SimProcess:
    allowed = set(SimProcess.__dataclass_fields__)
    unknown = set(spec) - allowed
    if unknown:
        raise UsageError(f"scenario: {where}: unknown keys {sorted(unknown)}")
    if "pid" not in spec:
        raise UsageError(
            f"scenario: {where}: needs a pid (a stand-in one too when it names an actor)"
        )
    kind = spec.get("type", "compute")
    if kind not in ("compute", "graphics", "compute+graphics"):
        raise UsageError(f"scenario: {where}: type must be compute, graphics or compute+graphics")
    return SimProcess(
        pid=int(spec["pid"]),
        type=kind,
        used_memory_mib=_bounded(
            spec.get("used_memory_mib", 1024), f"{where}: used_memory_mib", 0.0, None, made
        ),
        sm_util=_bounded(spec["sm_util"], where, 0.0, 100.0, made) if "sm_util" in spec else None,
        mem_util=(
            _bounded(spec["mem_util"], where, 0.0, 100.0, made) if "mem_util" in spec else None
        ),
        name=str(spec.get("name", "python")),
        actor=spec.get("actor"),
        start_s=float(spec.get("start_s", 0.0)),
        end_s=float(spec["end_s"]) if spec.get("end_s") is not None else None,
        gpu_instance=_optional_int(spec.get("gpu_instance")),
        compute_instance=_optional_int(spec.get("compute_instance")),
    )


def _optional_int(raw: Any) -> int | None:
    return None if raw is None else int(raw)


def _fault_from_dict(spec: dict[str, Any], gpu_count: int) -> CallFault:
    unknown = set(spec) - set(CallFault.__dataclass_fields__)
    if unknown or "call" not in spec:
        raise UsageError(f"scenario: fault: needs a call; unknown keys {sorted(unknown)}")
    kind = str(spec.get("kind", "hang"))
    if kind not in FAULT_KINDS:
        raise UsageError(f"scenario: fault: kind must be one of {', '.join(FAULT_KINDS)}")
    gpu = spec.get("gpu")
    if gpu is not None and not 0 <= int(gpu) < gpu_count:
        raise UsageError(f"scenario: fault: no gpu {gpu} (the scenario has {gpu_count})")
    until = spec.get("until_s")
    return CallFault(
        call=str(spec["call"]),
        kind=kind,
        gpu=None if gpu is None else int(gpu),
        after_s=float(spec.get("after_s", 0.0)),
        until_s=None if until is None else float(until),
    )


ACTOR_ROLES = ("worker", "zombie-parent", "orphan", "stopped", "unkillable")


def _actor_from_dict(spec: dict[str, Any]) -> ActorSpec:
    unknown = set(spec) - set(ActorSpec.__dataclass_fields__)
    if unknown or "name" not in spec:
        raise UsageError(f"scenario: actor: needs a name; unknown keys {sorted(unknown)}")
    if spec.get("role", "worker") not in ACTOR_ROLES:
        raise UsageError(f"scenario: actor: role must be one of {', '.join(ACTOR_ROLES)}")
    return ActorSpec(
        name=str(spec["name"]),
        script=str(spec.get("script", "train.py")),
        args=tuple(str(a) for a in spec.get("args", [])),
        role=str(spec.get("role", "worker")),
        holds=tuple(str(h) for h in spec.get("holds", [])),
    )


SHIPPED = ("demo", "dgx", "faults", "flaky", "mig", "sick")


def load_scenario(name_or_path: str | os.PathLike[str]) -> Scenario:
    """Load a shipped scenario by name (demo, dgx, faults, flaky, mig, sick) or a TOML/JSON file.

    Any problem with a file (missing, unreadable, not text, not TOML/JSON, bad content) raises
    UsageError with one line naming the file and the reason.
    """
    # The parsers are imported here, not with the module: the driver process holds the
    # simulator for as long as it runs and parses one file, once.
    import tomllib

    if str(name_or_path) in SHIPPED:
        return Scenario.from_dict(tomllib.loads(_shipped_text(str(name_or_path))))
    path = os.fspath(name_or_path)
    where = f"scenario {clean(str(name_or_path))}"
    text = _decode(_read_file(path, where), where)
    kind = "JSON" if os.path.splitext(path)[1].lower() == ".json" else "TOML"
    try:
        if kind == "JSON":
            import json

            data = json.loads(text)
        else:
            data = tomllib.loads(text)
    except ValueError as exc:  # JSONDecodeError and TOMLDecodeError are both ValueErrors
        raise UsageError(f"{where}: not valid {kind}: {clean(str(exc))}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not {kind} settings (the top level must be an object)")
    try:
        return Scenario.from_dict(data)
    except UsageError as exc:
        raise UsageError(f"{where}: {str(exc).removeprefix('scenario: ')}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        # A value of the wrong shape (a string where a number or a table belongs, ...).
        raise UsageError(f"{where}: a value has the wrong type ({clean(str(exc))})") from None


MAX_SCENARIO_BYTES = 16 * 1024 * 1024  # scenarios are a few KiB; this is surely not one


def _shipped_text(name: str) -> str:
    """A shipped scenario's TOML, from the package's folder: importlib.resources (zipfile,
    pathlib: 1.3 MiB in the driver process) only where the package is not one (a zip)."""
    try:
        with open(
            os.path.join(os.path.dirname(__file__), "scenarios", f"{name}.toml"), encoding="utf-8"
        ) as file:
            return file.read()
    except OSError:
        from importlib import resources

        res = resources.files("gputop.sim").joinpath("scenarios", f"{name}.toml")
        return res.read_text(encoding="utf-8")


def _read_file(path: str, where: str) -> bytes:
    """The file's bytes, or UsageError saying in words why they cannot be had."""
    try:
        info = os.stat(path)  # before open(): opening a FIFO would block
        if stat.S_ISDIR(info.st_mode):
            raise UsageError(f"{where}: is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise UsageError(f"{where}: not a regular file")
        if info.st_size > MAX_SCENARIO_BYTES:
            raise UsageError(f"{where}: too large ({info.st_size} bytes) for a scenario")
        with open(path, "rb") as file:
            return file.read()
    except FileNotFoundError:
        from pathlib import PurePath  # the name as it always read (PurePath's spelling)

        # Also what a mistyped --demo NAME ends in, so the shipped names are listed.
        name, shipped = clean(str(PurePath(path))), ", ".join(SHIPPED)
        raise UsageError(f"no scenario {name!r}: no such file (shipped: {shipped})") from None
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        raise UsageError(f"{where}: {reason}") from None


def _decode(raw: bytes, where: str) -> str:
    """UTF-8 text (a UTF-8 byte-order mark is allowed), or UsageError naming the first bad byte."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        bad = raw[exc.start]
        hint = ": a UTF-16 byte-order mark" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise UsageError(
            f"{where}: not UTF-8 text (byte 0x{bad:02x} at offset {exc.start}{hint})"
        ) from None


@functools.lru_cache(maxsize=1024)
def _unit_random(seed: int) -> float:
    """``random.Random(seed).random()``, remembered: seeding a generator per read was costly.

    The seeds are new each second, so only reads within a second meet again: a few hundred on a
    box like dgx. 4,096 kept stale seconds for nothing (0.5 MiB of the demo's driver process).

    The C class random.Random is built on gives the same number for an int seed; the random
    module itself would bring sha512 and bisect into the driver process for nothing.
    """
    return Random(seed).random()
