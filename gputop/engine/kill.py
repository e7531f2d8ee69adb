"""Safe signalling of GPU processes: pure :func:`decide`, then :meth:`Killer.send` with a re-check.

The caller passes the identity it saw (PID + create time). Refused: PID 1, gputop itself and its
parent, a PID that now names another process (reuse), a vanished PID, another user's process
unless root, a defunct process (the parent is named instead).

``with_children``: the whole tree is collected *before* any signal (children re-parented after
their parent dies could not be found later), then signalled in one pass without waiting,
deepest children first and the process itself last, so a parent cannot restart a worker that
was signalled before it. Each PID is re-checked right before its signal. A stopped process is
sent SIGCONT right after TERM or INT, or it would not act on them until resumed.
"""

from __future__ import annotations

import contextlib
import os
import signal as signal_module
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path

import psutil

from gputop.engine.audit_log import check_audit_log
from gputop.engine.model import GpuSample, GpuState, ProcessRow, ProcInfo, ProcState, Snapshot
from gputop.engine.private_file import UnsafeFile, open_private
from gputop.engine.proc_lookup import read_proc
from gputop.engine.sanitize import clean
from gputop.units import GiB, MiB

_CREATE_TIME_TOLERANCE_S = 0.01  # the same process always reports the same create time
SENDING = "sending"  # the audit result of a signal recorded before it is sent

# How long a send waits for the process to exit before it says "still running".
GRACE_S = 2.0


class Signal(StrEnum):
    """The signals gputop sends."""

    TERM = "TERM"
    KILL = "KILL"
    INT = "INT"

    @property
    def signum(self) -> int:
        """The OS signal number."""
        return int(getattr(signal_module, f"SIG{self.value}"))


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcIdentity:
    """A process as the user saw it: a PID alone can be reused by another process."""

    pid: int
    create_time: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class TargetFacts:
    """What the OS says about a PID right now (input of the pure decide())."""

    pid: int
    exists: bool
    create_time: float | None = None
    uid: int | None = None
    user: str | None = None
    status: str | None = None
    ppid: int | None = None
    parent_name: str | None = None
    command: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a signal is not sent, in one readable line; ``suggest`` is whom to signal instead."""

    pid: int
    reason: str
    suggest: ProcIdentity | None = None
    facts: TargetFacts | None = None  # what was checked, for the audit log


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """What send() will do: signal ``targets`` in order (children first, the process last)."""

    identity: ProcIdentity
    signal: Signal
    targets: tuple[ProcIdentity, ...]
    user: str | None = None
    command: str = ""
    skipped: tuple[int, ...] = ()  # children left alone: not ours, or gputop itself
    facts: tuple[TargetFacts, ...] = ()  # what was checked of each target, as ``targets``


@dataclass(frozen=True, slots=True, kw_only=True)
class KillResult:
    """The outcome of send(). ``exited`` is None when nothing was sent or no grace period."""

    ok: bool
    message: str
    pid: int
    signal: Signal
    exited: bool | None = None
    signalled: tuple[int, ...] = ()
    still_running: tuple[int, ...] = ()
    refusal: Refusal | None = None
    # The process's descendants right before the signal, each with its parent's PID: once the
    # process is gone they are re-parented, and the aftermath could no longer name them its own.
    family: tuple[tuple[ProcIdentity, int], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """One signal about to be sent, sent, or refused, with the facts that were checked.

    ``create_time`` is the start time the user saw; ``create_time_now``, ``uid``, ``status`` and
    ``ppid`` what the OS said when it was checked; ``euid`` who asked. ``command`` is the command
    line read at that check, ``command_shown`` the one the user was shown when choosing (None
    when the caller showed none): a process may change its argv in between.
    """

    time_wall: float
    pid: int
    create_time: float | None
    user: str | None
    command: str
    signal: Signal
    result: str
    uid: int | None = None
    status: str | None = None
    ppid: int | None = None
    create_time_now: float | None = None
    euid: int | None = None
    command_shown: str | None = None


def decide(
    identity: ProcIdentity,
    signal: Signal,
    facts: TargetFacts,
    *,
    euid: int,
    own_pid: int,
    own_ppid: int,
) -> Refusal | Plan:
    """Whether ``signal`` may be sent to ``identity`` given ``facts`` (pure; no children)."""
    pid = identity.pid
    refuse = _refusal_reason(identity, facts, euid=euid, own_pid=own_pid, own_ppid=own_ppid)
    if refuse is not None:
        return Refusal(pid=pid, reason=refuse, facts=facts)
    if facts.status == psutil.STATUS_ZOMBIE:
        parent = f"{facts.ppid} ({facts.parent_name or '?'})"
        return Refusal(
            pid=pid,
            reason=f"PID {pid} is defunct and cannot be killed; signal its parent {parent} instead",
            suggest=_parent_identity(facts.ppid),
            facts=facts,
        )
    return Plan(
        identity=identity,
        signal=signal,
        targets=(identity,),
        user=facts.user,
        command=facts.command,
        facts=(facts,),
    )


def _refusal_reason(
    identity: ProcIdentity, facts: TargetFacts, *, euid: int, own_pid: int, own_ppid: int
) -> str | None:
    pid = identity.pid
    if pid <= 0:
        return f"{pid} is not a process ID"
    if pid == 1:
        return "PID 1 (init) is never signalled"
    if pid == own_pid:
        return f"PID {pid} is gputop itself"
    if pid == own_ppid:
        return f"PID {pid} is gputop's parent (the shell or terminal running it)"
    if not facts.exists:
        return f"PID {pid} has exited"
    if identity.create_time is None or facts.create_time is None:
        return f"cannot verify that PID {pid} is the process you saw (start time unknown)"
    if abs(identity.create_time - facts.create_time) > _CREATE_TIME_TOLERANCE_S:
        return (
            f"PID {pid} is now a different process: the one you saw exited and its PID was reused"
        )
    if euid != 0 and facts.uid != euid:
        owner = facts.user or (str(facts.uid) if facts.uid is not None else "an unknown user")
        return f"PID {pid} belongs to {owner}; only root can signal other users' processes"
    return None


def unkillable_reason(row: ProcessRow) -> str | None:
    """Why no signal is offered for ``row`` (one line), or None: a process in uninterruptible
    sleep acts on no signal, SIGKILL included, until its kernel call returns."""
    if ProcState.UNKILLABLE not in row.states:
        return None
    blocked = row.info.blocked
    where = f", in {clean(blocked.wchan)}" if blocked is not None and blocked.wchan else ""
    gpus = ",".join(map(str, row.gpu_indices)) or "N"
    return (
        f"PID {row.pid} is in uninterruptible sleep (state D{where}): kill cannot help, no "
        "signal (SIGKILL included) ends it until its driver call returns; wait, reset the GPU "
        f"once nothing else holds it (nvidia-smi --gpu-reset -i {gpus}), or reboot"
    )


def _parent_identity(ppid: int | None) -> ProcIdentity | None:
    if not ppid:
        return None
    return ProcIdentity(pid=ppid, create_time=read_proc(ppid).create_time)


def target_facts(pid: int) -> TargetFacts:
    """Read the facts decide() needs about ``pid`` now."""
    info = read_proc(pid, fresh=True)
    if not info.visible:
        return TargetFacts(pid=pid, exists=False)
    parent = read_proc(info.ppid) if info.ppid else None
    return _facts(info, parent.name if parent is not None else None)


def _facts(info: ProcInfo, parent_name: str | None = None) -> TargetFacts:
    return TargetFacts(
        pid=info.pid,
        exists=info.visible,
        create_time=info.create_time,
        uid=info.uid,
        user=info.user,
        status=info.status,
        ppid=info.ppid,
        parent_name=parent_name,
        command=info.command,
    )


def _descendants_deepest_first(pid: int) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    depth: dict[int, int] = {pid: 0}
    pending = list(kids)
    for _ in range(len(kids) + 1):  # parents may come after their children in psutil's list
        rest = []
        for k in pending:
            try:
                ppid = k.ppid()
            except psutil.NoSuchProcess:
                continue
            if ppid in depth:
                depth[k.pid] = depth[ppid] + 1
            else:
                rest.append(k)
        pending = rest
        if not pending:
            break
    return sorted((k for k in kids if k.pid in depth), key=lambda k: -depth[k.pid])


def _family(pid: int) -> tuple[tuple[ProcIdentity, int], ...]:
    """``pid``'s descendants now, each with its parent's PID (the ones that vanish are left out)."""
    family: list[tuple[ProcIdentity, int]] = []
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return ()
    for kid in kids:
        with contextlib.suppress(psutil.Error):
            family.append((ProcIdentity(pid=kid.pid, create_time=kid.create_time()), kid.ppid()))
    return tuple(family)


def _wait_exited(procs: list[psutil.Process], grace_s: float) -> set[int]:
    """PIDs among ``procs`` that exited (or became zombies) within ``grace_s``."""
    deadline = time.monotonic() + grace_s
    exited: set[int] = set()
    while True:
        for p in procs:
            if p.pid not in exited and _has_exited(p):
                exited.add(p.pid)
        if len(exited) == len(procs) or time.monotonic() >= deadline:
            return exited
        time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def _has_exited(proc: psutil.Process) -> bool:
    try:
        proc.wait(timeout=0)  # reaps it if it is our own child
        return True
    except psutil.TimeoutExpired:
        pass
    except psutil.NoSuchProcess:
        return True
    try:
        if proc.status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return True
    with contextlib.suppress(psutil.Error):
        proc.wait(timeout=0)  # it exited since the first try: reap it if it is ours
    return True


class Killer:
    """Sends signals after decide() and a last re-check; keeps an audit log.

    ``euid`` defaults to the real effective uid (inject one in tests). ``audit_log``: a file
    (created mode 0600: it holds other users' command lines) that every entry is appended to as
    a JSON line; checked here, so an unwritable path fails at once. It is opened anew for each
    write with the checks of :func:`open_private` (no symbolic link, FIFO or another user's
    file), so one planted after start is caught too. Each signal is written to it *before* it is
    sent (result :data:`SENDING`) and again with its outcome; when that first write fails (disk
    full, file gone read-only, a file refused) the signal is refused, never sent unrecorded.
    """

    def __init__(self, *, euid: int | None = None, audit_log: str | Path | None = None) -> None:
        self.euid = os.geteuid() if euid is None else euid
        self.audit_log = Path(audit_log) if audit_log is not None else None
        self._log: list[AuditEntry] = []
        self._lock = threading.Lock()
        if audit_log is not None:
            check_audit_log(audit_log)

    @property
    def log(self) -> tuple[AuditEntry, ...]:
        """Every signal sent or refused, oldest first."""
        with self._lock:
            return tuple(self._log)

    def decide(
        self, identity: ProcIdentity, signal: Signal, with_children: bool = False
    ) -> Refusal | Plan:
        """Refusal or Plan for ``identity`` as the OS sees it now."""
        decision = decide(
            identity,
            signal,
            target_facts(identity.pid),
            euid=self.euid,
            own_pid=os.getpid(),
            own_ppid=os.getppid(),
        )
        if isinstance(decision, Refusal) or not with_children:
            return decision
        targets: list[ProcIdentity] = []
        facts: list[TargetFacts] = []
        skipped: list[int] = []
        for kid in _descendants_deepest_first(identity.pid):
            info = read_proc(kid.pid)
            mine = self.euid == 0 or info.uid == self.euid
            if kid.pid in (os.getpid(), os.getppid()) or not mine or not info.visible:
                skipped.append(kid.pid)
            else:
                targets.append(ProcIdentity(pid=kid.pid, create_time=info.create_time))
                facts.append(_facts(info))
        targets.append(identity)
        facts.extend(decision.facts)
        return Plan(
            identity=identity,
            signal=signal,
            targets=tuple(targets),
            user=decision.user,
            command=decision.command,
            skipped=tuple(skipped),
            facts=tuple(facts),
        )

    def send(
        self,
        identity: ProcIdentity,
        signal: Signal,
        *,
        with_children: bool = False,
        grace_s: float = GRACE_S,
        command_shown: str | None = None,
    ) -> KillResult:
        """Signal the process (and its children); wait up to ``grace_s`` to report ``exited``.

        ``command_shown``: the command line the user saw for ``identity`` when choosing; the audit
        log records it beside the one read right before the signal.
        """
        decision = self.decide(identity, signal, with_children)
        if isinstance(decision, Refusal):
            facts = decision.facts or TargetFacts(pid=identity.pid, exists=False)
            error = self._record(
                [self._entry(identity, signal, facts, f"refused: {decision.reason}", command_shown)]
            )
            return KillResult(
                ok=False,
                message=decision.reason + _unrecorded(error),
                pid=identity.pid,
                signal=signal,
                refusal=decision,
            )
        intents = [
            self._entry(target, signal, facts, SENDING, _shown(target, identity, command_shown))
            for target, facts in zip(decision.targets, decision.facts, strict=True)
        ]
        error = self._record(intents)
        if error is not None:
            reason = (
                f"{signal} not sent to PID {identity.pid}: cannot write the audit log ({error})"
            )
            refusal = Refusal(pid=identity.pid, reason=reason)
            return KillResult(
                ok=False, message=reason, pid=identity.pid, signal=signal, refusal=refusal
            )
        family = _family(identity.pid)
        sent: list[psutil.Process] = []
        failed: dict[int, str] = {}
        for target in decision.targets:
            proc, why = _signal_verified(target, signal)
            if proc is not None:
                sent.append(proc)
            else:
                failed[target.pid] = why
        result = self._result(decision, sent, failed, grace_s, command_shown)
        return replace(result, family=family)

    def _result(
        self,
        plan: Plan,
        sent: list[psutil.Process],
        failed: dict[int, str],
        grace_s: float,
        command_shown: str | None,
    ) -> KillResult:
        pid, sig = plan.identity.pid, plan.signal
        exited_pids = _wait_exited(sent, grace_s) if grace_s > 0 else set()
        signalled = tuple(p.pid for p in sent)
        ok = pid in signalled
        if not ok:
            message = f"{sig} not sent to PID {pid}: {failed.get(pid, 'unknown error')}"
            exited: bool | None = None
        elif grace_s <= 0:
            message, exited = f"sent {sig} to PID {pid}", None
        elif pid in exited_pids:
            message, exited = f"sent {sig} to PID {pid}; it exited", True
        else:
            message = f"sent {sig} to PID {pid}; still running after {grace_s:g} s"
            exited = False
        if len(plan.targets) > 1:
            message += (
                f" (with {len(signalled) - (1 if ok else 0)} of {len(plan.targets) - 1} children)"
            )
        outcomes = [
            self._entry(
                target,
                sig,
                facts,
                failed.get(target.pid) or ("exited" if target.pid in exited_pids else "sent"),
                _shown(target, plan.identity, command_shown),
            )
            for target, facts in zip(plan.targets, plan.facts, strict=True)
        ]
        message += _unrecorded(self._record(outcomes))
        still = tuple(p for p in signalled if p not in exited_pids)
        return KillResult(
            ok=ok,
            message=message,
            pid=pid,
            signal=sig,
            exited=exited,
            signalled=signalled,
            still_running=still if grace_s > 0 else (),
        )

    def _entry(
        self,
        identity: ProcIdentity,
        signal: Signal,
        facts: TargetFacts,
        result: str,
        command_shown: str | None = None,
    ) -> AuditEntry:
        return AuditEntry(
            time_wall=time.time(),
            pid=identity.pid,
            create_time=identity.create_time,
            user=facts.user,
            command=facts.command,
            signal=signal,
            result=result,
            uid=facts.uid,
            status=facts.status,
            ppid=facts.ppid,
            create_time_now=facts.create_time,
            euid=self.euid,
            command_shown=command_shown,
        )

    def _record(self, entries: list[AuditEntry]) -> str | None:
        """Keep ``entries`` and append them to the audit file; why that failed, or None."""
        with self._lock:
            self._log.extend(entries)
            if self.audit_log is None:
                return None
            import json  # here: only an audit log needs it, and the dashboard loads this module

            data = "".join(json.dumps(asdict(e)) + "\n" for e in entries).encode()
            where = clean(str(self.audit_log))  # the message is shown in the dashboard
            try:
                # Opened and checked again each time: a link or a chmod may come after start.
                fd = open_private(self.audit_log, append=True)
            except UnsafeFile as exc:
                return f"{where}: {exc.reason}"
            try:
                written = os.write(fd, data)
            except OSError as exc:
                return f"{where}: {exc.strerror or exc}"
            finally:
                os.close(fd)
            if written != len(data):
                return f"{where}: short write (disk full?)"
            return None


def _shown(target: ProcIdentity, chosen: ProcIdentity, command_shown: str | None) -> str | None:
    """What the user was shown for ``target``: only the chosen process had its row on screen."""
    return command_shown if target == chosen else None


def _unrecorded(error: str | None) -> str:
    return "" if error is None else f" (audit log not written: {error})"


def _signal_verified(target: ProcIdentity, signal: Signal) -> tuple[psutil.Process | None, str]:
    """Re-check ``target`` is still the same process, then signal it: (process, error)."""
    try:
        proc = psutil.Process(target.pid)
        if target.create_time is None or (
            abs(proc.create_time() - target.create_time) > _CREATE_TIME_TOLERANCE_S
        ):
            return None, "its PID now names a different process"
        stopped = proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
        proc.send_signal(signal.signum)
        if stopped and signal is not Signal.KILL:
            # A stopped process only acts on TERM/INT once continued (as systemd does too).
            proc.send_signal(signal_module.SIGCONT)
    except psutil.NoSuchProcess:
        return None, "it had already exited"
    except psutil.AccessDenied:
        return None, "not permitted"
    return proc, ""


# -- aftermath: did the GPU memory come back? ----------------------------------------------
# A process that exited may leave its GPU memory taken: a forked child still holds the device
# files, a zombie's child does, a process in another PID namespace does, or the driver is stuck.
# The watch below follows the sampler's snapshots (no reading of its own) for FOLLOW_S seconds.

FOLLOW_S = 5.0  # how long the memory of the processes signalled is followed
_NAMED_AT_MOST = 3  # holders named in one line; the rest are counted


@dataclass(frozen=True, slots=True, kw_only=True)
class Holding:
    """A process that still holds a GPU after a signal, and why it matters."""

    pid: int
    name: str
    why: str  # "still running", "child of 4139", "unkillable (state D)", ...
    kind: str  # "signalled", "killable", "unkillable", "namespace"

    @property
    def label(self) -> str:
        """``PID 4141 (python3, child of 4139)``."""
        return (
            f"PID {self.pid} ({self.name}, {self.why})"
            if self.name
            else f"PID {self.pid} ({self.why})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Release:
    """One GPU's memory after a signal: released (True), not (False), or not known (None)."""

    gpu_index: int
    held_bytes: int  # what the driver listed for the processes signalled, right before
    released: bool | None
    holders: tuple[Holding, ...] = ()
    line: str = ""


@dataclass(frozen=True, slots=True)
class _Before:
    index: int
    held_bytes: int
    used_bytes: int | None


class MemoryWatch:
    """Follows the GPU memory of the processes some signals went to, on the sampler's snapshots.

    Made from the snapshot shown when the signal was chosen and the KillResults; fed every
    snapshot after (:meth:`observe`), it answers once: every GPU released, or ``follow_s``
    seconds of readings after the signal, or (no reading came: paused, driver hung) twice that
    in wall time. A GPU counts as released when the driver lists none of the processes on it and
    its used memory fell by at least half of what they held (others may allocate meanwhile).
    """

    def __init__(
        self,
        before: Snapshot | None,
        results: Iterable[KillResult],
        *,
        sent_at_mono: float,
        follow_s: float = FOLLOW_S,
    ) -> None:
        sent = [r for r in results if r.ok]
        self.signals = tuple(dict.fromkeys(r.signal for r in sent))
        self.signalled = frozenset(pid for r in sent for pid in r.signalled)
        # Each descendant at the signal: (its start time, its parent's PID).
        self.family = {kid.pid: (kid.create_time, ppid) for r in sent for kid, ppid in r.family}
        self.sent_at_mono = sent_at_mono
        self.follow_s = follow_s
        self._latest: Snapshot | None = None
        self._before: tuple[_Before, ...] = ()
        if before is not None:
            self._before = tuple(
                _Before(g.index, held, g.memory_used_bytes)
                for g in before.gpus
                if (held := _listed_bytes(g, self.signalled)) > 0
            )

    @property
    def following(self) -> bool:
        """Whether the processes signalled had GPU memory to follow."""
        return bool(self._before)

    def observe(self, snapshot: Snapshot | None, now_mono: float) -> tuple[Release, ...] | None:
        """The verdict per GPU once known; None while still following."""
        if not self._before:
            return ()
        if (
            snapshot is not None
            and snapshot.stale_s is None
            and snapshot.taken_at_mono >= self.sent_at_mono
        ):
            self._latest = snapshot
        latest = self._latest
        deadline = self.sent_at_mono + self.follow_s
        if latest is not None and (
            latest.taken_at_mono >= deadline or all(self._released(b, latest) for b in self._before)
        ):
            return self._verdict(latest)
        if now_mono >= deadline + self.follow_s:
            return self._verdict(latest)
        return None

    def _released(self, before: _Before, snap: Snapshot) -> bool | None:
        gpu = snap.gpu(before.index)
        if gpu is None or gpu.state is not GpuState.OK or gpu.process_list_error is not None:
            return None
        if _listed_bytes(gpu, self.signalled) > 0:
            return False
        if before.used_bytes is None or gpu.memory_used_bytes is None:
            return True  # the driver lists none of them: all it can tell
        return before.used_bytes - gpu.memory_used_bytes >= before.held_bytes // 2

    def _verdict(self, snap: Snapshot | None) -> tuple[Release, ...]:
        out = []
        for b in self._before:
            size = _size(b.held_bytes)
            released = self._released(b, snap) if snap is not None else None
            if released:
                out.append(
                    Release(
                        gpu_index=b.index,
                        held_bytes=b.held_bytes,
                        released=True,
                        line=f"✓ GPU {b.index}: {size} released",
                    )
                )
            elif released is None or snap is None:
                line = (
                    f"GPU {b.index}: cannot tell whether {size} was released: "
                    "no reading of it since the signal"
                )
                out.append(
                    Release(gpu_index=b.index, held_bytes=b.held_bytes, released=None, line=line)
                )
            else:
                holders = self._holders(b.index, snap)
                line = (
                    f"GPU {b.index}: {size} not released after {self.follow_s:g} s: "
                    + _held_by(holders, snap)
                    + "; next: "
                    + self._next_step(b.index, holders)
                )
                out.append(
                    Release(
                        gpu_index=b.index,
                        held_bytes=b.held_bytes,
                        released=False,
                        holders=holders,
                        line=line,
                    )
                )
        return tuple(out)

    def _holders(self, index: int, snap: Snapshot) -> tuple[Holding, ...]:
        """Who still holds GPU ``index``: the processes signalled that live on, their
        descendants, unkillable and other holders of its device files, and the PIDs the driver
        lists that this PID namespace cannot see."""
        found: dict[int, Holding] = {}
        for pid in sorted(self.signalled):
            info = read_proc(pid, fresh=True)
            if info.visible and info.status != psutil.STATUS_ZOMBIE:
                why = "unkillable (state D)" if info.blocked is not None else "still running"
                kind = "unkillable" if info.blocked is not None else "signalled"
                found[pid] = Holding(pid=pid, name=clean(info.name or ""), why=why, kind=kind)
        for row in snap.processes:
            if row.pid in found or row.pid in self.signalled or index not in row.gpu_indices:
                continue
            holding = self._holding(row)
            if holding is not None:
                found[row.pid] = holding
        order = {"signalled": 0, "killable": 1, "unkillable": 2, "namespace": 3}
        return tuple(sorted(found.values(), key=lambda h: (order[h.kind], h.pid)))

    def _holding(self, row: ProcessRow) -> Holding | None:
        name = clean(row.info.name or "")
        if row.state is ProcState.NAMESPACE:
            return Holding(pid=row.pid, name=name, why="in another PID namespace", kind="namespace")
        if ProcState.UNKILLABLE in row.states:
            return Holding(pid=row.pid, name=name, why="unkillable (state D)", kind="unkillable")
        parent = self._parent_at_signal(row)
        defunct = "defunct " if row.info.status == psutil.STATUS_ZOMBIE else ""
        if parent is not None:
            return Holding(
                pid=row.pid, name=name, why=f"{defunct}child of {parent}", kind="killable"
            )
        if row.device_files and ProcState.ACTIVE not in row.states:
            return Holding(
                pid=row.pid, name=name, why=f"{row.state.value}, holds the device", kind="killable"
            )
        return None  # another job, with memory of its own

    def _parent_at_signal(self, row: ProcessRow) -> int | None:
        """The parent ``row``'s process had at the signal, when it descended from one signalled."""
        known = self.family.get(row.pid)
        if known is None or not _same_start(known[0], row.info.create_time):
            return None  # not one of theirs, or its PID was reused since
        return known[1]

    def _next_step(self, index: int, holders: tuple[Holding, ...]) -> str:
        reset = (
            f"a GPU reset once nothing else holds it (nvidia-smi --gpu-reset -i {index}), "
            "or a reboot"
        )
        steps = []
        running = [h.pid for h in holders if h.kind == "signalled"]
        killable = [h.pid for h in holders if h.kind == "killable"]
        unkillable = [h.pid for h in holders if h.kind == "unkillable"]
        namespace = [h.pid for h in holders if h.kind == "namespace"]
        if running and Signal.KILL not in self.signals:
            steps.append(f"send KILL to {_pids(running)}")
        elif running:
            unkillable = running + unkillable
        if killable:
            steps.append(f"signal {_pids(killable)} (its row, k)")
        if namespace:
            steps.append(f"stop {_pids(namespace)} from its container or the host")
        if unkillable:
            steps.append(f"{reset}: kill cannot end {_pids(unkillable)}")
        if not steps:
            steps.append(reset)
        return "; then ".join(steps)


def _held_by(holders: tuple[Holding, ...], snap: Snapshot) -> str:
    if not holders:
        note = f" ({snap.holder_scan_note})" if snap.holder_scan_note else ""
        return f"no process that holds it is visible here{note}"
    named = ", ".join(h.label for h in holders[:_NAMED_AT_MOST])
    more = len(holders) - _NAMED_AT_MOST
    return "still held by " + named + (f" and {more} more" if more > 0 else "")


def _pids(pids: list[int]) -> str:
    return ", ".join(map(str, pids[:_NAMED_AT_MOST])) + (" …" if len(pids) > _NAMED_AT_MOST else "")


def _same_start(seen: float | None, now: float | None) -> bool:
    return seen is not None and now is not None and abs(seen - now) <= _CREATE_TIME_TOLERANCE_S


def _listed_bytes(gpu: GpuSample, pids: frozenset[int]) -> int:
    """What the driver lists for ``pids`` on ``gpu``."""
    return sum(p.used_memory_bytes or 0 for p in gpu.processes if p.pid in pids)


def _size(value_bytes: int) -> str:
    if value_bytes >= GiB:
        return f"{value_bytes / GiB:.1f} GiB"
    return f"{value_bytes / MiB:.0f} MiB"
