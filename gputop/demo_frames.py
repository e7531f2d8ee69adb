"""Deterministic frames of a simulated box: snapshots of a shipped scenario on a hand-moved clock.

No real processes and no wall clock: the process rows are made up from the scenario's actors, so
every call returns the same snapshots. The UI's snapshot tests, `make screenshots` and the UI
benchmark draw these frames. It lives beside gputop.sources, not in the simulator: it needs the
driver layer and the engine's enrichment, which the simulator must not import.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gputop.engine.enrich import unattributed_memory
from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcInfo, ProcState, Snapshot
from gputop.sources import open_simulated

if TYPE_CHECKING:
    from gputop.sim.actors import ActorSpec
    from gputop.sim.scenario import Scenario

BASE_WALL_S = 1_760_000_000.0  # a fixed "now" for the pictures (shown as a time of day)
BASE_MONO_S = 10_000.0
HOSTNAME = "gpu-box-01"
USERS = ("alice", "bob", "carol", "dave")


def _actor_row_info(
    pid: int, actor: ActorSpec | None, name: str, order: int, now_wall: float
) -> ProcInfo:
    script = actor.script if actor else f"{name}_job.py"
    args = actor.args if actor else ()
    zombie = actor is not None and actor.role == "zombie-parent"
    return ProcInfo(
        pid=pid,
        create_time=now_wall - 3600 * (1 + order % 5) - 97 * order,
        user=USERS[order % len(USERS)],
        uid=1000 + order % len(USERS),
        name=name,
        cmdline=() if zombie else ("/opt/conda/bin/python", script, *args),
        status="zombie"
        if zombie
        else ("stopped" if actor and actor.role == "stopped" else "running"),
        ppid=pid - 1 if zombie else 1,
        cpu_percent=0.0 if zombie else round(12.5 + 37 * (order % 3), 1),
        host_rss_bytes=0 if zombie else (2 + order % 7) * 1024**3,
    )


def _states(actor: ActorSpec | None) -> tuple[ProcState, ...]:
    role = actor.role if actor else "worker"
    if role == "zombie-parent":
        return (ProcState.DEFUNCT, ProcState.ACTIVE)
    if role == "stopped":
        return (ProcState.STOPPED, ProcState.ACTIVE)
    return (ProcState.ACTIVE,)


def _listed_row(
    proc: GpuProcess, gpu_index: int, actor: ActorSpec | None, info: ProcInfo
) -> ProcessRow:
    used = proc.used_memory_bytes
    states = _states(actor)
    return ProcessRow(
        pid=proc.pid,
        info=info,
        states=states,
        gpu_indices=(gpu_index,),
        type=ProcessType.COMPUTE,
        used_memory_bytes=used,
        peak_memory_bytes=None if used is None else int(used * 1.04),
        sm_util_percent=proc.sm_util_percent,
        memory_util_percent=proc.memory_util_percent,
        device_files=(f"/dev/nvidia{gpu_index}", "/dev/nvidiactl"),
        parent_note=(
            f"parent {proc.pid - 1} (python) is not reaping it"
            if ProcState.DEFUNCT in states
            else None
        ),
    )


def _orphan_row(actor: ActorSpec, order: int, now_wall: float) -> ProcessRow:
    pid = 5_040_000 + order  # above Linux pid_max, like the sim's stand-in PIDs
    return ProcessRow(
        pid=pid,
        info=_actor_row_info(pid, actor, "python", order, now_wall),
        states=(ProcState.HOLDER, ProcState.ORPHAN),
        gpu_indices=tuple(int(h[6:]) for h in actor.holds if h[6:].isdigit()),
        device_files=tuple(f"/dev/{h}" for h in actor.holds),
        parent_note="its parent exited; re-parented to PID 1",
    )


def demo_rows(scenario: Scenario, snap: Snapshot) -> tuple[ProcessRow, ...]:
    """Plausible process rows for a driver-level snapshot of ``scenario`` (deterministic)."""
    actors = {a.name: a for a in scenario.actors}
    rows: list[ProcessRow] = []
    for gpu, spec in zip(snap.gpus, scenario.gpus, strict=False):
        by_pid = {p.pid: p for p in spec.processes}
        for proc in gpu.processes:
            sim_proc = by_pid.get(proc.pid)
            actor = actors.get(sim_proc.actor or "") if sim_proc else None
            name = sim_proc.name if sim_proc else "python"
            info = _actor_row_info(proc.pid, actor, name, len(rows), snap.taken_at_wall)
            rows.append(_listed_row(proc, gpu.index, actor, info))
    rows += [
        _orphan_row(a, len(rows) + i, snap.taken_at_wall)
        for i, a in enumerate(a for a in scenario.actors if a.role == "orphan")
    ]
    return tuple(rows)


def demo_frames(scenario_name: str = "demo", ticks: int = 40) -> list[Snapshot]:
    """``ticks`` one-second snapshots of a shipped scenario on a hand-moved clock."""
    from gputop import sim  # local: importing this module loads no pynvml

    scenario = sim.load_scenario(scenario_name)
    clock = sim.ManualClock(0.0)
    source = open_simulated(scenario, clock)
    frames: list[Snapshot] = []
    try:
        for t in range(ticks):
            clock.set(float(t))
            snap = source.snapshot()
            snap = replace(
                snap,
                seq=t + 1,
                taken_at_wall=BASE_WALL_S + t,
                taken_at_mono=BASE_MONO_S + t,
                system=replace(snap.system, hostname=HOSTNAME),
            )
            frames.append(
                replace(
                    snap,
                    processes=demo_rows(scenario, snap),
                    unattributed_memory_bytes=unattributed_memory(snap.gpus),
                )
            )
    finally:
        source.close()
        sim.uninstall()
    return frames
