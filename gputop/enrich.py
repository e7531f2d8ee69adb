"""Join the driver's view (NVML process lists), the OS view (psutil) and the holder scan.

The result is ``Snapshot.processes`` (one ProcessRow per GPU-related process, classified) and
``Snapshot.unattributed_memory_bytes``. :func:`classify` is the pure core.

Unattributed memory: per healthy GPU, ``memory_used_bytes`` minus the sum of the listed
processes' ``used_memory_bytes``. The driver keeps some memory for itself, so it is reported only
beyond a tolerance of ``max(256 MiB, 2 % of memory_total_bytes)``; the reported value is the whole
difference, not the excess over the tolerance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace

import psutil

from gputop.history import History
from gputop.holders import DAEMON_NAMES, HolderScan, held_by
from gputop.model import (
    GpuProcess,
    GpuSample,
    GpuState,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
)
from gputop.procs import ProcReader, pid_exists, process_group, read_proc

MiB = 1024**2
TOLERANCE_MIN_BYTES = 256 * MiB
TOLERANCE_FRACTION = 0.02

_STOPPED = frozenset({psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP})


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcFacts:
    """Everything classify() needs to know about one process."""

    listed: bool  # NVML lists a context for it
    visible: bool  # psutil can see the PID in this namespace
    status: str | None  # psutil status string
    holds_device: bool  # has a device file open or mapped
    orphaned: bool  # its original process group leader is gone and it was re-parented


def classify(facts: ProcFacts) -> tuple[ProcState, ...]:
    """The states of one GPU-related process, most important first (pure)."""
    if not facts.visible:
        return (ProcState.NAMESPACE,)
    states: list[ProcState] = []
    if facts.status == psutil.STATUS_ZOMBIE:
        states.append(ProcState.DEFUNCT)
    if facts.status in _STOPPED:
        states.append(ProcState.STOPPED)
    if facts.orphaned and (facts.listed or facts.holds_device):
        states.append(ProcState.ORPHAN)
    if facts.holds_device and not facts.listed:
        states.append(ProcState.HOLDER)
    if facts.listed:
        states.append(ProcState.ACTIVE)
    return tuple(states)


def unattributed_tolerance_bytes(gpu: GpuSample) -> int:
    """How much unlisted memory is normal (driver reservation) on this GPU."""
    total = gpu.memory_total_bytes or 0
    return max(TOLERANCE_MIN_BYTES, int(total * TOLERANCE_FRACTION))


def attributed_memory_bytes(gpu: GpuSample) -> int:
    """GPU memory the listed processes account for (unknown amounts count as 0)."""
    return sum(p.used_memory_bytes or 0 for p in gpu.processes)


def unattributed_memory(gpus: Iterable[GpuSample]) -> tuple[tuple[int, int], ...]:
    """(gpu index, bytes) for each healthy GPU whose unlisted memory exceeds the tolerance."""
    out: list[tuple[int, int]] = []
    for gpu in gpus:
        if gpu.state is not GpuState.OK or gpu.memory_used_bytes is None:
            continue
        missing = gpu.memory_used_bytes - attributed_memory_bytes(gpu)
        if missing > unattributed_tolerance_bytes(gpu):
            out.append((gpu.index, missing))
    return tuple(out)


def is_orphaned(info: ProcInfo) -> tuple[bool, str | None]:
    """Whether the process was re-parented after its job's leader died, and a note saying so.

    A heuristic: the process is not its own group leader, its group leader no longer exists, and
    its parent (init or a subreaper) is outside its group. Daemons started by systemd or a shell
    lead their own group, so they are not flagged.
    """
    if not info.visible or info.ppid is None:
        return False, None
    pgid = process_group(info.pid)
    if pgid is None or pgid == info.pid or pid_exists(pgid):
        return False, None
    if info.ppid != 1 and process_group(info.ppid) == pgid:
        return False, None
    parent = read_proc(info.ppid)
    return True, f"its job leader {pgid} has exited; adopted by {info.ppid} ({parent.name or '?'})"


def _defunct_note(info: ProcInfo) -> str:
    parent = read_proc(info.ppid) if info.ppid else None
    name = parent.name if parent is not None and parent.name else "?"
    return f"parent {info.ppid} ({name}) is not reaping it"


def _merge_type(types: set[ProcessType]) -> ProcessType | None:
    if not types:
        return None
    if len(types) == 1:
        return next(iter(types))
    return ProcessType.MIXED


def _max_or_none(values: Iterable[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _listed_by_pid(gpus: Iterable[GpuSample]) -> dict[int, list[GpuProcess]]:
    by_pid: dict[int, list[GpuProcess]] = {}
    for gpu in gpus:
        for p in gpu.processes:
            by_pid.setdefault(p.pid, []).append(p)
    return by_pid


def _is_daemon(info: ProcInfo) -> bool:
    return info.pid == os.getpid() or (info.name or "") in DAEMON_NAMES


SUSPECT_NOTE = (
    "holds no /dev/nvidia* file, so this PID may name another process than the driver's "
    "(gputop in a container sees host PIDs from the driver)"
)


def _build_row(
    info: ProcInfo,
    contexts: list[GpuProcess],
    device_files: tuple[str, ...],
    history: History | None,
    *,
    suspect: bool = False,
    gpu_by_minor: dict[int, int] | None = None,
) -> ProcessRow:
    orphaned, orphan_note = is_orphaned(info) if (contexts or device_files) else (False, None)
    facts = ProcFacts(
        listed=bool(contexts),
        visible=info.visible,
        status=info.status,
        holds_device=bool(device_files),
        orphaned=orphaned,
    )
    states = classify(facts)
    if suspect and info.visible and info.status != psutil.STATUS_ZOMBIE:
        info = replace(info, note=SUSPECT_NOTE)
    note = _defunct_note(info) if ProcState.DEFUNCT in states else orphan_note
    # One pass over the contexts (this runs for every process, every tick).
    gpus: set[int] = set()
    types: set[ProcessType] = set()
    used = sm = mem = None
    for p in contexts:
        gpus.add(p.gpu_index)
        types.add(p.type)
        if p.used_memory_bytes is not None:
            used = p.used_memory_bytes if used is None else used + p.used_memory_bytes
        if p.sm_util_percent is not None and (sm is None or p.sm_util_percent > sm):
            sm = p.sm_util_percent
        if p.memory_util_percent is not None and (mem is None or p.memory_util_percent > mem):
            mem = p.memory_util_percent
    if device_files:
        gpus |= _held_gpus(device_files, gpu_by_minor or {})
    # Not `if history`: that is len(), a lock per row; an empty History has no peaks anyway.
    peak = (
        history.process_peak_memory_bytes(info.pid, info.create_time)
        if history is not None
        else None
    )
    return ProcessRow(
        pid=info.pid,
        info=info,
        states=states,
        gpu_indices=tuple(sorted(gpus)),
        type=_merge_type(types),
        used_memory_bytes=used,
        peak_memory_bytes=_max_or_none((peak, used)),
        sm_util_percent=sm,
        memory_util_percent=mem,
        device_files=device_files,
        parent_note=note,
    )


def _held_gpus(device_files: tuple[str, ...], gpu_by_minor: dict[int, int]) -> set[int]:
    """GPUs whose /dev/nvidiaN file (N = the GPU's minor number) is among the held files."""
    found = set()
    for path in device_files:
        number = os.path.basename(path).removeprefix("nvidia")
        if number.isdigit() and int(number) in gpu_by_minor:
            found.add(gpu_by_minor[int(number)])
    return found


def process_rows(
    gpus: tuple[GpuSample, ...],
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
) -> tuple[ProcessRow, ...]:
    """One classified row per process NVML lists or that holds a device file."""
    listed = _listed_by_pid(gpus)
    held = holders.holders if holders is not None else {}
    gpu_by_minor = {g.minor_number: g.index for g in gpus if g.minor_number is not None}
    pids = set(listed) | set(held)
    infos = reader.read_many(pids) if reader is not None else _read_all(pids)
    rows: list[ProcessRow] = []
    for pid in pids:
        info = infos[pid]
        contexts = listed.get(pid, [])
        if not contexts and _is_daemon(info):
            continue  # monitors and driver daemons keep the files open by design
        files = held.get(pid, ())
        suspect = False
        if (
            contexts
            and not files
            and info.visible  # another namespace's PID: nothing to look at here
            and holders is not None
            and pid not in holders.unreadable
        ):
            # Every process with a CUDA context has the device files open. The scan may be a
            # few seconds old, so look at this one PID again before calling it suspect.
            now = held_by(pid, holders.dev_dir, holders.proc_root)
            files = now or ()
            suspect = now == ()
        rows.append(
            _build_row(info, contexts, files, history, suspect=suspect, gpu_by_minor=gpu_by_minor)
        )
    rows.sort(key=lambda r: (r.gpu_indices[0] if r.gpu_indices else 1 << 30, r.pid))
    return tuple(rows)


def _read_all(pids: Iterable[int]) -> dict[int, ProcInfo]:
    return {pid: read_proc(pid) for pid in pids}


def enrich(
    snapshot: Snapshot,
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
) -> Snapshot:
    """The snapshot with ``processes`` and ``unattributed_memory_bytes`` filled (one-shot use too).

    ``holders`` adds processes that hold a device file without a context (None: no holder rows);
    ``history`` supplies peak memory; ``reader`` keeps CPU % state between calls.
    """
    return replace(
        snapshot,
        processes=process_rows(snapshot.gpus, holders=holders, history=history, reader=reader),
        unattributed_memory_bytes=unattributed_memory(snapshot.gpus),
        holder_scan_note=holders.note if holders is not None else snapshot.holder_scan_note,
    )
