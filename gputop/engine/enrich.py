"""Join the driver's view (NVML process lists), the OS view (psutil) and the holder scan.

The result is ``Snapshot.processes`` (one ProcessRow per GPU-related process, classified: the
verdicts are gputop.engine.verdicts'), ``Snapshot.unattributed_memory_bytes``, and, kept between
ticks by :class:`RowMemo`, ``Snapshot.changes`` (what changed: the rules are
gputop.engine.changes').

Unattributed memory: per healthy GPU whose process list was read, ``memory_used_bytes`` minus
the sum of the listed processes' ``used_memory_bytes``. The driver keeps some memory for itself,
so it is reported only beyond a tolerance of ``max(256 MiB, 2 % of memory_total_bytes)``; the
reported value is the whole difference, not the excess over the tolerance.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace
from itertools import count
from operator import attrgetter
from typing import cast

from gputop.engine.changes import ListChanges, ListTracker, RowTracker, same
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
    RowChanges,
    Snapshot,
)
from gputop.engine.ourselves import is_ourselves
from gputop.engine.pidns import sees_driver_pids
from gputop.engine.proc_lookup import read_proc
from gputop.engine.procs import ProcReader, is_pending, not_visible
from gputop.engine.verdicts import SUSPECT_NOTE as SUSPECT_NOTE
from gputop.engine.verdicts import DeviceMap, Verdict, verdict_of
from gputop.engine.verdicts import ProcFacts as ProcFacts
from gputop.engine.verdicts import classify as classify
from gputop.engine.verdicts import is_orphaned as is_orphaned
from gputop.engine.verdicts import reparented as reparented
from gputop.units import MiB

TOLERANCE_MIN_BYTES = 256 * MiB
TOLERANCE_FRACTION = 0.02


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


# PID -> (the row and keepers an exited row was made from, the exited row)
_ExitedRows = dict[int, tuple[ProcessRow, tuple[int, ...], ProcessRow]]


class RowMemo:
    """What one sampler's enrichment keeps between ticks, so that a tick redoes only what changed
    (gputop.engine.changes states the rules).

    The costly part of a row (orphan check: four syscalls, notes, classification) depends only
    on the reader's ProcInfo, the device files and whether NVML lists it: each process's verdict
    is kept while those are equal. While no process came or went (the driver's lists say so:
    :class:`gputop.engine.changes.ListChanges`), only the rows of processes whose driver entries
    or reading changed are made anew. Holds only the PIDs of the last call. Not thread-safe: the
    sampler's thread owns it.

    Public: :meth:`rows` (what :func:`process_rows` does with a memo), :meth:`track` (the
    rows' :class:`RowChanges`), and the last call's counts ``reused``, ``rows_reused``, ``hidden``.
    """

    def __init__(self) -> None:
        self.reused = 0  # verdicts reused in the last call
        self.rows_reused = 0  # rows equal to the last call's, last call
        self.hidden = 0  # rows of processes in another PID namespace, last call
        self._verdicts: dict[int, Verdict] = {}
        # Each process's row and the driver's entries it was built from, last call.
        self._rows: dict[int, tuple[list[GpuProcess], ProcessRow]] = {}
        self._devices: DeviceMap | None = None  # the last call's (its verdicts name it)
        self._own_lists = ListTracker()  # for a caller that hands no ListChanges
        self._lists_tick = 0  # the ListChanges the kept lists below are of (0: none)
        # What the last call was made from, for a call in which no process came or went: each
        # PID's entries and memory, the PIDs in the order the reader was given them, the holder
        # scan's findings, and what it gave.
        self._listed: dict[int, list[GpuProcess]] = {}
        self._used: dict[int, int] = {}
        self._pids: list[int] = []
        self._found: tuple[object, ...] | None = None
        self._pending = False  # a process was not read yet: the reader must be given all
        self._result: tuple[ProcessRow, ...] | None = None
        self._places: dict[int, int] | None = None  # PID -> place in _result, made when asked
        self._exited: _ExitedRows = {}  # the exited rows made last, by PID (see _exited)
        self._tracker = RowTracker()

    def rows(
        self,
        gpus: tuple[GpuSample, ...],
        *,
        holders: HolderScan | None,
        history: History | None,
        reader: ProcReader | None,
        lists: ListChanges | None,
    ) -> tuple[ProcessRow, ...]:
        """One classified row per process (see :func:`process_rows`), the last call's reused
        where their inputs are equal."""
        held = holders.holders if holders is not None else {}
        devices = DeviceMap.of(gpus)
        same_map = self._devices == devices
        if same_map:  # nearly always: one comparison a tick, and the verdicts' own map again
            devices = cast(DeviceMap, self._devices)
        self._devices = devices
        if lists is None:
            lists = self._own_lists.track(gpus)
        follows, self._lists_tick = lists.follows(self._lists_tick), lists.tick
        last_result, self._result = self._result, None  # none kept if this call fails
        touched = None
        if same_map and follows and reader is not None and last_result is not None:
            touched = self._quiet_touched(lists, holders)
        if touched is not None and reader is not None and last_result is not None:
            infos = reader.read_many(self._pids)
            if reader.changed is not None:
                changed = touched | reader.changed
                return self._update(last_result, changed, infos, held, holders, devices, history)
        else:
            self._listed, self._used = _listed_by_pid(gpus)
            self._pids = _read_order(self._listed, self._used, held)
            infos = _read(reader, self._pids)
        made = _whole(
            self._pids,
            self._listed,
            infos,
            held,
            holders,
            devices,
            history,
            self._verdicts,
            self._rows,
        )
        self.reused, self.rows_reused = made.verdicts_reused, made.rows_reused
        self._verdicts, self._rows = made.verdicts, made.built
        self._found = _found(holders)
        self._pending = any(map(is_pending, infos.values()))
        self._result, self._places = made.rows, None
        self.hidden = sum(1 for r in made.rows if r.state is ProcState.NAMESPACE)
        return made.rows

    def track(self, rows: tuple[ProcessRow, ...]) -> RowChanges:
        """What changed in ``rows`` since the last call's (the rows a snapshot carries)."""
        return self._tracker.track(rows)

    def exited(self, rows: tuple[ProcessRow, ...]) -> tuple[ProcessRow, ...]:
        """:func:`_exited`, keeping an unchanged exited row from the last call."""
        return _exited(rows, self._exited)

    def _quiet_touched(self, lists: ListChanges, holders: HolderScan | None) -> set[int] | None:
        """The PIDs whose driver entries changed since the last call, with the kept entries
        brought up to date, when no process came or went and the holder scan found the same
        (else None: the call is made in full)."""
        if (
            self._pending
            or holders is None
            or holders.checked is None
            or _found(holders) != self._found
        ):
            return None
        touched: set[int] = set()
        listed = self._listed
        for was, now in lists.entries:
            pid = now.pid
            contexts = listed[pid]
            if len(contexts) == 1:
                listed[pid] = [now]
            else:  # a multi-GPU process: the first context equal to the one replaced
                contexts = list(contexts)
                contexts[contexts.index(was)] = now
                listed[pid] = contexts
            touched.add(pid)
        for pid in touched:
            self._used[pid] = _used_sum(listed[pid])
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
        moved: dict[int, ProcessRow | None] = {}  # rows whose place may change
        remade = verdicts_remade = 0
        for pid in sorted(touched):
            place = places.get(pid)
            old = rows[place] if place is not None else None
            made = self._remake(pid, infos[pid], held, holders, devices, history)
            if made is None:
                if old is not None:
                    moved[pid] = None
                    self.hidden -= old.state is ProcState.NAMESPACE
                continue
            row, verdict_new = made
            verdicts_remade += verdict_new
            if old is not None and same(row, old):
                continue
            remade += 1
            self.hidden += (row.state is ProcState.NAMESPACE) - (
                old is not None and old.state is ProcState.NAMESPACE
            )
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
            self._places = None
        result = tuple(rows)
        self.reused = len(result) - verdicts_remade
        self.rows_reused = len(result) - remade
        self._result = result
        return result

    def _remake(
        self,
        pid: int,
        info: ProcInfo,
        held: dict[int, tuple[str, ...]],
        holders: HolderScan | None,
        devices: DeviceMap,
        history: History | None,
    ) -> tuple[ProcessRow, bool] | None:
        """One touched process's row, and whether its verdict was made anew (None: no row)."""
        contexts = self._listed.get(pid, [])
        before = self._verdicts.get(pid)
        made = _row_of(
            pid, info, contexts, held, holders, devices, self._verdicts, self._rows, history
        )
        if made is None:
            self._verdicts.pop(pid, None)
            self._rows.pop(pid, None)
            return None
        verdict, row = made
        self._verdicts[pid] = verdict
        self._rows[pid] = (contexts, row)
        return row, verdict is not before


@dataclass(frozen=True, slots=True)
class _Made:
    """A call's rows made in full, and what the memo keeps of it."""

    rows: tuple[ProcessRow, ...]
    verdicts: dict[int, Verdict]
    built: dict[int, tuple[list[GpuProcess], ProcessRow]]
    verdicts_reused: int
    rows_reused: int


def _whole(
    pids: list[int],
    listed: dict[int, list[GpuProcess]],
    infos: dict[int, ProcInfo],
    held: dict[int, tuple[str, ...]],
    holders: HolderScan | None,
    devices: DeviceMap,
    history: History | None,
    last: dict[int, Verdict],
    last_rows: dict[int, tuple[list[GpuProcess], ProcessRow]],
) -> _Made:
    """Every process's row (the last ones reused where their inputs are equal)."""
    verdicts: dict[int, Verdict] = {}
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
        before = last_rows.get(pid)
        rows_reused += before is not None and same(row, before[1])
        built[pid] = (contexts, row)
        rows.append(row)
    rows.sort(key=_row_order)
    return _Made(tuple(rows), verdicts, built, verdicts_reused, rows_reused)


def _read_order(
    listed: dict[int, list[GpuProcess]], used: dict[int, int], held: dict[int, tuple[str, ...]]
) -> list[int]:
    """The PIDs to read: the most GPU memory first (past the reader's allowance of new
    processes a tick, those on screen in the default order are read first), then holders."""
    pids = sorted(listed, key=used.__getitem__, reverse=True)
    pids += [pid for pid in held if pid not in listed]
    return pids


def _read(reader: ProcReader | None, pids: list[int]) -> dict[int, ProcInfo]:
    return reader.read_many(pids) if reader is not None else _read_all(pids)


def _found(holders: HolderScan | None) -> tuple[object, ...] | None:
    """What the holder scan found that rows are made from."""
    if holders is None:
        return None
    return (holders.holders, holders.checked, holders.unreadable)


def _used_sum(entries: Iterable[GpuProcess]) -> int:
    """The entries' GPU memory, unknown amounts counted as 0 (read in C: 5,000 a tick)."""
    return sum(filter(None, map(_used_of, entries)))  # filter(None) drops None (and zeros)


# Every row of a tick whose process changed is made here: 5,000 a tick when every row moves.
_make_row = slot_maker(ProcessRow)
_pid_of = attrgetter("pid")
_used_of = attrgetter("used_memory_bytes")


def _build_row(
    verdict: Verdict,
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
            # memory): no lookup under History's lock, a few hundred times a tick.
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


def process_rows(
    gpus: tuple[GpuSample, ...],
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
    memo: RowMemo | None = None,
    lists: ListChanges | None = None,
) -> tuple[ProcessRow, ...]:
    """One classified row per process NVML lists or that holds a device file.

    ``memo`` (kept by the caller between calls) reuses what did not change since its last call
    (:class:`RowMemo`); ``lists``: what changed in the driver's lists since then (the sampler's
    :class:`ListChanges`; the memo works it out when not given).
    """
    if memo is not None:
        return memo.rows(gpus, holders=holders, history=history, reader=reader, lists=lists)
    held = holders.holders if holders is not None else {}
    listed, used = _listed_by_pid(gpus)
    pids = _read_order(listed, used, held)
    infos = _read(reader, pids)
    return _whole(pids, listed, infos, held, holders, DeviceMap.of(gpus), history, {}, {}).rows


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
    last: dict[int, Verdict],
    last_rows: dict[int, tuple[list[GpuProcess], ProcessRow]],
    history: History | None,
) -> tuple[Verdict, ProcessRow] | None:
    """One process's verdict and row (the last ones where their inputs are equal), or None
    for a monitor or driver daemon."""
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
    if (  # its inputs unchanged: an equal reading, files, listing and device map
        known is not None
        and same(known.info, info)
        and known.suspect == suspect
        and known.device_files == files
        and known.listed == bool(contexts)
        and (not files or same(known.devices, devices))
    ):
        verdict = known
    else:
        verdict = verdict_of(info, bool(contexts), files, suspect=suspect, devices=devices)
    before = last_rows.get(pid)
    if before is not None and verdict is known and before[0] == contexts:
        # Nothing it is built from changed (equal driver entries), and neither can its peak:
        # it is this row's.
        return verdict, before[1]
    return verdict, _build_row(verdict, contexts, history, before[1] if before else None)


def _read_all(pids: Iterable[int]) -> dict[int, ProcInfo]:
    return {pid: read_proc(pid) for pid in pids}


def enrich(
    snapshot: Snapshot,
    *,
    holders: HolderScan | None = None,
    history: History | None = None,
    reader: ProcReader | None = None,
    memo: RowMemo | None = None,
    lists: ListChanges | None = None,
) -> Snapshot:
    """The snapshot with ``processes`` and ``unattributed_memory_bytes`` filled (one-shot use too).

    ``holders`` adds processes that hold a device file without a context (None: no holder rows);
    ``history`` supplies peak memory; ``reader`` keeps CPU % state between calls; ``memo``
    reuses what did not change (:class:`RowMemo`) and then says what did (``changes``: see
    gputop.engine.changes); ``lists``: what changed in the driver's lists (the sampler's).
    """
    rows = process_rows(
        snapshot.gpus, holders=holders, history=history, reader=reader, memo=memo, lists=lists
    )
    hidden = (
        memo.hidden if memo is not None else sum(1 for r in rows if r.state is ProcState.NAMESPACE)
    )
    if hidden and not snapshot.system.simulated and _sees_driver_pids():
        # The demo's stand-in PIDs exist nowhere and stand for another namespace's; a real
        # driver's PID that gputop cannot see, seeing every host PID, has exited.
        rows, hidden = (memo.exited(rows) if memo is not None else _exited(rows, {})), 0
    return replace(
        snapshot,
        processes=rows,
        changes=memo.track(rows) if memo is not None else None,
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
    is not known too). ``last``: the exited rows made last time, replaced by this call's; one
    made from an equal row and keepers is kept (no note made anew)."""
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
        if known is not None and same(known[0], row) and known[1] == keepers:
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
