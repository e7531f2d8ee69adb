"""The GPU health verdict (gputop.engine.gpu_health), from readings the simulated driver gives
through the real pynvml: every recovery action, every Xid class, the memory flags, what an
unsupported reading does (nothing), and what the readings cost a tick."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gputop import sim
from gputop.engine import gpu_health
from gputop.engine.gpu_health import Verdict, assess, health_lines, needs_action
from gputop.engine.model import GpuSample, GpuState, ProcState, XidEvent
from gputop.engine.nvml.health import HealthReader
from tests.commands.helpers import row
from tests.fakes import lost_gpu, make_gpu, make_snapshot


def one_gpu(**gpu: Any) -> dict[str, Any]:
    return {"name": "health", "gpu": [{"name": "NVIDIA H100 80GB HBM3", **gpu}]}


def first_gpu(sim_source: Any, **gpu: Any) -> GpuSample:
    source, _ = sim_source(one_gpu(**gpu))
    return source.snapshot().gpus[0]


@pytest.mark.parametrize(
    ("action", "verdict", "evidence"),
    [
        (0, Verdict.OK, None),
        (1, Verdict.RESET, "recovery: GPU reset"),
        (2, Verdict.REBOOT, "recovery: node reboot"),
        (3, Verdict.DEGRADED, "recovery: drain P2P"),
        (4, Verdict.RESET, "recovery: drain and reset"),
        (5, Verdict.DEGRADED, "recovery: recover IMEX domain"),
        (6, Verdict.RESET, "recovery: bus reset"),
        (7, Verdict.REBOOT, "recovery: system reboot"),
        (42, Verdict.DEGRADED, "recovery: 42"),  # newer than gputop: something, not nothing
    ],
)
def test_every_recovery_action(
    sim_source: Any, action: int, verdict: Verdict, evidence: str | None
) -> None:
    gpu = first_gpu(sim_source, recovery_action=action)
    assert gpu.recovery_action == action
    health = assess(gpu)
    assert health.verdict is verdict
    if evidence is None:
        assert health.reasons == ()
    else:
        assert [r.evidence for r in health.reasons] == [evidence]
        assert health.reasons[0].source == "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"
    if verdict is Verdict.RESET:
        assert "nvidia-smi --gpu-reset -i 0" in health.reasons[0].advice or action == 6


@pytest.mark.parametrize(
    ("xid", "verdict", "words"),
    [
        (13, Verdict.OK, "application"),
        (31, Verdict.OK, "application"),
        (43, Verdict.OK, "application"),
        (48, Verdict.RESET, "memory"),
        (63, Verdict.RESET, "memory"),
        (64, Verdict.RESET, "memory"),
        (92, Verdict.DEGRADED, "memory"),
        (94, Verdict.DEGRADED, "memory"),
        (95, Verdict.RESET, "memory"),
        (74, Verdict.RESET, "NVLink"),
        (79, Verdict.REBOOT, "fell off the bus"),
        (119, Verdict.RESET, "GSP firmware"),
        (120, Verdict.RESET, "GSP firmware"),
        (154, Verdict.OK, "does not classify"),
    ],
)
def test_every_xid_class(
    sim_source: Any, sim_clock: sim.ManualClock, xid: int, verdict: Verdict, words: str
) -> None:
    source, _ = sim_source(one_gpu(xids=[{"at_s": 5, "xid": xid}, {"at_s": 6, "xid": xid}]))
    before = source.snapshot().gpus[0]
    assert before.recent_xids == () and assess(before).verdict is Verdict.OK
    sim_clock.set(10.0)
    gpu = source.snapshot().gpus[0]
    assert [e.xid for e in gpu.recent_xids or ()] == [xid, xid]
    health = assess(gpu)
    assert health.verdict is verdict
    (reason,) = health.reasons  # one reason for the two events
    assert reason.evidence == f"Xid {xid} x2"
    assert words in reason.meaning and reason.source.startswith("nvmlEventSetWait_v2")
    assert reason.meaning.startswith(gpu_health.xid_text(xid))  # dcgm-exporter's words


def test_xid_texts_are_dcgm_exporters() -> None:
    assert gpu_health.xid_text(79) == "Xid 79 (GPU has fallen off the bus)"
    assert gpu_health.xid_text(100_000) == "Xid 100000"


def test_an_xid_counts_for_an_hour(
    sim_source: Any, sim_clock: sim.ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, _ = sim_source(one_gpu(xids=[{"at_s": 1, "xid": 79}]))
    sim_clock.set(2.0)
    assert assess(source.snapshot().gpus[0]).verdict is Verdict.REBOOT
    monkeypatch.setattr(HealthReader, "RECENT_S", -1.0)  # as if told of it over an hour ago
    gpu = source.snapshot().gpus[0]
    assert gpu.recent_xids == ()
    assert assess(gpu).verdict is Verdict.OK


@pytest.mark.parametrize(
    ("readings", "verdict", "evidence"),
    [
        ({"unrepairable_memory": 1}, Verdict.REPLACE, "unrepairable memory"),
        ({"remapped_rows_failure": 1}, Verdict.REPLACE, "row remap failed"),
        ({"remapped_rows_pending": 1}, Verdict.RESET, "row remap pending"),
        ({"retired_pages_pending": 1}, Verdict.RESET, "page retirement pending"),
        ({"ecc_uncorrected": 3}, Verdict.DEGRADED, "3 uncorrected ECC"),
        ({"unrepairable_memory": 0}, Verdict.OK, None),
    ],
)
def test_memory_flags(
    sim_source: Any, readings: dict[str, int], verdict: Verdict, evidence: str | None
) -> None:
    health = assess(first_gpu(sim_source, **readings))
    assert health.verdict is verdict
    assert [r.evidence for r in health.reasons] == ([evidence] if evidence else [])


def test_the_worst_reason_decides_and_comes_first(sim_source: Any) -> None:
    gpu = first_gpu(sim_source, ecc_uncorrected=1, remapped_rows_pending=1, remapped_rows_failure=1)
    health = assess(gpu)
    assert health.verdict is Verdict.REPLACE
    assert [r.verdict for r in health.reasons] == [Verdict.REPLACE, Verdict.RESET, Verdict.DEGRADED]
    assert health.tag == "replace: row remap failed"


NOTHING = {
    "recovery_action": "unsupported",
    "ecc_uncorrected": "unsupported",
    "retired_pages_pending": "unsupported",
    "unsupported": ["nvmlDeviceGetRemappedRows", "nvmlDeviceRegisterEvents"],
}


def test_nothing_read_is_unknown_never_ok(sim_source: Any) -> None:
    gpu = first_gpu(sim_source, **NOTHING)
    assert gpu.recovery_action is None and gpu.remapped_rows_pending is None
    assert gpu.recent_xids is None and gpu.unrepairable_memory is None
    assert assess(gpu).verdict is Verdict.UNKNOWN
    assert health_lines(make_snapshot(gpus=(gpu,))) == []


def test_an_unsupported_reading_never_makes_a_gpu_sick(sim_source: Any) -> None:
    # One reading is enough for a verdict; the unsupported ones add nothing to it.
    gpu = first_gpu(sim_source, **{**NOTHING, "recovery_action": 0})
    assert assess(gpu).verdict is Verdict.OK


def test_lost_and_silent_gpus() -> None:
    health = assess(lost_gpu(1))
    assert health.verdict is Verdict.REBOOT
    assert health.reasons[0].source == "NVML_ERROR_GPU_IS_LOST"
    silent = GpuSample(index=2, state=GpuState.NOT_RESPONDING, recovery_action=1)
    assert assess(silent).verdict is Verdict.UNKNOWN  # no reading of this tick: no evidence


def test_a_lost_gpu_in_the_simulator(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source(one_gpu(lost_after_s=3))
    sim_clock.set(4.0)
    assert assess(source.snapshot().gpus[0]).verdict is Verdict.REBOOT


def test_a_hardware_slowdown_counts_once_held() -> None:
    gpu = make_gpu(0, recovery_action=0)
    brief = replace(gpu, slowdowns_held_s=(("hw_thermal_slowdown", 5.0),))
    assert assess(brief).verdict is Verdict.OK
    held = replace(gpu, slowdowns_held_s=(("hw_thermal_slowdown", 75.0),))
    health = assess(held)
    assert health.verdict is Verdict.DEGRADED
    assert health.tag == "degraded: hw_thermal_slowdown for 75 s"


def test_the_reader_times_hardware_slowdowns(sim_source: Any) -> None:
    source, _ = sim_source(one_gpu(throttle_reasons=["hw_power_brake_slowdown", "sw_power_cap"]))
    first = source.snapshot().gpus[0].slowdowns_held_s
    second = source.snapshot().gpus[0].slowdowns_held_s
    assert first is not None and second is not None
    assert [r for r, _ in second] == ["hw_power_brake_slowdown"]  # sw_power_cap is normal
    assert second[0][1] >= first[0][1] >= 0.0
    none = first_gpu(sim_source, unsupported=["nvmlDeviceGetCurrentClocksEventReasons"])
    assert none.slowdowns_held_s is None


def test_the_readings_cost_one_call_a_tick(sim_source: Any) -> None:
    """Xid events: one wait a tick for all GPUs; the memory flags: 3 calls a GPU every EVERY
    ticks; the recovery action rides in the memory temperature's field-value call."""
    source, lib = sim_source({"name": "cost", "gpu": [{"name": "NVIDIA H100", "count": 4}]})
    ticks = HealthReader.EVERY + 1
    for _ in range(ticks):
        snap = source.snapshot()
    assert lib.calls["nvmlDeviceRegisterEvents"] == 4
    assert lib.calls["nvmlEventSetWait_v2"] == ticks  # none waiting: one call says so
    assert lib.calls["nvmlDeviceGetRemappedRows"] == 4 * 2  # the first tick and the 31st
    assert lib.calls["nvmlDeviceGetRetiredPagesPendingStatus"] == 4 * 2
    assert lib.calls["nvmlDeviceGetUnrepairableMemoryFlag_v1"] == 4 * 2
    assert lib.calls["nvmlDeviceGetFieldValues"] == 4 * ticks  # as before: temperature's call
    assert all(g.recovery_action == 0 for g in snap.gpus)


def test_doctor_lines_give_the_safe_sequence() -> None:
    reset = make_gpu(2, recovery_action=1, remapped_rows_pending=True)
    reboot = make_gpu(3, recent_xids=(XidEvent(xid=79, at_wall=1.0),))
    replace_ = make_gpu(4, unrepairable_memory=True)
    fine = make_gpu(0, recovery_action=0)
    snap = replace(
        make_snapshot(gpus=(fine, reset, reboot, replace_)),
        processes=(
            row(4141, (2,), name="python3", states=(ProcState.HOLDER,)),
            row(4242, (0,)),
        ),
    )
    lines = health_lines(snap)
    text = "\n".join(lines)
    assert "GPU 0" not in text  # ok: nothing to say
    assert "GPU 2 (NVIDIA A100-SXM4-80GB): RESET NEEDED" in lines
    assert "1. still on GPU 2: PID 4141 (python3, holder)" in text
    assert "2. then, as root: nvidia-smi --gpu-reset -i 2 (cost:" in text
    assert "or reboot (cost: every process on this machine stops" in text
    assert "GPU 3 (NVIDIA A100-SXM4-80GB): REBOOT NEEDED" in lines
    assert "Xid 79 (GPU has fallen off the bus)" in text
    assert "no process of this PID namespace holds GPU 3" in text
    assert "GPU 4 (NVIDIA A100-SXM4-80GB): REPLACE" in lines
    assert "dcgmi diag -r 3" in text
    assert needs_action(snap)
    assert not needs_action(
        make_snapshot(gpus=(fine, make_gpu(1, ecc_errors_uncorrected_volatile=2)))
    )
