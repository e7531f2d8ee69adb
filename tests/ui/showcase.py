"""The box in the README's screenshots: fixed frames of a shared 4-GPU training server.

The GPUs' readings come from the simulated driver on showcase.toml with a hand-moved clock; the
process table is made here from :data:`PROCS` (users, commands, parents, start times), with the
states the engine's own rule (gputop.engine.verdicts.classify) gives each process. No real process
and no wall clock: every call returns the same snapshots, on any machine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from gputop.demo_frames import BASE_MONO_S, BASE_WALL_S
from gputop.engine.enrich import unattributed_memory
from gputop.engine.history import HISTORY_TICKS
from gputop.engine.model import GpuSample, ProcessRow, ProcessType, ProcInfo, Snapshot
from gputop.engine.verdicts import ProcFacts, classify
from gputop.sources import open_simulated

SCENARIO = Path(__file__).with_name("showcase.toml")
HOSTNAME = "gpu-node-07"
GiB = 1024**3
UIDS = {"alice": 1001, "bob": 1002, "carol": 1003, "dave": 1004, "erin": 1005, "frank": 1006}
PY = "/opt/conda/bin/python"
ADOPTER = "1 (systemd)"  # who adopts an orphan on this box


@dataclass(frozen=True)
class Proc:
    """What the OS would tell about one process of the box (``age_s``: its run time at the first
    frame; ``holds``: GPUs whose device files it has open without a context the driver lists)."""

    pid: int
    user: str
    argv: tuple[str, ...]
    age_s: float
    cpu: float
    rss_gib: float
    ppid: int
    name: str = "python"
    status: str = "running"
    holds: tuple[int, ...] = ()
    orphan_of: int | None = None  # the exited job leader of an adopted process


def _kernel(user: str, pid: int, ppid: int, kernel: str, age_s: float, rss: float) -> Proc:
    runtime = f"/home/{user}/.local/share/jupyter/runtime/kernel-{kernel}.json"
    return Proc(pid, user, (PY, "-m", "ipykernel_launcher", "-f", runtime), age_s, 0.3, rss, ppid)


def _trial(pid: int, lr: str, seed: int, cpu: float) -> Proc:
    argv = (PY, "train_vit.py", f"--lr={lr}", "--batch_size=256", f"--seed={seed}")
    return Proc(pid, "dave", argv, 2830.0 + pid % 7, cpu, 5.2 + (pid % 5) / 10, 53090)


_LLAMA = ("-u", "train.py", "--config", "configs/llama-7b.yaml", "--output", "runs/llama-7b-sft")
_RESNET = (PY, "-u", "train.py", "--config", "configs/resnet50.yaml", "--workers", "4")

PROCS: tuple[Proc, ...] = (
    Proc(48213, "alice", (PY, *_LLAMA), 20_460.0, 101.2, 24.6, 48201),
    Proc(48214, "alice", (PY, *_LLAMA), 20_459.0, 99.4, 24.1, 48201),
    _kernel("dave", 51877, 51790, "4e1f0c7a", 97_310.0, 3.2),
    Proc(
        30388,
        "bob",
        (
            PY,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "mistralai/Mistral-7B-Instruct-v0.2",
            "--port",
            "8000",
        ),
        278_020.0,
        38.5,
        11.4,
        30301,
    ),
    _kernel("erin", 52410, 52388, "9b27d3e5", 14_250.0, 4.7),
    _kernel("erin", 52964, 52388, "c03a61f2", 6_130.0, 2.9),
    _kernel("carol", 50731, 50702, "7d15a8b0", 44_870.0, 3.6),
    Proc(
        44902,
        "frank",
        (PY, "finetune.py", "--model", "llama-7b", "--lora-r", "16", "--batch-size", "4"),
        7_420.0,
        0.0,
        6.1,
        44870,
        status="stopped",
    ),
    _trial(53101, "0.0003", 1, 97.6),
    _trial(53102, "0.0003", 2, 96.8),
    _trial(53103, "0.0001", 1, 98.1),
    _trial(53104, "0.0001", 2, 95.9),
    _trial(53105, "0.00003", 1, 97.3),
    _trial(53106, "0.00003", 2, 96.4),
    Proc(
        45120,
        "erin",
        (PY, "eval.py", "--checkpoint", "runs/llama-7b-sft/step-4000"),
        5_210.0,
        0.0,
        1.8,
        45011,
        status="sleeping",
        holds=(3,),
    ),
    Proc(45133, "erin", (), 5_150.0, 0.0, 0.0, 45120, status="zombie"),
    *(
        Proc(
            pid,
            "carol",
            _RESNET,
            33_960.0,
            0.0,
            2.3 + (pid % 3) / 10,
            1,
            name="pt_data_worker",
            status="sleeping",
            holds=(3,),
            orphan_of=39101,
        )
        for pid in (39180, 39181, 39182, 39183)
    ),
)


def _info(proc: Proc, first_wall: float) -> ProcInfo:
    zombie = proc.status == "zombie"
    return ProcInfo(
        pid=proc.pid,
        create_time=first_wall - proc.age_s,
        user=proc.user,
        uid=UIDS[proc.user],
        name=proc.name,
        cmdline=proc.argv,
        status=proc.status,
        ppid=proc.ppid,
        cpu_percent=proc.cpu,
        host_rss_bytes=0 if zombie else int(proc.rss_gib * GiB),
    )


def _note(proc: Proc, names: dict[int, str]) -> str | None:
    # As gputop.engine.verdicts words them.
    if proc.status == "zombie":
        return f"parent {proc.ppid} ({names.get(proc.ppid, '?')}) is not reaping it"
    if proc.orphan_of is not None:
        leader = f"its job leader {proc.orphan_of} has exited too"
        return f"its parent exited; adopted by {ADOPTER}; {leader}"
    return None


def rows(
    gpus: tuple[GpuSample, ...], first_wall: float, peaks: dict[int, int]
) -> tuple[ProcessRow, ...]:
    """The process table for one frame; ``peaks`` (PID: bytes) is kept up across frames."""
    listed = {p.pid: (gpu.index, p) for gpu in gpus for p in gpu.processes}
    names = {p.pid: p.name for p in PROCS}
    out: list[ProcessRow] = []
    for proc in PROCS:
        on = listed.get(proc.pid)
        zombie = proc.status == "zombie"
        gpu_index = on[0] if on else None
        held = proc.holds if gpu_index is None else (gpu_index,)
        files = (
            ()
            if zombie
            else (*(f"/dev/nvidia{i}" for i in held), "/dev/nvidiactl", "/dev/nvidia-uvm")
        )
        states = classify(
            ProcFacts(
                listed=on is not None,
                visible=True,
                status=proc.status,
                holds_device=bool(files),
                orphaned=proc.orphan_of is not None,
            )
        )
        used = on[1].used_memory_bytes if on else None
        if used is not None:
            peaks[proc.pid] = max(used, peaks.get(proc.pid, 0))
        out.append(
            ProcessRow(
                pid=proc.pid,
                info=_info(proc, first_wall),
                states=states,
                gpu_indices=held,
                type=ProcessType.COMPUTE if on else None,
                used_memory_bytes=used,
                peak_memory_bytes=peaks.get(proc.pid),
                sm_util_percent=on[1].sm_util_percent if on else None,
                memory_util_percent=on[1].memory_util_percent if on else None,
                device_files=files,
                parent_note=_note(proc, names),
            )
        )
    return tuple(out)


def showcase_frames(ticks: int = HISTORY_TICKS) -> list[Snapshot]:
    """``ticks`` one-second snapshots of the box (the default: as many as the dashboard keeps, so
    every sparkline it draws is full)."""
    from gputop import sim  # local: importing this module loads no pynvml

    clock = sim.ManualClock(0.0)
    source = open_simulated(sim.load_scenario(SCENARIO), clock)
    frames: list[Snapshot] = []
    peaks: dict[int, int] = {}
    try:
        for t in range(ticks):
            clock.set(float(t))
            snap = source.snapshot()
            wall = BASE_WALL_S + t
            frames.append(
                replace(
                    snap,
                    seq=t + 1,
                    taken_at_wall=wall,
                    taken_at_mono=BASE_MONO_S + t,
                    duration_s=0.0,
                    system=replace(snap.system, hostname=HOSTNAME),
                    processes=rows(snap.gpus, BASE_WALL_S, peaks),
                    unattributed_memory_bytes=unattributed_memory(snap.gpus),
                    holder_scan_note=None,
                    hidden_pids_note=None,
                )
            )
    finally:
        source.close()
        sim.uninstall()
    return frames
