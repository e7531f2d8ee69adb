"""A snapshot's process lists on the pipe as what changed since the last one.

At thousands of GPU processes (MPS, many small inference workers) most entries are what they were
a second ago. The driver process sends each GPU's list as the entries that are new or different
and the PIDs that are gone (:class:`ListChange`); gputop's end keeps the last list of each GPU and
puts the whole one back together. An unchanged entry arrives as the very object it was, and an
unchanged list as the same tuple: that only makes gputop.engine.changes' equality tests cheap (its
rule 1); what changed is decided there, by value.

Each end keeps its own copy of the last lists: :class:`ListEncoder` in the driver process,
:class:`ListDecoder` on the listening thread of that connection. Both change only on a snapshot
message, which the pipe delivers in order, so they stay in step; a new driver process starts both
afresh.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import compress
from operator import attrgetter, is_not
from typing import Any

from gputop.engine.maker import field_names, from_values
from gputop.engine.model import GpuProcess, GpuSample, Snapshot


@dataclass(frozen=True, slots=True)
class ListChange:
    """One GPU's process list as the change from the last one sent for that GPU."""

    changed: tuple[GpuProcess, ...] = ()  # entries new or different since then
    gone: tuple[int, ...] = ()  # PIDs no longer listed
    order: tuple[int, ...] | None = None  # every listed PID in list order, when that changed


# A GPU's list is either sent whole (the first time, or when a PID is in it twice) or as a change.
Lists = tuple[tuple[GpuProcess, ...] | ListChange, ...]

_UNCHANGED = ListChange()
_pid_of = attrgetter("pid")


class _Last:
    """One end's copy of a GPU's last list."""

    __slots__ = ("by_pid", "listed", "order")

    def __init__(self, listed: tuple[GpuProcess, ...], order: tuple[int, ...]) -> None:
        self.listed = listed
        self.order = order
        self.by_pid = dict(zip(order, listed, strict=True))


def _start(lasts: dict[int, _Last], index: int, listed: tuple[GpuProcess, ...]) -> None:
    """A GPU's list sent whole: the copy changes start from, or none when a PID is in it twice
    (no change could name either entry)."""
    order = tuple(map(_pid_of, listed))
    if len(set(order)) == len(order):
        lasts[index] = _Last(listed, order)
    else:
        lasts.pop(index, None)


_GPU_NAMES = field_names(GpuSample)
_gpu_values = attrgetter(*_GPU_NAMES)  # every field of a GpuSample, in one C call
_PROCESSES_AT = _GPU_NAMES.index("processes")


def with_processes(gpu: GpuSample, processes: tuple[GpuProcess, ...]) -> GpuSample:
    """``gpu`` with ``processes`` as its list: dataclasses.replace's result, in half its time.

    Each end does it for every GPU of every reading, and replace looks the fields up, checks
    them and runs the generated __init__ (58 fields) again; a GpuSample's fields are known and
    all kept as they were, so they are copied slot to slot.
    """
    values: list[Any] = list(_gpu_values(gpu))
    values[_PROCESSES_AT] = processes
    return from_values(GpuSample, values)


class ListEncoder:
    """The driver process's end: snapshots with their process lists taken out as :data:`Lists`."""

    def __init__(self) -> None:
        self._last: dict[int, _Last] = {}

    def encode(self, snapshot: Snapshot, seq: int | None = None) -> tuple[Snapshot, Lists]:
        """The snapshot without process entries, and each GPU's list (in ``gpus`` order).

        ``seq``: the shell's seq instead of the snapshot's (the driver process numbers readings
        by gputop's requests), set in the same copy.
        """
        lists = tuple(self._change(gpu.index, gpu.processes) for gpu in snapshot.gpus)
        gpus = tuple(with_processes(gpu, ()) if gpu.processes else gpu for gpu in snapshot.gpus)
        return replace(snapshot, gpus=gpus, seq=snapshot.seq if seq is None else seq), lists

    def _change(
        self, index: int, listed: tuple[GpuProcess, ...]
    ) -> tuple[GpuProcess, ...] | ListChange:
        last = self._last.get(index)
        if last is None:
            _start(self._last, index, listed)
            return listed
        if listed is last.listed:
            return _UNCHANGED
        by_pid = last.by_pid
        order = tuple(map(_pid_of, listed))
        gone: tuple[int, ...] = ()
        if order != last.order:
            members = set(order)
            if len(members) != len(order):
                _start(self._last, index, listed)
                return listed
            gone = tuple(by_pid.keys() - members)
            for pid in gone:
                del by_pid[pid]
        changed: list[GpuProcess] = []
        # The entries that are not the objects sent last (found in C: the driver's reader keeps
        # an unchanged entry as it was); an equal one needs no sending either, as the other end
        # keeps its own equal object.
        for p in compress(listed, map(is_not, map(by_pid.get, order), listed)):
            if by_pid.get(p.pid) != p:
                by_pid[p.pid] = p
                changed.append(p)
        last.listed = listed
        if order == last.order:
            return ListChange(changed=tuple(changed)) if changed else _UNCHANGED
        last.order = order
        return ListChange(changed=tuple(changed), gone=gone, order=order)


class DeltaError(ValueError):
    """A change that does not fit the lists this end has: the stream is out of step."""


class ListDecoder:
    """gputop's end: puts each snapshot's process lists back (one per driver connection)."""

    def __init__(self) -> None:
        self._last: dict[int, _Last] = {}

    def decode(self, snapshot: Snapshot, lists: Lists) -> Snapshot:
        """The snapshot with its GPUs' whole process lists; raises DeltaError when ``lists`` does
        not fit."""
        if len(lists) != len(snapshot.gpus):
            raise DeltaError(f"{len(lists)} process lists for {len(snapshot.gpus)} GPUs")
        gpus = []
        for gpu, item in zip(snapshot.gpus, lists, strict=True):
            listed = self._apply(gpu.index, item)
            gpus.append(with_processes(gpu, listed) if listed else gpu)
        return replace(snapshot, gpus=tuple(gpus))

    def _apply(
        self, index: int, item: tuple[GpuProcess, ...] | ListChange
    ) -> tuple[GpuProcess, ...]:
        if not isinstance(item, ListChange):
            _start(self._last, index, item)
            return item
        last = self._last.get(index)
        if last is None:
            raise DeltaError(f"a change to GPU {index}'s process list, which was never sent")
        if not item.changed and item.order is None:
            return last.listed
        by_pid = last.by_pid
        for pid in item.gone:
            by_pid.pop(pid, None)
        for p in item.changed:
            by_pid[p.pid] = p
        if item.order is not None:
            last.order = item.order
        try:
            last.listed = tuple(map(by_pid.__getitem__, last.order))
        except KeyError as exc:
            raise DeltaError(f"GPU {index}: PID {exc} listed but never sent") from None
        if len(by_pid) != len(last.order):
            raise DeltaError(f"GPU {index}: {len(by_pid)} entries kept for {len(last.order)} PIDs")
        return last.listed
