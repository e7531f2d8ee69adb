"""A process's verdict: its states (classify, the pure core) and the note that says why, from
what was read of it (OS view, device files, whether the driver lists it).

A process is called stuck only from what was read: a holder of a GPU whose process list is not
known (lost, not responding, or the list call failed) is not evidence of anything.

A GPU process in one kernel call that has not returned (state D on readings
``BLOCKED_AFTER_S`` apart, not having run in between: ProcInfo.blocked, read by
gputop.engine.procs) is unkillable: no signal acts on it until that call returns, so its advice
is never a kill but to wait, reset the GPU once nothing else holds it, or reboot.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import psutil

from gputop.engine.model import Blocked, GpuSample, GpuState, ProcInfo, ProcState, Snapshot
from gputop.engine.proc_lookup import is_namespace_init, process_group, read_proc, session
from gputop.engine.procs import BLOCKED_AFTER_S

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
    blocked: bool = False  # in one kernel call in state D (ProcInfo.blocked)


def classify(facts: ProcFacts) -> tuple[ProcState, ...]:
    """The states of one GPU-related process, most important first (pure)."""
    if not facts.visible:
        return (ProcState.NAMESPACE,)
    states: list[ProcState] = []
    if facts.blocked and (facts.listed or facts.holds_device):
        states.append(ProcState.UNKILLABLE)  # first: whatever else it is, no signal acts on it
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


SUSPECT_NOTE = (
    "holds no /dev/nvidia* file, so this PID may name another process than the driver's "
    "(gputop in a container sees host PIDs from the driver)"
)


@dataclass(frozen=True, slots=True)
class Verdict:
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


def verdict_of(
    info: ProcInfo,
    listed: bool,
    device_files: tuple[str, ...],
    *,
    suspect: bool,
    devices: DeviceMap | None,
) -> Verdict:
    """A process's verdict, made anew (enrich keeps the last one while its inputs are equal)."""
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
        blocked=info.blocked is not None,
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
    if ProcState.UNKILLABLE in states and info.blocked is not None:
        blocked = unkillable_note(info.blocked, held)
        note = f"{blocked}; {note}" if note else blocked
    return Verdict(
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


def blocked_where(blocked: Blocked) -> str:
    """Where the kernel says a blocked process waits: "in wait_for_completion (nvidia frames:
    uvm_spin_loop [nvidia_uvm])", or "in a kernel call" when neither could be read."""
    where = f"in {blocked.wchan}" if blocked.wchan else "in a kernel call"
    if blocked.driver_frames:
        where += f" (NVIDIA driver frames: {', '.join(blocked.driver_frames)})"
    return where


KILL_WONT_HELP = (
    "kill will not help: no signal, SIGKILL included, acts on it until that call returns"
)


def unkillable_advice(gpus: Iterable[int]) -> str:
    """What frees an unkillable process's GPUs, most gentle first (never a kill)."""
    indices = sorted(set(gpus))
    reset = (
        "; ".join(f"nvidia-smi --gpu-reset -i {i}" for i in indices)
        if indices
        else "nvidia-smi --gpu-reset -i <GPU>"
    )
    return (
        "wait for the driver call to return; else reset the GPU once nothing else holds it "
        f"({reset}); else reboot"
    )


def unkillable_note(blocked: Blocked, gpus: Iterable[int] = ()) -> str:
    """The note of an unkillable process: where it waits, that kill cannot help, what can."""
    return (
        f"in uninterruptible sleep (state D) {blocked_where(blocked)}: {KILL_WONT_HELP}; "
        f"{unkillable_advice(gpus)}"
    )


def awaits_confirmation(info: ProcInfo) -> bool:
    """In state D at its last reading, not for long enough yet to be called blocked."""
    return info.status == psutil.STATUS_DISK_SLEEP and info.blocked is None


def confirm_blocked(
    make: Callable[[], Snapshot],
    *,
    wait_s: float = BLOCKED_AFTER_S,
    sleep: Callable[[float], None] = time.sleep,
) -> Snapshot:
    """A one-shot view's enriched snapshot: ``make()`` (which reads processes with the shared
    reader, :func:`read_proc`, as enrich does without one), made again after ``wait_s`` when a
    GPU process is in state D but not yet known to stay there: a disk read is in D for
    milliseconds, a hung driver call for good. One wait, however many such processes."""
    snapshot = make()
    if any(awaits_confirmation(r.info) for r in snapshot.processes):
        sleep(wait_s)
        snapshot = make()
    return snapshot


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
