"""Join the driver's view (NVML process lists), the OS view (psutil) and the holder scan.

The result is ``Snapshot.processes`` (one ProcessRow per GPU-related process, classified) and
``Snapshot.unattributed_memory_bytes``. :func:`classify` is the pure core.

A process is called stuck only from what was read: a holder of a GPU whose process list is not
known (lost, not responding, or the list call failed) is not evidence of anything.

Unattributed memory: per healthy GPU whose process list was read, ``memory_used_bytes`` minus
the sum of the listed processes' ``used_memory_bytes``. The driver keeps some memory for itself,
so it is reported only beyond a tolerance of ``max(256 MiB, 2 % of memory_total_bytes)``; the
reported value is the whole difference, not the excess over the tolerance.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from itertools import count
from operator import attrgetter

import psutil

from gputop.engine.containers import hidden_pids_note, own_container
from gputop.engine.history import History
from gputop.engine.holders import DAEMON_NAMES, HolderScan, held_by
from gputop.engine.maker import slot_maker
from gputop.engine.model import (
    Container,
    GpuProcess,
    GpuSample,
    GpuState,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
    made_anew,
)
from gputop.engine.ourselves import is_ourselves
from gputop.engine.pidns import sees_driver_pids
from gputop.engine.procs import (
    ProcReader,
    is_namespace_init,
    is_pending,
    not_visible,
    process_group,
    read_proc,
    session,
)
from gputop.units import MiB

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
    orphaned: bool  # its parent exited and init or a subreaper adopted it (is_orphaned)
    holds_lost_gpu: bool = False  # one of the files it holds is a lost GPU's
    # One of the files it holds is of a GPU whose process list could not be read.
    holds_unlisted_gpu: bool = False


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
        # Not listed where no list could be read is no evidence: its users are not known stuck.
        if facts.holds_lost_gpu:
            states.append(ProcState.ON_LOST_GPU)
        elif facts.holds_unlisted_gpu:
            states.append(ProcState.UNKNOWN)
        else:
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
    return _used_sum(gpu.processes)


def unattributed_memory(gpus: Iterable[GpuSample]) -> tuple[tuple[int, int], ...]:
    """(gpu index, bytes) for each healthy GPU whose unlisted memory exceeds the tolerance (a GPU
    whose process list could not be read is left out: its memory's owners are unknown)."""
    out: list[tuple[int, int]] = []
    for gpu in gpus:
        if (
            gpu.state is not GpuState.OK
            or gpu.memory_used_bytes is None
            or gpu.process_list_error is not None
        ):
            continue
        missing = gpu.memory_used_bytes - attributed_memory_bytes(gpu)
        if missing > unattributed_tolerance_bytes(gpu):
            out.append((gpu.index, missing))
    return tuple(out)


def reparented(
    *,
    pid: int,
    pgid: int,
    sid: int,
    ppid: int,
    parent_pgid: int,
    parent_sid: int,
    parent_is_init: Callable[[], bool],
) -> bool:
    """Whether ``ppid`` adopted ``pid`` (its parent exited; init or a subreaper took it) (pure).

    fork() keeps the child in its parent's process group and session. setpgid() moves a process
    only to a group of its own session, and setsid() makes it a group leader. So, for a process
    that does not lead its group (a leader is a job of its own: a daemon, a service):

    - parent in its group: its parent forked it;
    - parent in another session: its parent cannot have forked it: adopted;
    - parent in its session, another group: a job-control shell (the session leader or not:
      ``bash`` in bash, ``set -m``) put it in a pipeline's group and is still its parent,
      whether the pipeline's first member lives or not. Unless the parent is PID 1 of a PID
      namespace (``parent_is_init``, asked only here): a container's init (tini) adopts in its
      own session.

    Not seen: an adoption inside the job's own group (a launcher that is a subreaper, or a
    container's non-interactive shell as PID 1), and a pipeline under an interactive shell
    that is a container's PID 1 is taken for an adoption.
    """
    if ppid <= 0 or pgid == pid or parent_pgid == pgid:
        return False
    if parent_sid != sid:
        return True
    return ppid == 1 or parent_is_init()


def is_orphaned(info: ProcInfo) -> tuple[bool, str | None]:
    """Whether init or a subreaper adopted the process (:func:`reparented`), and a note saying so.

    Costs four syscalls per row (group and session of the process and of its parent), and one
    /proc/PPID/status read where the parent shares its session but not its group. A PID that
    vanishes meanwhile is not orphaned: the next tick sees its new parent.
    """
    if not info.visible or not info.ppid:  # ppid 0: the parent is outside this PID namespace
        return False, None
    pid, ppid = info.pid, info.ppid
    pgid, sid = process_group(pid), session(pid)
    parent_pgid, parent_sid = process_group(ppid), session(ppid)
    if pgid is None or sid is None or parent_pgid is None or parent_sid is None:
        return False, None
    adopted = reparented(
        pid=pid,
        pgid=pgid,
        sid=sid,
        ppid=ppid,
        parent_pgid=parent_pgid,
        parent_sid=parent_sid,
        parent_is_init=lambda: is_namespace_init(ppid),
    )
    return (True, _orphan_note(ppid, pgid)) if adopted else (False, None)


def _orphan_note(ppid: int, pgid: int) -> str:
    adopter, leader = read_proc(ppid), read_proc(pgid)
    head = f"its parent exited; adopted by {ppid} ({adopter.name or '?'})"
    if leader.visible and leader.status != psutil.STATUS_ZOMBIE:
        return f"{head} while its job leader {pgid} ({leader.name or '?'}) lives"
    return f"{head}; its job leader {pgid} has exited too"


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


def _listed_by_pid(
    gpus: Iterable[GpuSample],
) -> tuple[dict[int, list[GpuProcess]], dict[int, int]]:
    """Each listed PID's contexts, and its GPU memory summed over them (unknown counts 0)."""
    by_pid: dict[int, list[GpuProcess]] = {}
    used: dict[int, int] = {}
    for gpu in gpus:
        for p in gpu.processes:
            pid = p.pid
            contexts = by_pid.get(pid)
            if contexts is None:
                by_pid[pid] = [p]
                used[pid] = p.used_memory_bytes or 0
            else:
                contexts.append(p)
                used[pid] += p.used_memory_bytes or 0
    return by_pid, used


def _is_daemon(info: ProcInfo) -> bool:
    return is_ourselves(info.pid) or (info.name or "") in DAEMON_NAMES


SUSPECT_NOTE = (
    "holds no /dev/nvidia* file, so this PID may name another process than the driver's "
    "(gputop in a container sees host PIDs from the driver)"
)


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What enrich concludes about a process from the OS view and its device files."""

    info: ProcInfo  # the reader's reading, as given
    listed: bool
    device_files: tuple[str, ...]
    suspect: bool
    devices: DeviceMap | None
    shown: ProcInfo  # the reading with the note enrich adds, if any
    states: tuple[ProcState, ...]
    note: str | None
    held: frozenset[int]  # GPUs whose device files it holds


# PID -> (the row and keepers an exited row was made from, the exited row)
_ExitedRows = dict[int, tuple[ProcessRow, tuple[int, ...], ProcessRow]]


class RowMemo:
    """Each process's verdict from the last call, reused while its inputs are unchanged.

    The costly part of a row (orphan check: four syscalls, notes, classification) depends only
    on the reader's ProcInfo, the device files and whether NVML lists it. Past ``STATS_PER_CALL``
    processes the reader hands back the same ProcInfo object between its turns, so at thousands
    of GPU processes most rows are built from numbers alone (issue 17). Holds only the PIDs of
    the last call. Not thread-safe: the sampler's thread owns it.
    """

    def __init__(self) -> None:
        self._verdicts: dict[int, _Verdict] = {}
        # Each process's row and the driver's entries it was built from, last call.
        self._rows: dict[int, tuple[list[GpuProcess], ProcessRow]] = {}
        self._devices: DeviceMap | None = None  # the last call's (its verdicts name it)
        self.reused = 0  # verdicts reused in the last call
        self.rows_reused = 0  # whole rows reused in the last call
        self.hidden = 0  # rows of processes in another PID namespace, last call
        # What the last call was made from and gave, for a call in which no process came or
        # went (_quiet_changes): each GPU's list as the driver gave it, each PID's entries and
        # memory, the PIDs in the order the reader was given them, the holder scan's findings.
        self._lists: tuple[tuple[int, tuple[GpuProcess, ...]], ...] | None = None
        self._listed: dict[int, list[GpuProcess]] = {}
        self._used: dict[int, int] = {}
        self._pids: list[int] = []
        self._found: tuple[object, ...] | None = None
        self._pending = False  # a process was not read yet: the reader must be given all
        self._result: tuple[ProcessRow, ...] | None = None
        self._places: dict[int, int] | None = None  # PID -> place in _result, made when asked
        # The exited rows made last, by PID: (the row and keepers each was made from, the row
        # made), so an unchanged one is the same object again (see _exited).
        self.exited: _ExitedRows = {}

    def _keep(
        self,
        gpus: tuple[GpuSample, ...],
        holders: HolderScan | None,
        listed: dict[int, list[GpuProcess]],
        used: dict[int, int],
        pids: list[int],
        infos: dict[int, ProcInfo],
        result: tuple[ProcessRow, ...],
    ) -> None:
        """Remember a call made in full."""
        self._lists = tuple((g.index, g.processes) for g in gpus)
        self._listed, self._used, self._pids = listed, used, pids
        self._found = _found(holders)
        self._pending = any(map(is_pending, infos.values()))
        self._result, self._places = result, None
        self.hidden = sum(1 for r in result if r.state is ProcState.NAMESPACE)

    def _quiet_changes(
        self, gpus: tuple[GpuSample, ...], holders: HolderScan | None
    ) -> set[int] | None:
        """The PIDs whose driver entries changed since the last call, when no process came or
        went and the holder scan found the same (else None: the call is made in full).

        The driver keeps each GPU's list in order and an unchanged entry the same object
        (engine.process_delta, engine.nvml), so the changed entries are those that are not.
        """
        lists = self._lists
        if (
            self._result is None
            or self._pending
            or lists is None
            or len(lists) != len(gpus)
            or holders is None
            or holders.checked is None
            or _found(holders) != self._found
        ):
            return None
        moved: list[tuple[list[GpuProcess], list[GpuProcess]]] = []
        for gpu, (index, old) in zip(gpus, lists, strict=True):
            new = gpu.processes
            if new is old:
                continue
            if gpu.index != index:
                return None
            # Where the entry is the same object the PID is the same: look only at the others.
            entries = made_anew(old, new, _pid_of)
            if entries is None:
                return None  # a process came or went
            moved.append(entries)
        touched: set[int] = set()
        listed, used = self._listed, self._used
        for olds, news in moved:
            for was, now in zip(olds, news, strict=True):
                pid = now.pid
                contexts = listed[pid]
                listed[pid] = (
                    [now] if len(contexts) == 1 else [now if c is was else c for c in contexts]
                )
                touched.add(pid)
        for pid in touched:
            used[pid] = _used_sum(listed[pid])
        self._lists = tuple((g.index, g.processes) for g in gpus)
        return touched

    def _update(
        self,
        last: tuple[ProcessRow, ...],
        touched: set[int],
        infos: dict[int, ProcInfo],
        held: dict[int, tuple[str, ...]],
        holders: HolderScan | None,
        devices: DeviceMap,
        history: History | None,
    ) -> tuple[ProcessRow, ...]:
        """The last call's rows with those of ``touched`` made anew."""
        places = self._places
        if places is None:
            places = self._places = dict(zip(map(_pid_of, last), count()))
        rows = list(last)
        verdicts, built = self._verdicts, self._rows
        moved: dict[int, ProcessRow | None] = {}  # rows whose place may change
        remade = verdicts_remade = 0
        hidden = self.hidden
        for pid in sorted(touched):
            contexts = self._listed.get(pid, [])
            before = verdicts.get(pid)
            made = _row_of(
                pid, infos[pid], contexts, held, holders, devices, verdicts, built, history
            )
            place = places.get(pid)
            old = rows[place] if place is not None else None
            hidden -= old is not None and old.state is ProcState.NAMESPACE
            if made is None:
                verdicts.pop(pid, None)
                built.pop(pid, None)
                if old is not None:
                    moved[pid] = None
                continue
            verdict, row = made
            verdicts[pid] = verdict
            built[pid] = (contexts, row)
            verdicts_remade += verdict is not before
            hidden += row.state is ProcState.NAMESPACE
            if row is old:
                continue
            remade += 1
            if old is not None and place is not None and _row_order(old) == _row_order(row):
                rows[place] = row
            else:
                moved[pid] = row
        if moved:  # a row came, went or changed GPU: sort again
            by_pid = dict(zip(map(_pid_of, rows), rows, strict=True))
            for pid, new in moved.items():
                if new is None:
                    del by_pid[pid]
                else:
                    by_pid[pid] = new
            rows = sorted(by_pid.values(), key=_row_order)
            places = self._places = None
        result = tuple(rows)
        self.reused = len(result) - verdicts_remade
        self.rows_reused = len(result) - remade
        self.hidden = hidden
        self._result = result
        return result


def _found(holders: HolderScan | None) -> tuple[object, ...] | None:
    """What the holder scan found that rows are made from."""
    if holders is None:
        return None
    return (holders.holders, holders.checked, holders.unreadable)


def _used_sum(entries: Iterable[GpuProcess]) -> int:
    """The entries' GPU memory, unknown amounts counted as 0 (read in C: 5,000 a tick)."""
    return sum(filter(None, map(_used_of, entries)))  # filter(None) drops None (and zeros)


_pid_of = attrgetter("pid")
_used_of = attrgetter("used_memory_bytes")


def _verdict(
    info: ProcInfo,
    listed: bool,
    device_files: tuple[str, ...],
    *,
    suspect: bool,
    devices: DeviceMap | None,
) -> _Verdict:
    """A process's verdict, made anew (process_rows keeps the last one while its inputs are the
    same objects)."""
    orphaned, orphan_note = is_orphaned(info) if (listed or device_files) else (False, None)
    held, on_lost, on_unlisted = (
        devices.gpus_of(device_files) if devices and device_files else (set(), (), ())
    )
    facts = ProcFacts(
        listed=listed,
        visible=info.visible,
        status=info.status,
        holds_device=bool(device_files),
        orphaned=orphaned,
        holds_lost_gpu=bool(on_lost),
        holds_unlisted_gpu=bool(on_unlisted),
    )
    states = classify(facts)
    shown = info
    if suspect and info.visible and info.status != psutil.STATUS_ZOMBIE:
        shown = replace(info, note=SUSPECT_NOTE)
    note = _defunct_note(shown) if ProcState.DEFUNCT in states else orphan_note
    if note is None and ProcState.ON_LOST_GPU in states:
        note = _lost_note(on_lost)
    if note is None and ProcState.UNKNOWN in states:
        note = _unlisted_note(on_unlisted)
    return _Verdict(
        info=info,
        listed=listed,
        device_files=device_files,
        suspect=suspect,
        devices=devices,
        shown=shown,
        states=states,
        note=note,
        held=frozenset(held),
    )


def _build_row(
    verdict: _Verdict,
    contexts: list[GpuProcess],
    history: History | None,
    last: ProcessRow | None = None,
) -> ProcessRow:
    """The row of a verdict; ``last``: the row made for this PID the tick before, if any."""
    info = verdict.shown
    if info.name is None and (not info.visible or is_pending(info)):
        # Only the driver can name another namespace's process (as nvidia-smi does), and one
        # not read yet.
        name = next((p.driver_name for p in contexts if p.driver_name), None)
        if name is not None:
            info = not_visible(info.pid, name) if not info.visible else replace(info, name=name)
    # This runs for every process, every tick: one context (the common case) costs no sets.
    held = verdict.held
    if len(contexts) == 1 and not held:
        only = contexts[0]
        gpu_indices: tuple[int, ...] = (only.gpu_index,)
        kind: ProcessType | None = only.type
        used, sm, mem = only.used_memory_bytes, only.sm_util_percent, only.memory_util_percent
    else:
        gpus: set[int] = set(held)
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
        gpu_indices, kind = tuple(sorted(gpus)), _merge_type(types)
    peak = None
    if history is not None:  # not `if history`: that is len(), a lock per row
        if (
            last is not None
            and last.peak_memory_bytes is not None
            and last.identity == (info.pid, info.create_time)
        ):
            # The same process's last row has its peak so far (History's, raised by that row's
            # memory): no lookup under History's lock, a few hundred times a tick (issue 17).
            peak = last.peak_memory_bytes
        else:
            peak = history.process_peak_memory_bytes(info.pid, info.create_time)
    if used is not None and (peak is None or used > peak):
        peak = used
    return _make_row(
        pid=info.pid,
        info=info,
        states=verdict.states,
        gpu_indices=gpu_indices,
        type=kind,
        used_memory_bytes=used,
        peak_memory_bytes=peak,
        sm_util_percent=sm,
        memory_util_percent=mem,
        device_files=verdict.device_files,
        parent_note=verdict.note,
    )


_make_row = slot_maker(ProcessRow)  # a few hundred rows a tick at thousands of processes


@dataclass(frozen=True, slots=True)
class DeviceMap:
    """Which GPU each /dev/nvidiaN file is (N is the GPU's minor number), and the GPUs whose
    process lists say nothing: lost ones, and those whose list could not be read."""

    by_minor: dict[int, int]  # minor number -> GPU index
    lost: frozenset[int]  # indices of lost GPUs (GPU_IS_LOST: only a reset or reboot helps)
    # Indices of GPUs whose process list could not be read: not responding (or the driver
    # crashed), no handle, or the list call failed. Not lost: they may answer again.
    unlisted: frozenset[int]
    # Such a GPU without a minor number (lost before gputop started, say): its file is one no
    # GPU claims.
    unnumbered: tuple[int, ...]

    @classmethod
    def of(cls, gpus: Iterable[GpuSample]) -> DeviceMap:
        """The map for one snapshot's GPUs."""
        gpus = tuple(gpus)
        lost = frozenset(g.index for g in gpus if g.state is GpuState.LOST)
        unlisted = frozenset(
            g.index
            for g in gpus
            if g.state in _UNLISTED or (g.state is GpuState.OK and g.process_list_error)
        )
        return cls(
            by_minor={g.minor_number: g.index for g in gpus if g.minor_number is not None},
            lost=lost,
            unlisted=unlisted,
            unnumbered=tuple(
                g.index for g in gpus if g.index in lost | unlisted and g.minor_number is None
            ),
        )

    def gpus_of(
        self, device_files: tuple[str, ...]
    ) -> tuple[set[int], tuple[str, ...], tuple[str, ...]]:
        """(GPU indices whose files are held, the held files that belong to a lost GPU, those
        that belong to a GPU whose process list could not be read)."""
        found: set[int] = set()
        on_lost: list[str] = []
        on_unlisted: list[str] = []
        for path in device_files:
            number = os.path.basename(path).removeprefix("nvidia")
            if not number.isdigit():
                continue  # nvidiactl, nvidia-uvm: every CUDA process holds them
            index = self.by_minor.get(int(number))
            if index is None and self.unnumbered:
                # A file no GPU claims: lost only when every GPU it may be is lost.
                lost = all(i in self.lost for i in self.unnumbered)
                (on_lost if lost else on_unlisted).append(path)
                if len(self.unnumbered) == 1:
                    found.add(self.unnumbered[0])
            elif index is not None:
                found.add(index)
                if index in self.lost:
                    on_lost.append(path)
                elif index in self.unlisted:
                    on_unlisted.append(path)
        return found, tuple(on_lost), tuple(on_unlisted)


# States in which a GPU lists no contexts although it is not lost.
_UNLISTED = (GpuState.NOT_RESPONDING, GpuState.ERROR)


def _lost_note(files: tuple[str, ...]) -> str:
    return (
        f"holds {', '.join(files)} of a GPU the driver has lost, so whether it still uses that "
        "GPU cannot be known"
    )


def _unlisted_note(files: tuple[str, ...]) -> str:
    return (
        f"holds {', '.join(files)} of a GPU whose processes the driver could not list (it did "
        "not answer, or the list call failed), so whether it uses that GPU is unknown"
    )


def process_rows(
    gpus: tuple[GpuSample, ...],
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
    memo: RowMemo | None = None,
) -> tuple[ProcessRow, ...]:
    """One classified row per process NVML lists or that holds a device file.

    ``memo`` (kept by the caller between calls) reuses each process's verdict while its
    reading, device files and listing are unchanged, and, while no process came or went, makes
    anew only the rows of processes whose driver entries or reading changed (issue 17).
    """
    held = holders.holders if holders is not None else {}
    devices = DeviceMap.of(gpus)
    quiet: set[int] | None = None
    if memo is not None:
        # The last tick's map when equal (nearly always): one comparison a tick, not one a row.
        if memo._devices == devices:
            devices = memo._devices
            if reader is not None:
                quiet = memo._quiet_changes(gpus, holders)
        memo._devices = devices
        last_result, memo._result = memo._result, None  # none kept if this call fails
    if quiet is not None and memo is not None:
        listed, used, pids = memo._listed, memo._used, memo._pids
    else:
        listed, used = _listed_by_pid(gpus)
        # The most GPU memory first: past the reader's allowance of new processes a tick,
        # those on screen in the default order are read first.
        pids = sorted(listed, key=used.__getitem__, reverse=True)
        pids += [pid for pid in held if pid not in listed]
    infos = reader.read_many(pids) if reader is not None else _read_all(pids)
    changed = reader.changed if reader is not None else None
    if quiet is not None and memo is not None and last_result is not None and changed is not None:
        return memo._update(last_result, quiet | changed, infos, held, holders, devices, history)
    last = memo._verdicts if memo is not None else {}
    last_rows = memo._rows if memo is not None else {}
    verdicts: dict[int, _Verdict] = {}
    built: dict[int, tuple[list[GpuProcess], ProcessRow]] = {}
    rows_reused = verdicts_reused = 0
    rows: list[ProcessRow] = []
    for pid in pids:
        contexts = listed.get(pid, [])
        made = _row_of(pid, infos[pid], contexts, held, holders, devices, last, last_rows, history)
        if made is None:
            continue
        verdict, row = made
        verdicts[pid] = verdict
        verdicts_reused += verdict is last.get(pid)
        rows_reused += row is last_rows.get(pid, _NO_ROW)[1]
        built[pid] = (contexts, row)
        rows.append(row)
    rows.sort(key=_row_order)
    result = tuple(rows)
    if memo is not None:
        memo.reused = verdicts_reused
        memo.rows_reused = rows_reused
        memo._verdicts = verdicts
        memo._rows = built
        memo._keep(gpus, holders, listed, used, pids, infos, result)
    return result


def _row_order(row: ProcessRow) -> tuple[int, int]:
    """The rows' order: by first GPU (none last), then PID."""
    return (row.gpu_indices[0] if row.gpu_indices else 1 << 30, row.pid)


def _row_of(
    pid: int,
    info: ProcInfo,
    contexts: list[GpuProcess],
    held: dict[int, tuple[str, ...]],
    holders: HolderScan | None,
    devices: DeviceMap,
    last: dict[int, _Verdict],
    last_rows: dict[int, tuple[list[GpuProcess], ProcessRow]],
    history: History | None,
) -> tuple[_Verdict, ProcessRow] | None:
    """One process's verdict and row (the last ones where their inputs are the same objects),
    or None for a monitor or driver daemon."""
    if not contexts and _is_daemon(info):
        return None  # monitors and driver daemons keep the files open by design
    files = held.get(pid, ())
    suspect = False
    if (
        contexts
        and not files
        and info.visible  # another namespace's PID: nothing to look at here
        and not is_pending(info)
        and holders is not None
        and pid not in holders.unreadable
    ):
        # Every process with a CUDA context has the device files open.
        if holders.checked is None:
            # A whole scan may be a few seconds old: look at this one PID again first.
            now = held_by(pid, holders.dev_dir, holders.proc_root)
            files = now or ()
            suspect = now == ()
        else:
            # The incremental watch has looked at every PID in `checked` since NVML listed
            # it; it reads the others first, within a tick or a few at thousands of them.
            suspect = pid in holders.checked
    known = last.get(pid)
    if (  # its inputs unchanged: the same reading (the reader keeps an unchanged one)...
        known is not None
        and known.info is info
        and known.suspect == suspect
        and known.device_files == files
        and known.listed == bool(contexts)
        # ... and the same device map (the memo keeps an unchanged one)
        and (not files or known.devices is devices)
    ):
        verdict = known
    else:
        verdict = _verdict(info, bool(contexts), files, suspect=suspect, devices=devices)
    before = last_rows.get(pid)
    if before is not None and verdict is known and _same(before[0], contexts):
        # Nothing it is built from changed (the driver's entries are the last reading's
        # objects when equal: engine.process_delta), and neither can its peak: it is this row's.
        return verdict, before[1]
    return verdict, _build_row(verdict, contexts, history, before[1] if before else None)


_NO_ROW: tuple[list[GpuProcess], ProcessRow | None] = ([], None)


def _same(old: list[GpuProcess], new: list[GpuProcess]) -> bool:
    """The same driver entries (the very objects): one, for all but multi-GPU processes."""
    if len(old) != len(new):
        return False
    if len(new) == 1:
        return old[0] is new[0]
    return all(a is b for a, b in zip(old, new, strict=True))


def _read_all(pids: Iterable[int]) -> dict[int, ProcInfo]:
    return {pid: read_proc(pid) for pid in pids}


def enrich(
    snapshot: Snapshot,
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
    memo: RowMemo | None = None,
) -> Snapshot:
    """The snapshot with ``processes`` and ``unattributed_memory_bytes`` filled (one-shot use too).

    ``holders`` adds processes that hold a device file without a context (None: no holder rows);
    ``history`` supplies peak memory; ``reader`` keeps CPU % state between calls; ``memo``
    reuses unchanged verdicts (:class:`RowMemo`).
    """
    rows = process_rows(snapshot.gpus, holders=holders, history=history, reader=reader, memo=memo)
    hidden = (
        memo.hidden if memo is not None else sum(1 for r in rows if r.state is ProcState.NAMESPACE)
    )
    if hidden and not snapshot.system.simulated and _sees_driver_pids():
        # The demo's stand-in PIDs exist nowhere and stand for another namespace's; a real
        # driver's PID that gputop cannot see, seeing every host PID, has exited.
        rows, hidden = _exited(rows, memo.exited if memo is not None else {}), 0
    return replace(
        snapshot,
        processes=rows,
        unattributed_memory_bytes=unattributed_memory(snapshot.gpus),
        holder_scan_note=holders.note if holders is not None else snapshot.holder_scan_note,
        # The simulated driver's stand-in PIDs exist nowhere: no advice to see the host's.
        hidden_pids_note=(
            hidden_pids_note(hidden, _own_container())
            if hidden and not snapshot.system.simulated
            else None
        ),
    )


@functools.cache
def _own_container() -> Container | None:
    return own_container()  # it does not change while gputop runs


@functools.cache
def _sees_driver_pids() -> bool:
    return sees_driver_pids()  # nor does its PID namespace


EXITED_NOTE = "exited, yet the driver still lists it"


def _exited(rows: tuple[ProcessRow, ...], last: _ExitedRows) -> tuple[ProcessRow, ...]:
    """The rows with each not-visible PID shown as exited, and who keeps its memory: the
    processes holding its GPUs' device files without a context of their own (those whose GPU
    is not known too). ``last``: the exited rows made last time, replaced by this call's; an
    unchanged one is the same object again (the table and History look only at new objects)."""
    holders = [r for r in rows if ProcState.HOLDER in r.states]
    made: _ExitedRows = {}
    out = list(rows)
    for i, row in enumerate(rows):
        if row.state is not ProcState.NAMESPACE:
            continue
        gpus = set(row.gpu_indices)
        keepers = tuple(
            sorted(r.pid for r in holders if not r.gpu_indices or gpus.intersection(r.gpu_indices))
        )
        known = last.get(row.pid)
        if known is not None and known[0] is row and known[1] == keepers:
            out[i] = known[2]
        else:
            note = EXITED_NOTE
            if keepers:
                pids = ", ".join(map(str, keepers[:5])) + (" …" if len(keepers) > 5 else "")
                note += f"; its memory is freed when {pids} (holding the device files) exit"
            out[i] = replace(row, info=replace(row.info, note=note), states=(ProcState.EXITED,))
        made[row.pid] = (row, keepers, out[i])
    last.clear()
    last.update(made)
    return tuple(out)
