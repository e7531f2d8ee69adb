"""Snapshots with enriched process rows, built from tests/fakes.py."""

from __future__ import annotations

from dataclasses import replace

from gputop.engine.model import (
    GpuProcess,
    GpuSample,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
)
from tests.fakes import GiB, make_gpu, make_snapshot

ESC = "\x1b"


def row(
    pid: int,
    gpus: tuple[int, ...],
    *,
    user: str | None = "alice",
    name: str | None = "python",
    cmdline: tuple[str, ...] = ("python", "train.py"),
    memory: int | None = 18 * GiB,
    states: tuple[ProcState, ...] = (ProcState.ACTIVE,),
) -> ProcessRow:
    """One enriched process row."""
    return ProcessRow(
        pid=pid,
        info=ProcInfo(pid=pid, user=user, name=name, cmdline=cmdline, create_time=1.5),
        states=states,
        gpu_indices=gpus,
        type=ProcessType.COMPUTE,
        used_memory_bytes=memory,
    )


def nvml_procs(index: int, *pids_mib: tuple[int, int]) -> tuple[GpuProcess, ...]:
    """NVML's per-GPU process list: (pid, MiB) pairs."""
    return tuple(
        GpuProcess(
            pid=pid, gpu_index=index, type=ProcessType.COMPUTE, used_memory_bytes=mib * 1024**2
        )
        for pid, mib in pids_mib
    )


def enriched_snapshot(*, simulated: bool = False) -> Snapshot:
    """Two GPUs: a DDP job over both, a server on 1, a stuck holder on 1."""
    gpu0 = make_gpu(0, processes=nvml_procs(0, (1001, 20480)))
    gpu1 = make_gpu(1, processes=nvml_procs(1, (1001, 10240), (2002, 4096)))
    snap = make_snapshot(gpus=(gpu0, gpu1))
    rows = (
        row(1001, (0, 1), memory=30 * GiB),
        row(
            2002, (1,), user="bob", name="serve", cmdline=("serve", "--port", "80"), memory=4 * GiB
        ),
        row(3003, (1,), user="carol", name="dataloader", memory=None, states=(ProcState.HOLDER,)),
    )
    system = replace(snap.system, simulated=simulated)
    return replace(snap, processes=rows, system=system, unattributed_memory_bytes=((1, 5 * GiB),))


def single_gpu_snapshot(gpu: GpuSample, **changes: object) -> Snapshot:
    """A snapshot of just this GPU."""
    return replace(make_snapshot(gpus=(gpu,)), **changes)  # type: ignore[arg-type]


def gpu_lines(text: str) -> list[str]:
    """The output without its header line."""
    return text.splitlines()[1:]
