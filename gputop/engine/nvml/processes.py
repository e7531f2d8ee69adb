"""A GPU's processes: its compute and graphics lists and per-process utilisation, as entries.

Each list is one driver call on a reused array (gputop.engine.nvml.pynvml_private), unpacked in
C. An entry whose readings did not change is the last snapshot's object again, and the tuple
too when all are: at thousands of inference workers most are (the rules of per-tick work:
gputop.engine.changes), and the pipe then carries only what changed
(gputop.engine.process_delta). Past PROCESS_UTIL_PER_SNAPSHOT listed processes, GPUs take turns
for utilisation. A list the driver could not give is unknown (GpuSample.process_list_error),
never empty.
"""

from __future__ import annotations

import ctypes
import operator
import os
import time
from array import array
from collections.abc import Callable, Sequence
from itertools import compress, count
from typing import Any

import pynvml

from gputop.engine.maker import slot_maker
from gputop.engine.model import GpuProcess, GpuSample, MigDevice, ProcessType, listed_pids
from gputop.engine.nvml.calls import Lost, error_text, raise_if_lost, read, text
from gputop.engine.nvml.mig import in_mig_mode, instances, mig_handles
from gputop.engine.nvml.pynvml_private import (
    NO_BYTES,
    UNPACK_UTIL,
    UNPACK_V1,
    UNPACK_V2,
    ListBuffers,
    ProcessInfoV1,
    ProcessInfoV2,
)

Listed = tuple[int, int | None, int | None, int | None]  # pid, used bytes, GI id, CI id
# (type, used bytes, GPU instance id, compute instance id) of a PID's contexts on one GPU
_Merged = tuple[ProcessType, int | None, int | None, int | None]
_NO_ID = 0xFFFFFFFF  # NVML_VALUE_NOT_AVAILABLE in an instance id (not in MIG mode)
# nvmlProcessUtilizationSample_t as 32-bit words: pid, (padding), timeStamp (two), smUtil,
# memUtil, encUtil, decUtil. Read as columns of an array, in C, where the layout is that.
_UTIL_WORDS = UNPACK_UTIL.size // 4
_COLUMNS = array("I").itemsize == 4 and UNPACK_UTIL.size == 32

# api -> (symbol suffix, struct), newest first
_PROCESS_CALLS: dict[str, tuple[str, type[ctypes.Structure]]] = {
    "v3": ("_v3", ProcessInfoV2),
    "v2": ("_v2", ProcessInfoV2),
    "v1": ("", ProcessInfoV1),
}


class ProcessReader:
    """The process lists of every GPU, snapshot after snapshot. One reader thread (``listed_
    memory`` may run beside it: it has its own buffers and keeps nothing)."""

    PROCESS_UTIL_WINDOW_S = 5.0

    def __init__(self) -> None:
        self._proc_api: str | None = None  # v3 / v2 / v1, whichever the driver has
        self._buffers = ListBuffers()
        self._light_buffers = ListBuffers()  # listed_memory's: it may run beside a snapshot
        # listed PID -> the driver's name for it when this namespace cannot see it, else None
        self._foreign_names: dict[int, str | None] = {}
        self._lists: dict[int, _GpuList] = {}  # per GPU: its last process entries
        self._lists_moved = True  # a GPU's processes may have changed since the last prune
        self._prunes = 0
        self._seq = 0
        self._util_turns = 1  # per-process utilisation of a GPU every this many snapshots
        # The snapshot's parsed process lists by their bytes, and the last snapshot's: a list
        # the driver gives byte for byte again is the same parsed list (and so, above, the
        # same entries), found without a step per entry.
        self._parsed: dict[tuple[str, bytes], list[Listed]] = {}
        self._parsed_before: dict[tuple[str, bytes], list[Listed]] = {}

    def begin(self, seq: int) -> None:
        """A snapshot numbered ``seq`` starts."""
        self._seq = seq
        self._parsed_before, self._parsed = self._parsed, {}

    def end(self, gpus: Sequence[GpuSample], per_snapshot: int) -> None:
        """The snapshot's GPUs are read: how often each GPU's utilisation is read from now on
        (every GPU each snapshot up to ``per_snapshot`` listed processes), and forget PIDs no
        longer listed (a PID number is reused): looked at when a list's processes may have
        changed, or now and then (a GPU lost with its list, say)."""
        listed = sum(len(gpu.processes) for gpu in gpus)
        self._util_turns = max(1, -(-listed // per_snapshot))
        self._prunes += 1
        if self._foreign_names and (self._lists_moved or self._prunes % 60 == 0):
            self._lists_moved = False
            for pid in self._foreign_names.keys() - listed_pids(gpus):
                del self._foreign_names[pid]

    def listed_memory(self, h: Any) -> dict[int, int | None]:
        """PID -> its memory on this GPU, merged over both lists as ``read`` does."""
        by_pid: dict[int, int | None] = {}

        def migs() -> list[tuple[int | None, int | None, Any]]:
            return [(None, None, mh) for _, mh in mig_handles(h)] if in_mig_mode(h) else []

        for kind in ("Compute", "Graphics"):
            listed, error = self._list_on_gpu(kind, h, migs, self._light_buffers)
            if error is not None:  # a list it could not read: the GPU is left out, not 0
                raise pynvml.NVMLError(error)
            for pid, used, _, _ in listed:
                by_pid[pid] = used if pid not in by_pid else max_known(by_pid[pid], used)
        return by_pid

    def read(
        self,
        index: int,
        h: Any,
        migs: Sequence[tuple[MigDevice, Any]] = (),
        *,
        mig_mode: bool = False,
    ) -> tuple[tuple[GpuProcess, ...], str | None]:
        """The GPU's contexts, and why its list is not known in full (None: it is): the
        contexts of a list that failed are unknown, and no entry stands for them."""
        got = [
            self._list_on_gpu(kind, h, lambda: instances(migs)) for kind in ("Compute", "Graphics")
        ]
        lists = (got[0][0], got[1][0])
        failed = [
            f"nvmlDeviceGet{kind}RunningProcesses: {error_text(error)}"
            for kind, (_, error) in zip(("Compute", "Graphics"), got, strict=True)
            if error is not None
        ]
        return self._entries(index, h, lists, mig_mode=mig_mode), "; ".join(failed) or None

    def _entries(
        self, index: int, h: Any, lists: tuple[list[Listed], ...], *, mig_mode: bool
    ) -> tuple[GpuProcess, ...]:
        """One entry per listed PID, the last snapshot's objects where unchanged."""
        last = self._lists.get(index)
        if last is not None and last.lists[0] is lists[0] and last.lists[1] is lists[1]:
            merged = last.merged  # the same contexts and memory as the last snapshot
        else:
            merged = _merge(lists)
        if last is not None and merged is last.merged and (self._seq + index) % self._util_turns:
            return last.listed  # the same contexts, and not this GPU's turn for utilisation
        # In MIG mode NVML keeps no per-process utilisation (a driver answering NOT_FOUND
        # there means none, not idle): N/A, as for the MIG devices themselves.
        utils = self._read_process_utilization(index, h) if merged and not mig_mode else _NO_UTILS
        if last is not None and merged is last.merged and utils.absent == last.utils.absent:
            # Only the processes whose utilisation moved: a few hundred of 5,000 (the rules of
            # per-tick work: gputop.engine.changes).
            moved = utils.moved_since(last.utils)
            return last.moved(moved, utils) if moved else last.listed
        self._lists_moved = True
        by_key = last.by_key if last is not None else {}
        keys: list[tuple[Any, ...]] = []
        out: list[GpuProcess] = []
        by_pid, absent = utils.by_pid(), utils.absent
        for pid, (ptype, used, gi, ci) in merged:
            sm, mem = by_pid.get(pid, absent)
            key = (pid, ptype, used, sm, mem, gi, ci)
            entry = by_key.get(key)
            if entry is None:
                # Its name stays as it was while the PID is listed (see _foreign_name).
                entry = _entry(index, key, self._foreign_name(pid))
            keys.append(key)
            out.append(entry)
        before = last.listed if last is not None else ()
        if len(before) == len(out) and all(map(operator.is_, before, out)):
            listed = before
        else:
            listed = tuple(out)
        self._lists[index] = _GpuList(index, lists, merged, utils, keys, out, listed)
        return listed

    def _list_on_gpu(
        self,
        kind: str,
        h: Any,
        migs: Callable[[], Sequence[tuple[int | None, int | None, Any]]],
        buffers: ListBuffers | None = None,
    ) -> tuple[list[Listed], int | None]:
        """The GPU's contexts of one kind, and the error that kept some from being read (None:
        the list is whole). In MIG mode the GPU's own list needs privileges (NVML: "aggregate
        information, only if the caller has appropriate privileges"); without them, each MIG
        device's list, whose contexts run in that device's instances (``migs``, asked only
        then: each MIG device's GPU and compute instance ids and handle)."""
        listed, error = self._list_processes(kind, h, buffers)
        if error != pynvml.NVML_ERROR_NO_PERMISSION:
            return listed, error
        devices = migs()
        if not devices:  # no MIG device to ask instead: the list is denied, so unknown
            return listed, error
        out: list[Listed] = []
        error = None
        for mig_gi, mig_ci, mh in devices:
            on_mig, failed = self._list_processes(kind, mh, buffers)
            error = error if failed is None else failed
            for pid, used, gi, ci in on_mig:
                out.append((pid, used, mig_gi if gi is None else gi, mig_ci if ci is None else ci))
        return out, error

    def _foreign_name(self, pid: int) -> str | None:
        """The driver's name for a PID this PID namespace cannot see (a container's, say).

        Only the driver can name it then (nvidia-smi asks it too). Visible PIDs are named from
        /proc by the process reader, so the driver is not asked. The answer (None for a visible
        PID) is kept while the PID is listed: one look at /proc per new PID, not per tick.
        """
        if pid in self._foreign_names:
            return self._foreign_names[pid]
        name = None
        if not os.path.exists(f"/proc/{pid}"):
            try:
                name = text(read(pynvml.nvmlSystemGetProcessName, pid))
            except Lost:
                name = None
        self._foreign_names[pid] = name
        return name

    def _list_processes(
        self, kind: str, h: Any, buffers: ListBuffers | None = None
    ) -> tuple[list[Listed], int | None]:
        """(pid, used bytes, GPU instance id, compute instance id) of each context, trying the
        v3, v2 then v1 call (drivers disagree); and the error that kept it from being read
        (None: read), whatever its code: an empty list then means unknown, not none."""
        # The call that worked last first; should the driver lack it after all, the others.
        apis = (self._proc_api, *_PROCESS_CALLS) if self._proc_api else tuple(_PROCESS_CALLS)
        for api in apis:
            suffix, struct = _PROCESS_CALLS[api]
            try:
                symbol = f"nvmlDeviceGet{kind}RunningProcesses{suffix}"
                result = (buffers or self._buffers).running_processes(symbol, h, struct)
            except pynvml.NVMLError as exc:
                if exc.value == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                    continue
                raise_if_lost(exc)
                return [], exc.value
            self._proc_api = api
            if buffers is not None:  # pid_memory's light read, beside a snapshot: no reuse
                return _parse_list(result, struct), None
            key = (api, result)
            parsed = self._parsed_before.get(key)
            if parsed is None:
                parsed = _parse_list(result, struct)
            self._parsed[key] = parsed
            return parsed, None
        return [], pynvml.NVML_ERROR_FUNCTION_NOT_FOUND

    def _read_process_utilization(self, index: int, h: Any) -> Utils:
        # The driver keeps per-process samples a few times a second; asking only for samples
        # newer than the last call gives nothing (NOT_FOUND) when snapshots come quickly, so
        # ask for a short window and take each process's newest sample.
        # The driver gives a sample only for a process busy within the window (NVML's
        # reference: "that had some non-zero utilization"), and NOT_FOUND when none was: a
        # listed process without one is idle (0 %), as nvitop shows it, not unknown.
        since = int((time.time() - self.PROCESS_UTIL_WINDOW_S) * 1_000_000)
        try:
            samples = self._buffers.process_utilization(h, since)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_FOUND:
                return _IDLE_UTILS
            raise_if_lost(exc)
            return _NO_UTILS  # any other error: unknown, never idle
        return Utils.of(samples) if samples else _IDLE_UTILS


_UNKNOWN_UTIL = (None, None)
_IDLE_UTIL = (0, 0)
_PID, _STAMP, _SM_MEM = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2, 3)


class Utils:
    """A GPU's per-process utilisation samples, the newest of each process, as columns;
    ``absent`` is the reading of a process with none: idle (0, 0) when the driver answered,
    unknown (None, None) when it could not."""

    __slots__ = ("_by_pid", "absent", "mem", "pids", "sm")

    def __init__(
        self,
        pids: array[int],
        sm: array[int],
        mem: array[int],
        absent: tuple[int, int] | tuple[None, None] = _IDLE_UTIL,
    ) -> None:
        self.pids, self.sm, self.mem, self.absent = pids, sm, mem, absent
        self._by_pid: dict[int, tuple[int, int]] | None = None

    @classmethod
    def of(cls, samples: bytes) -> Utils:
        """The samples of one call (several of a process: its newest is kept)."""
        if _COLUMNS:
            words = array("I", samples)
            pids = words[0::_UTIL_WORDS]
            if len(set(pids)) == len(pids):  # one sample each (nearly always): no sort
                return cls(pids, words[4::_UTIL_WORDS], words[5::_UTIL_WORDS])
        # Oldest first (a stable sort, nearly free on the driver's order): the newest sample of
        # each process is the last one the dict keeps.
        rows = sorted(UNPACK_UTIL.iter_unpack(samples), key=_STAMP)
        newest = dict(zip(map(_PID, rows), map(_SM_MEM, rows), strict=True))
        return cls(
            array("I", newest),
            array("I", (sm for sm, _ in newest.values())),
            array("I", (mem for _, mem in newest.values())),
        )

    def by_pid(self) -> dict[int, tuple[int, int]]:
        """PID -> (SM %, memory %)."""
        if self._by_pid is None:
            self._by_pid = dict(zip(self.pids, zip(self.sm, self.mem, strict=True), strict=True))
        return self._by_pid

    def moved_since(self, last: Utils) -> dict[int, tuple[int, int] | tuple[None, None]]:
        """The processes whose samples differ from ``last``'s, and their readings now."""
        pids = self.pids
        if pids == last.pids:  # the same processes in the same order: compare in place
            if self.sm == last.sm and self.mem == last.mem:
                return {}
            places = set(compress(count(), map(operator.ne, self.sm, last.sm)))
            places.update(compress(count(), map(operator.ne, self.mem, last.mem)))
            return {pids[j]: (self.sm[j], self.mem[j]) for j in places}
        now, before, absent = self.by_pid(), last.by_pid(), self.absent
        return {pid: now.get(pid, absent) for pid, _ in now.items() ^ before.items()}


_NO_UTILS = Utils(array("I"), array("I"), array("I"), _UNKNOWN_UTIL)  # not supported, denied
_IDLE_UTILS = Utils(array("I"), array("I"), array("I"))  # NOT_FOUND: no process was busy


def _parse_list(result: bytes, struct: type[ctypes.Structure]) -> list[Listed]:
    """A process list's C array as (pid, used, GI id, CI id). Unpacked in C: at thousands of
    entries, reading ctypes fields one by one costs more than the driver call."""
    if struct is ProcessInfoV1:  # no instance ids in the oldest struct
        return [
            (pid, None if used >= NO_BYTES else used, None, None)
            for pid, used in UNPACK_V1.iter_unpack(result)
        ]
    return [
        (
            pid,
            None if used >= NO_BYTES else used,
            None if gi >= _NO_ID else gi,
            None if ci >= _NO_ID else ci,
        )
        for pid, used, gi, ci in UNPACK_V2.iter_unpack(result)
    ]


def _merge(lists: tuple[list[Listed], ...]) -> list[tuple[int, _Merged]]:
    """A GPU's compute and graphics lists as one entry per PID, by PID.

    A C+G process (a CUDA context in a graphics app) is in both lists, each entry with the
    process's whole memory on this GPU: counted once, as nvidia-smi and nvitop do."""
    by_pid: dict[int, _Merged] = {}
    for listed, ptype in zip(lists, (ProcessType.COMPUTE, ProcessType.GRAPHICS), strict=True):
        for pid, used, gi, ci in listed:
            seen = by_pid.get(pid)
            if seen is None:
                by_pid[pid] = (ptype, used, gi, ci)
            else:
                merged = ptype if seen[0] is ptype else ProcessType.MIXED
                gi, ci = (seen[2], seen[3]) if seen[2] is not None else (gi, ci)
                by_pid[pid] = (merged, max_known(seen[1], used), gi, ci)
    return sorted(by_pid.items())


_make_entry = slot_maker(GpuProcess)  # every changed entry of every list, each snapshot


def _entry(index: int, key: tuple[Any, ...], driver_name: str | None) -> GpuProcess:
    pid, ptype, used, sm, mem, gi, ci = key
    return _make_entry(
        pid=pid,
        gpu_index=index,
        type=ptype,
        used_memory_bytes=used,
        sm_util_percent=sm,
        memory_util_percent=mem,
        driver_name=driver_name,
        gpu_instance_id=gi,
        compute_instance_id=ci,
    )


class _GpuList:
    """A GPU's process entries of the last snapshot and what they were made from.

    An entry whose readings are the same is that object again (and the tuple, when all are):
    at thousands of inference workers most are (the rules of per-tick work:
    gputop.engine.changes), and the pipe to gputop then carries only what changed
    (gputop.engine.process_delta).
    """

    __slots__ = ("by_key", "index", "keys", "listed", "lists", "merged", "out", "places", "utils")

    def __init__(
        self,
        index: int,
        lists: tuple[list[Listed], ...],
        merged: list[tuple[int, _Merged]],
        utils: Utils,
        keys: list[tuple[Any, ...]],
        out: list[GpuProcess],
        listed: tuple[GpuProcess, ...],
    ) -> None:
        self.index = index
        self.lists, self.merged, self.utils = lists, merged, utils
        self.keys, self.out, self.listed = keys, out, listed
        self.by_key = dict(zip(keys, out, strict=True))
        self.places: dict[int, int] | None = None  # PID -> place, made when first needed

    def moved(
        self, readings: dict[int, tuple[int, int] | tuple[None, None]], utils: Utils
    ) -> tuple[GpuProcess, ...]:
        """The list with the entries of the PIDs in ``readings`` made anew from their readings
        (SM %, memory %), the contexts unchanged; ``utils`` are the samples they came from."""
        places = self.places
        if places is None:
            places = self.places = {pid: i for i, (pid, _) in enumerate(self.merged)}
        keys, out, by_key = self.keys, self.out, self.by_key
        for pid, (sm, mem) in readings.items():
            i = places.get(pid)
            if i is None:
                continue  # a sample of a process not listed (it left between the two calls)
            ptype, used, gi, ci = self.merged[i][1]
            key = (pid, ptype, used, sm, mem, gi, ci)
            old = out[i]
            del by_key[keys[i]]
            keys[i] = key
            out[i] = by_key[key] = _entry(self.index, key, old.driver_name)
        self.utils = utils
        self.listed = tuple(out)
        return self.listed


def max_known(a: int | None, b: int | None) -> int | None:
    """The larger of two readings, either of which may be unknown."""
    if a is None or b is None:
        return a if b is None else b
    return max(a, b)


# -- readings a query asks for (gputop query) ----------------------------------------------------
# The NVML calls here are named by engine.probes tables (strings) and made only for the fields
# a query asked for. Every answer is kept: a value, or why there is none (the driver's error).
