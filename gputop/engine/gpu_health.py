"""THE GPU health verdict: what the driver says about a GPU -> ok / degraded / reset needed /
reboot needed / replace, with the evidence, what it means and what to do.

Every reason names what was read. A reading the driver does not give (None) is no evidence
either way: it never makes a GPU sick, and a GPU of which none of the readings below could be read
is ``unknown``, never ``ok``. The verdict is the worst of its reasons'.

The table (evidence, what was read -> verdict: advice):

* GPU lost (NVML_ERROR_GPU_IS_LOST) -> reboot needed: reboot; if it recurs, check power,
  seating, cooling.
* Recovery action (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, nvmlDeviceGpuRecoveryAction_t):
  0 none -> ok; 1 GPU reset, 4 drain and reset, 6 bus reset -> reset needed; 2 node reboot,
  7 system reboot -> reboot needed; 3 drain P2P, 5 recover IMEX domain -> degraded (stop the
  jobs using peer-to-peer / the IMEX domain, start them again); any newer value -> degraded.
* Unrepairable memory (nvmlDeviceGetUnrepairableMemoryFlag_v1) -> replace: drain, run field
  diagnostics (dcgmi diag -r 3), RMA.
* Remapped rows, failure (nvmlDeviceGetRemappedRows) -> replace: as above.
* Remapped rows, pending; retired pages pending (nvmlDeviceGetRetiredPagesPendingStatus, before
  Ampere) -> reset needed: reset when its work is done; running work is unaffected.
* Uncorrected ECC errors since the driver loaded (volatile) > 0 -> degraded.
* Xid 13, 31, 43 (application) -> ok, with a note: fix or restart the application.
* Xid 48 (double-bit ECC), 63 (row remapping / page retirement recorded), 64 (recording it
  failed; if it recurs: RMA), 95 (uncontained ECC) -> reset needed.
* Xid 92 (high single-bit ECC rate), 94 (contained ECC: restart the application) -> degraded.
* Xid 74 (NVLink) -> reset needed; if it recurs, have the NVLink checked.
* Xid 79 (fell off the bus) -> reboot needed; if it recurs, check power, seating, cooling.
* Xid 119, 120 (GSP firmware timeout, error) -> reset needed; if that fails or recurs: reboot.
* Any other Xid -> ok, with a note: look it up in NVIDIA's Xid catalogue.
* A hardware slowdown (hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown) held
  unbroken for 60 s or more -> degraded: check cooling, airflow, the power supply.

An Xid counts for an hour after the driver told of it (NVML keeps no history: gputop sees only
those since it started, so ``--once`` sees none; the flags above keep the lasting state).

Sources:

* NVIDIA, "Xid Errors" and its catalogue (https://docs.nvidia.com/deploy/xid-errors/, "Analyzing
  Xid Errors with the Xid Catalog": each Xid's resolution bucket, RESTART_APP, RESET_GPU,
  RESTART_BM, WORKFLOW_XID_48, CONTACT_SUPPORT ...). Xid texts: dcgm-exporter's (gputop.dcgm).
* NVIDIA, "NVIDIA A100 GPU Memory Error Management" (https://docs.nvidia.com/deploy/a100-gpu-mem-
  error-mgmt/): row remapping, its pending and failure flags, the recovery action flag and what
  each value asks of the user; contained (94) and uncontained (95) errors.
* NVIDIA, "Dynamic Page Retirement" (https://docs.nvidia.com/deploy/dynamic-page-retirement/):
  retired pages pending, Xid 48/63/64 before Ampere.
* NVML API reference (https://docs.nvidia.com/deploy/nvml-api/): nvmlDeviceGetRemappedRows,
  nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetUnrepairableMemoryFlag_v1,
  NVML_FI_DEV_GET_GPU_RECOVERY_ACTION and nvmlDeviceGpuRecoveryAction_t, clock event reasons.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from gputop.dcgm import XID_UNKNOWN, xid_message
from gputop.engine.model import GpuSample, GpuState, ProcessRow, Snapshot


class Verdict(StrEnum):
    """One GPU's health, from the evidence (worst last, but UNKNOWN: nothing could be read)."""

    OK = "ok"
    DEGRADED = "degraded"
    RESET = "reset needed"
    REBOOT = "reboot needed"
    REPLACE = "replace"
    UNKNOWN = "unknown"


_RANK = {
    Verdict.UNKNOWN: -1,
    Verdict.OK: 0,
    Verdict.DEGRADED: 1,
    Verdict.RESET: 2,
    Verdict.REBOOT: 3,
    Verdict.REPLACE: 4,
}

# Verdicts that kill cannot fix: doctor exits non-zero for them (see needs_action).
ACTION_NEEDED = frozenset({Verdict.RESET, Verdict.REBOOT, Verdict.REPLACE})

PERSISTENT_SLOWDOWN_S = 60.0  # a hardware slowdown held this long is more than a passing spike


@dataclass(frozen=True, slots=True)
class Reason:
    """One piece of evidence: what was read, the verdict it gives, what it means, what to do."""

    verdict: Verdict
    evidence: str  # short, for a tag: "Xid 79", "recovery: GPU reset"
    source: str  # what was read: an NVML call, field or event
    meaning: str
    advice: str


@dataclass(frozen=True, slots=True)
class GpuHealth:
    """A GPU's verdict and its reasons, the worst first."""

    index: int
    verdict: Verdict
    reasons: tuple[Reason, ...] = ()

    @property
    def tag(self) -> str:
        """``reset needed: Xid 79`` (``+N`` for more reasons that are as bad)."""
        worst = [r for r in self.reasons if r.verdict is self.verdict]
        if not worst:
            return self.verdict.value
        more = f" +{len(worst) - 1}" if len(worst) > 1 else ""
        return f"{self.verdict.value}: {worst[0].evidence}{more}"


# -- the table ----------------------------------------------------------------------------------
_RESET_CMD = "nvidia-smi --gpu-reset -i {index}"
_RMA = (
    "take it out of use (drain the node, or CUDA_VISIBLE_DEVICES), run NVIDIA's field "
    "diagnostics (dcgmi diag -r 3) and contact the vendor for a replacement (RMA)"
)
_REBOOT = "reboot the machine when its work is saved; if it recurs, check power, seating, cooling"

# nvmlDeviceGpuRecoveryAction_t -> (name, verdict, meaning, advice)
_RECOVERY: dict[int, tuple[str, Verdict, str, str]] = {
    1: (
        "GPU reset",
        Verdict.RESET,
        "the GPU hit a fault that only a reset clears",
        "stop every process on it, then " + _RESET_CMD,
    ),
    2: (
        "node reboot",
        Verdict.REBOOT,
        "the fault may have left the OS in an inconsistent state",
        "reboot the machine",
    ),
    3: (
        "drain P2P",
        Verdict.DEGRADED,
        "peer-to-peer (NVLink) traffic must stop before the GPU recovers",
        "stop the jobs using peer-to-peer on this GPU and start them again",
    ),
    4: (
        "drain and reset",
        Verdict.RESET,
        "the GPU keeps running its work but needs a reset once drained",
        "schedule no new work on it, let the running work finish, then " + _RESET_CMD,
    ),
    5: (
        "recover IMEX domain",
        Verdict.DEGRADED,
        "the multi-node NVLink (IMEX) domain needs recovering",
        "stop the jobs of the IMEX domain and recover it (restart its IMEX daemons)",
    ),
    6: (
        "bus reset",
        Verdict.RESET,
        "the GPU's PCIe bus needs a reset",
        "stop every process on it, then reset its PCIe bus (a reboot does it too)",
    ),
    7: (
        "system reboot",
        Verdict.REBOOT,
        "the driver asks for the whole system to be rebooted",
        "reboot the machine",
    ),
}


@dataclass(frozen=True, slots=True)
class XidClass:
    """What an Xid of one class means and asks for."""

    name: str
    verdict: Verdict
    meaning: str
    advice: str


_APPLICATION = XidClass(
    "application",
    Verdict.OK,
    "an application's fault (a bad address, an illegal instruction, a stopped channel); "
    "the GPU itself is fine",
    "fix or restart the application that crashed",
)
XID_CLASSES: dict[int, XidClass] = {
    13: _APPLICATION,
    31: _APPLICATION,
    43: _APPLICATION,
    48: XidClass(
        "memory",
        Verdict.RESET,
        "an uncorrectable (double-bit) memory error: the applications using that memory died",
        "stop the GPU's work, then reset it (" + _RESET_CMD + ") to remap or retire the row",
    ),
    63: XidClass(
        "memory",
        Verdict.RESET,
        "a memory row was marked for remapping (a page for retirement): active after a reset",
        "reset the GPU when its work is done (" + _RESET_CMD + ")",
    ),
    64: XidClass(
        "memory",
        Verdict.RESET,
        "recording a row remapping (page retirement) failed",
        "reset the GPU (" + _RESET_CMD + "); if it recurs, " + _RMA,
    ),
    92: XidClass(
        "memory",
        Verdict.DEGRADED,
        "a high rate of corrected (single-bit) memory errors: the memory is wearing",
        "watch its remapped rows; plan a replacement if it keeps coming",
    ),
    94: XidClass(
        "memory",
        Verdict.DEGRADED,
        "a contained uncorrectable memory error: only the application that hit it died",
        "restart that application; reset the GPU when convenient to remap the row",
    ),
    95: XidClass(
        "memory",
        Verdict.RESET,
        "an uncontained uncorrectable memory error: every application on the GPU is affected",
        "stop every process on it, then " + _RESET_CMD,
    ),
    74: XidClass(
        "NVLink",
        Verdict.RESET,
        "an NVLink error: the link to a peer GPU or NVSwitch failed",
        "stop the GPU's work, then " + _RESET_CMD + "; if it recurs, have the NVLink checked",
    ),
    79: XidClass(
        "fell off the bus",
        Verdict.REBOOT,
        "the GPU fell off the PCIe bus: the driver can no longer reach it",
        _REBOOT,
    ),
    119: XidClass(
        "GSP firmware",
        Verdict.RESET,
        "the GPU's GSP firmware did not answer the driver in time",
        "stop the GPU's work, then " + _RESET_CMD + "; if that fails or it recurs, reboot",
    ),
    120: XidClass(
        "GSP firmware",
        Verdict.RESET,
        "the GPU's GSP firmware reported an error",
        "stop the GPU's work, then " + _RESET_CMD + "; if that fails or it recurs, reboot",
    ),
}

_SLOWDOWNS = {
    "hw_slowdown": "the hardware slowed its clocks (too hot, or a power problem)",
    "hw_thermal_slowdown": "the GPU is too hot: the hardware slowed its clocks",
    "hw_power_brake_slowdown": "an external power brake (the power supply) slowed its clocks",
}


def xid_text(xid: int) -> str:
    """``Xid 79 (GPU has fallen off the bus)``: the code with dcgm-exporter's text."""
    message = xid_message(xid)
    return f"Xid {xid}" if message == XID_UNKNOWN else f"Xid {xid} ({message})"


# -- the verdict --------------------------------------------------------------------------------
def assess(gpu: GpuSample) -> GpuHealth:
    """The GPU's verdict from its sample alone."""
    if gpu.state is GpuState.LOST:
        reason = Reason(
            Verdict.REBOOT,
            "GPU lost",
            "NVML_ERROR_GPU_IS_LOST",
            "the GPU fell off the bus: the driver can no longer reach it",
            _REBOOT,
        )
        return GpuHealth(gpu.index, Verdict.REBOOT, (reason,))
    if gpu.state is not GpuState.OK:
        return GpuHealth(gpu.index, Verdict.UNKNOWN)  # no reading: no evidence either way
    readings = (
        gpu.recovery_action,
        gpu.unrepairable_memory,
        gpu.remapped_rows_pending,
        gpu.remapped_rows_failure,
        gpu.retired_pages_pending,
        gpu.ecc_errors_uncorrected_volatile,
        gpu.recent_xids,
    )
    if all(r is None for r in readings):
        return GpuHealth(gpu.index, Verdict.UNKNOWN)
    reasons = [*_flag_reasons(gpu), *_xid_reasons(gpu), *_slowdown_reasons(gpu)]
    reasons.sort(key=lambda r: -_RANK[r.verdict])
    verdict = reasons[0].verdict if reasons else Verdict.OK
    return GpuHealth(gpu.index, verdict, tuple(reasons))


def _flag_reasons(gpu: GpuSample) -> list[Reason]:
    reasons: list[Reason] = []
    index = gpu.index
    action = gpu.recovery_action
    if action:  # 0: none needed; None: not read
        name, verdict, meaning, advice = _RECOVERY.get(
            action,
            (
                str(action),
                Verdict.DEGRADED,
                "a recovery action newer than gputop",
                "see nvidia-smi -q (GPU Recovery Action)",
            ),
        )
        reasons.append(
            Reason(
                verdict,
                f"recovery: {name}",
                "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION",
                f"the driver asks for: {name} ({meaning})",
                advice.format(index=index),
            )
        )
    if gpu.unrepairable_memory:
        reasons.append(
            Reason(
                Verdict.REPLACE,
                "unrepairable memory",
                "nvmlDeviceGetUnrepairableMemoryFlag_v1",
                "the GPU has memory errors it can no longer repair",
                _RMA,
            )
        )
    if gpu.remapped_rows_failure:
        reasons.append(
            Reason(
                Verdict.REPLACE,
                "row remap failed",
                "nvmlDeviceGetRemappedRows (failure)",
                "a memory row could not be remapped: no spare rows left in its bank",
                _RMA,
            )
        )
    for pending, short, what, source in (
        (gpu.remapped_rows_pending, "row remap", "row remapping", "nvmlDeviceGetRemappedRows"),
        (
            gpu.retired_pages_pending,
            "page retirement",
            "page retirement",
            "nvmlDeviceGetRetiredPagesPendingStatus",
        ),
    ):
        if pending:
            reasons.append(
                Reason(
                    Verdict.RESET,
                    f"{short} pending",
                    source,
                    f"a {what} waits for the next GPU reset; running work is unaffected",
                    f"reset the GPU when its work is done ({_RESET_CMD.format(index=index)})",
                )
            )
    errors = gpu.ecc_errors_uncorrected_volatile
    if errors:
        reasons.append(
            Reason(
                Verdict.DEGRADED,
                f"{errors} uncorrected ECC",
                "nvmlDeviceGetTotalEccErrors (uncorrected, volatile)",
                "uncorrectable memory errors since the driver loaded: the work that hit them died",
                "watch its remapped rows or retired pages; a reset or reboot clears the count",
            )
        )
    return reasons


def _xid_reasons(gpu: GpuSample) -> list[Reason]:
    counts = Counter(event.xid for event in gpu.recent_xids or ())
    reasons = []
    for xid, count in counts.items():
        known = XID_CLASSES.get(xid)
        cls = known or XidClass(
            "other",
            Verdict.OK,
            "an Xid gputop does not classify",
            "look it up in NVIDIA's Xid catalogue (https://docs.nvidia.com/deploy/xid-errors/)",
        )
        times = f" x{count}" if count > 1 else ""
        reasons.append(
            Reason(
                cls.verdict,
                f"Xid {xid}{times}",
                "nvmlEventSetWait_v2 (critical Xid event)",
                f"{xid_text(xid)}: {cls.name}: {cls.meaning}",
                cls.advice.format(index=gpu.index),
            )
        )
    return reasons


def _slowdown_reasons(gpu: GpuSample) -> list[Reason]:
    return [
        Reason(
            Verdict.DEGRADED,
            f"{reason} for {held:.0f} s",
            "nvmlDeviceGetCurrentClocksEventReasons",
            _SLOWDOWNS.get(reason, reason),
            "check its cooling (fans, airflow, inlet temperature) and power supply",
        )
        for reason, held in gpu.slowdowns_held_s or ()
        if held >= PERSISTENT_SLOWDOWN_S
    ]


# -- for doctor -----------------------------------------------------------------------------------
def assess_all(snapshot: Snapshot) -> tuple[GpuHealth, ...]:
    """Every GPU's verdict, in GPU order."""
    return tuple(assess(gpu) for gpu in snapshot.gpus)


def needs_action(snapshot: Snapshot) -> bool:
    """Doctor's exit rule: True (exit non-zero) when a GPU needs a reset, a reboot or replacing:
    what no kill can fix. Degraded, ok and unknown GPUs alone leave the exit status as it is."""
    return any(h.verdict in ACTION_NEEDED for h in assess_all(snapshot))


def holders_of(snapshot: Snapshot, index: int) -> list[ProcessRow]:
    """The processes that still use or hold GPU ``index`` (a reset fails while any does)."""
    return [row for row in snapshot.processes if index in row.gpu_indices]


def health_lines(snapshot: Snapshot) -> list[str]:
    """Doctor's GPU health section: for each GPU not ``ok`` (nor ``unknown``), its verdict, the
    evidence, and the safe sequence with what each step costs. Empty when every GPU is fine."""
    lines: list[str] = []
    for health in assess_all(snapshot):
        if health.verdict in (Verdict.OK, Verdict.UNKNOWN):
            continue
        gpu = snapshot.gpu(health.index)
        name = f" ({gpu.name})" if gpu is not None and gpu.name else ""
        lines.append(f"GPU {health.index}{name}: {health.verdict.value.upper()}")
        for reason in health.reasons:
            if reason.verdict is Verdict.OK:
                lines.append(f"  note: {reason.evidence}: {reason.meaning} [{reason.source}]")
                continue
            lines.append(f"  {reason.evidence}: {reason.meaning} [{reason.source}]")
            lines.append(f"    what to do: {reason.advice}")
        lines += [f"  {line}" for line in _sequence(snapshot, health)]
    return lines


def _sequence(snapshot: Snapshot, health: GpuHealth) -> list[str]:
    """The safe order of steps for a GPU whose verdict asks for action, with their costs."""
    index = health.index
    holders = holders_of(snapshot, index)
    named = ", ".join(
        f"PID {row.pid} ({row.info.name or '?'}, {row.state.value})" for row in holders[:8]
    )
    if len(holders) > 8:
        named += f", and {len(holders) - 8} more"
    stop = (
        f"1. still on GPU {index}: {named}: stop them (save their work first; a process in "
        "state D, unkillable, ends only when its driver call returns or at the reset/reboot)"
        if holders
        else f"1. no process of this PID namespace holds GPU {index} (others may: containers)"
    )
    reset = (
        f"2. then, as root: {_RESET_CMD.format(index=index)} (cost: every context on GPU {index} "
        "ends; seconds; fails while any process holds it, nvidia-persistenced included; on "
        "NVLink/NVSwitch boards all GPUs of the NVLink domain may need resetting together)"
    )
    reboot = "reboot (cost: every process on this machine stops; minutes)"
    if health.verdict is Verdict.RESET:
        return [stop, reset, "or " + reboot]
    if health.verdict is Verdict.REBOOT:
        return [stop, "2. " + reboot]
    if health.verdict is Verdict.REPLACE:
        return [stop, f"2. {_RMA}"]
    return []  # degraded: each reason's advice says it
