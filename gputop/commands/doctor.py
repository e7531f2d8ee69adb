"""`gputop doctor`: a plain-text diagnosis of stuck GPU processes and unattributed memory.

Exit 0 when nothing is stuck; 1 when a process holds a GPU without working (holder, defunct,
orphan, stopped, unkillable) or a GPU has memory in use that no listed process accounts for; 3
when some GPU did not answer within ``--timeout`` (the diagnosis of the others is printed all
the same, and one line on stderr names the call that hung). Advice follows each GPU's state
now: a reset or reboot only for a LOST GPU; for one NOT RESPONDING, to wait and look at the
driver. An unkillable process (state D in a kernel call that has not returned) gets no kill
command: what frees it is the call returning, a GPU reset once nothing else holds the GPU, or a
reboot.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

from gputop import glyphs, units
from gputop.argtypes import add_timeout_argument
from gputop.engine.deadline import (
    DEFAULT_TIMEOUT_S,
    gpu_indices,
    not_responding,
    read_within,
    timeout_message,
)
from gputop.engine.enrich import attributed_memory_bytes, enrich, unattributed_tolerance_bytes
from gputop.engine.gpu_health import ACTION_NEEDED, assess_all, health_lines
from gputop.engine.holders import HolderScan, scan_holders
from gputop.engine.model import GpuSample, GpuState, ProcessRow, ProcState, Snapshot
from gputop.engine.verdicts import KILL_WONT_HELP, blocked_where, confirm_blocked
from gputop.errors import DriverTimeout, UsageError
from gputop.exits import EXIT_OK, EXIT_STUCK, reader_may_leave, say


@dataclass(frozen=True, slots=True, kw_only=True)
class Diagnosis:
    """What doctor found: the text to print and whether anything is stuck."""

    text: str
    stuck_processes: tuple[ProcessRow, ...]
    unattributed: tuple[tuple[int, int], ...]
    silent_gpus: tuple[int, ...] = ()  # GPUs the driver did not answer for in time
    # GPUs whose health verdict asks for a reset, a reboot or replacing (gputop.engine.gpu_health)
    sick_gpus: tuple[int, ...] = ()

    @property
    def exit_code(self) -> int:
        """0: healthy; 1: something is stuck or a GPU needs a reset, a reboot or replacing; 3: some
        GPU did not answer (the view is partial)."""
        if self.silent_gpus:
            return DriverTimeout.exit_code
        found = self.stuck_processes or self.unattributed or self.sick_gpus
        return EXIT_STUCK if found else EXIT_OK


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `gputop doctor`."""
    parser.add_argument(
        "--dev-dir",
        default=None,
        metavar="DIR",
        help="directory holding the nvidia* device files (default /dev; the demo's own folder)",
    )
    add_timeout_argument(parser, default_s=DEFAULT_TIMEOUT_S)


def run(args: argparse.Namespace) -> int:
    """Read the box once, print the diagnosis, return 0 (healthy), 1 (something stuck) or 3 (a
    GPU did not answer within --timeout)."""
    from gputop.sources import (  # local: the driver only when the command runs
        source_from_args,
        timeout_of,
    )

    source = source_from_args(args, fallback_to_demo=False)
    try:
        snapshot = read_within(source, timeout_of(args))
        dev_dir = getattr(args, "dev_dir", None) or source.dev_dir
        if not os.path.isdir(dev_dir):
            raise UsageError(f"--dev-dir {dev_dir}: not a directory")
        # Before close(): closing the demo ends its real processes and removes their folder.
        holders = scan_holders(dev_dir)
        read = snapshot
        # A process in state D is looked at again before it is called unkillable.
        snapshot = confirm_blocked(lambda: enrich(read, holders=holders))
    finally:
        source.close()
    diagnosis = diagnose(snapshot, holders)
    # Commands and names may hold characters an ISO-8859-1 or ASCII stdout cannot encode.
    with reader_may_leave(sys.stdout):  # `doctor | head -1` still exits with the verdict
        sys.stdout.write(glyphs.safe_text(diagnosis.text, glyphs.output_encoding(sys.stdout)))
    message = timeout_message(snapshot)
    if message is not None:
        sys.stdout.flush()  # the diagnosis first, then the line that explains what is missing
        say(message)
    return diagnosis.exit_code


def _is_forked_worker(row: ProcessRow, active_pids: set[int]) -> bool:
    """A holder whose parent is an active GPU process: a worker that inherited the device fds."""
    return row.state is ProcState.HOLDER and row.info.ppid in active_pids


def fix_command(row: ProcessRow) -> str:
    """The shell command that would clean this process up."""
    pid = row.pid
    if ProcState.UNKILLABLE in row.states:
        return f"# none: PID {pid} is in state D; {KILL_WONT_HELP} (see its advice)"
    if row.state is ProcState.DEFUNCT:
        ppid = row.info.ppid
        if not ppid or ppid == 1:
            return f"# PID {pid} waits for init to reap it; if it stays, it is stuck in the kernel"
        return f"kill -TERM {ppid}   # the parent; a zombie cannot be killed, it must be reaped"
    if row.state is ProcState.STOPPED:
        return f"kill -CONT {pid}   # resume it, or: kill -KILL {pid}"
    return f"kill -TERM {pid}   # then, if it does not exit: kill -KILL {pid}"


# What to do about a GPU, by its state as read now (a GPU that answers again gets neither).
LOST_ADVICE = "the driver has lost it: reset it (nvidia-smi -r) or reboot to recover it"
NOT_RESPONDING_ADVICE = (
    "it may answer again: wait, and check the driver (dmesg for Xid errors, nvidia-smi); "
    "it is not known to be lost"
)


def _gpu_line(gpu: GpuSample, unattributed: dict[int, int]) -> str:
    head = f"GPU {gpu.index}  {gpu.name or 'unknown'}"
    if gpu.state is GpuState.NOT_RESPONDING:
        waited = f" within {gpu.stale_s:.0f} s" if gpu.stale_s is not None else " in time"
        return (
            f"{head}: NOT RESPONDING: the driver did not answer for it{waited} "
            f"({gpu.error or 'no reason given'}); its processes and memory are unknown"
            f"\n  {NOT_RESPONDING_ADVICE}"
        )
    if gpu.state is GpuState.LOST:
        return f"{head}: LOST ({gpu.error or 'no reason given'})\n  {LOST_ADVICE}"
    if gpu.state is not GpuState.OK:
        return f"{head}: {gpu.state.value.upper()} ({gpu.error or 'no reason given'})"
    listed = len(gpu.processes)
    used, attributed = gpu.memory_used_bytes, attributed_memory_bytes(gpu)
    if gpu.process_list_error is not None:
        return (
            f"{head}: used {units.mib_grouped(used)}; its process list could not be read "
            f"({gpu.process_list_error}): its processes are unknown, not diagnosed"
        )
    line = (
        f"{head}: used {units.mib_grouped(used)}, attributed "
        f"{units.mib_grouped(attributed)} to {listed} process{'es' if listed != 1 else ''}"
    )
    if gpu.index in unattributed:
        allowance = unattributed_tolerance_bytes(gpu)
        line += (
            f"\n  UNATTRIBUTED {units.mib_grouped(unattributed[gpu.index])} (beyond the driver's "
            f"{units.mib_grouped(allowance)} allowance): no listed process accounts "
            "for it; a stuck worker or a process in another container holds it"
        )
    return line


def _process_lines(row: ProcessRow, *, with_note: bool = True) -> list[str]:
    info = row.info
    states = "+".join(s.value for s in row.states)
    gpus = ",".join(str(i) for i in row.gpu_indices) or "-"
    lines = [
        f"  PID {row.pid}  [{states}]  user {info.user or '?'}  GPU {gpus}  "
        f"mem {units.mib_grouped(row.used_memory_bytes)}  {info.command or '?'}"
    ]
    if row.device_files:
        lines.append(f"      holds {', '.join(row.device_files)}")
    if row.parent_note and with_note:
        lines.append(f"      {row.parent_note}")
    if info.note and (info.visible or row.state is ProcState.EXITED):
        lines.append(f"      note: {info.note}")
    return lines


def diagnose(snapshot: Snapshot, holders: HolderScan | None = None) -> Diagnosis:
    """The doctor's report for an enriched snapshot (pure apart from the text it builds)."""
    active = {r.pid for r in snapshot.processes if ProcState.ACTIVE in r.states}
    workers = [r for r in snapshot.processes if _is_forked_worker(r, active)]
    silent = tuple(g.index for g in not_responding(snapshot))
    unlisted = tuple(
        g.index for g in snapshot.gpus if g.state is GpuState.OK and g.process_list_error
    )
    # enrich calls no holder of a GPU whose processes could not be read stuck: unknown.
    unknown = [r for r in snapshot.processes if r.state is ProcState.UNKNOWN]
    stuck = [r for r in snapshot.processes if r.stuck and r not in workers]
    unkillable = [r for r in stuck if ProcState.UNKILLABLE in r.states]
    unattributed = dict(snapshot.unattributed_memory_bytes)
    out = [f"gputop doctor: {snapshot.system.hostname}, driver {snapshot.system.driver_version}"]
    if snapshot.system.simulated:
        out[0] += " (SIMULATED)"
    if holders is not None:
        out.append(f"holder scan: {holders.scanned} processes, {len(holders.holders)} hold a GPU")
    if snapshot.holder_scan_note:
        out.append(f"note: {snapshot.holder_scan_note}")
    if snapshot.hidden_pids_note:
        out.append(f"note: {snapshot.hidden_pids_note}")
    out.append("")
    out.extend(_gpu_line(g, unattributed) for g in snapshot.gpus)
    out.extend(
        _section("Stuck processes", [r for r in stuck if r not in unkillable], with_fix=True)
    )
    out.extend(_unkillable_section(unkillable, snapshot))
    out.extend(
        _section("Workers forked from active GPU processes (released when they exit)", workers)
    )
    exited = [r for r in snapshot.processes if r.state is ProcState.EXITED]
    out.extend(
        _section("Exited, yet still listed by the driver (its memory not yet freed)", exited)
    )
    on_lost = [r for r in snapshot.processes if r.state is ProcState.ON_LOST_GPU]
    out.extend(
        _section("On a lost GPU (not counted as stuck: its processes cannot be listed)", on_lost)
    )
    out.extend(
        _section(
            "On a GPU whose processes could not be read (not counted as stuck: unknown)", unknown
        )
    )
    health = health_lines(snapshot)
    if health:
        out.extend(
            ["", "Health verdicts (what no signal can fix):", *(f"  {line}" for line in health)]
        )
    sick = tuple(h.index for h in assess_all(snapshot) if h.verdict in ACTION_NEEDED)
    hidden = [r for r in snapshot.processes if ProcState.NAMESPACE in r.states]
    if hidden:
        out.append("")
        out.append(f"{len(hidden)} process(es) listed by the driver are not visible here")
        out.append(
            f"  ({hidden[0].info.note}): "
            + ", ".join(f"{r.pid} ({r.info.name})" if r.info.name else str(r.pid) for r in hidden)
        )
    out.append("")
    out.append(_verdict(len(stuck), len(unattributed), silent, unlisted, len(unkillable), sick))
    return Diagnosis(
        text="\n".join(out) + "\n",
        stuck_processes=tuple(stuck),
        unattributed=tuple(unattributed.items()),
        silent_gpus=silent,
        sick_gpus=sick,
    )


def _section(title: str, rows: list[ProcessRow], *, with_fix: bool = False) -> list[str]:
    if not rows:
        return []
    lines = ["", f"{title} ({len(rows)}):"]
    for row in rows:
        lines.extend(_process_lines(row))
        if with_fix:
            lines.append(f"      fix: {fix_command(row)}")
    return lines


def _unkillable_section(rows: list[ProcessRow], snapshot: Snapshot) -> list[str]:
    """Unkillable processes with what will free their GPUs instead of a kill: wait, reset each
    GPU once nothing else holds it (naming what still does), or reboot."""
    if not rows:
        return []
    lines = [
        "",
        f"Unkillable: in a kernel call that has not returned, state D ({len(rows)}):",
    ]
    for row in rows:
        lines.extend(_process_lines(row, with_note=False))
        blocked = row.info.blocked
        if blocked is not None:
            lines.append(f"      waits {blocked_where(blocked)}")
            if not blocked.stack_read:
                lines.append("      (its kernel stack is readable as root only)")
        lines.append(f"      {KILL_WONT_HELP}. What will:")
        lines.append("      1. wait: the call may return (a driver timeout, a recovered GPU)")
        for index in row.gpu_indices or (None,):
            lines.extend(_reset_step(index, row, snapshot))
        lines.append("      3. reboot: frees every GPU; ends every process on the machine")
    return lines


def _reset_step(index: int | None, row: ProcessRow, snapshot: Snapshot) -> list[str]:
    """Step 2 for one GPU: the reset, what must go first, what it costs, when it fails."""
    if index is None:  # no GPU known for it: the driver lists it nowhere, its file is no GPU's
        return [
            "      2. reset its GPU once nothing else holds it: nvidia-smi --gpu-reset -i <GPU>"
        ]
    others = [r for r in snapshot.processes if index in r.gpu_indices and r.pid != row.pid]
    held = (
        " (now also held by "
        + ", ".join(f"{r.pid} ({r.info.name or '?'})" for r in others[:5])
        + (" …" if len(others) > 5 else "")
        + ": stop those first)"
        if others
        else ""
    )
    return [
        f"      2. reset GPU {index} once nothing else holds it{held}:",
        f"           nvidia-smi --gpu-reset -i {index}   # ends every context on GPU {index}, "
        "clears its memory",
        "         the driver refuses while a process holds the GPU, this one included: then reboot",
    ]


def _verdict(
    stuck: int,
    unattributed: int,
    silent: tuple[int, ...] = (),
    unlisted: tuple[int, ...] = (),
    unkillable: int = 0,
    sick: tuple[int, ...] = (),
) -> str:
    partial = ""
    if silent:
        partial = f" ({gpu_indices(silent)} did not answer: not diagnosed)"
    if unlisted:
        partial += f" ({gpu_indices(unlisted)} gave no process list: not diagnosed)"
    if not stuck and not unattributed and not sick:
        if partial:
            return f"INCOMPLETE: nothing stuck on the GPUs that answered{partial}."
        return "OK: nothing stuck."
    parts = []
    if stuck:
        parts.append(f"{stuck} stuck process{'es' if stuck != 1 else ''}")
        if unkillable:
            parts[-1] += f" ({unkillable} unkillable: kill will not help)"
    if unattributed:
        parts.append(
            f"{unattributed} GPU{'s' if unattributed != 1 else ''} with unattributed memory"
        )
    if sick:
        verb = "needs" if len(sick) == 1 else "need"
        parts.append(f"{gpu_indices(sick)} {verb} a reset, a reboot or replacing")
    hint = "" if os.geteuid() == 0 else " (not root: some holders may be missing)"
    return "STUCK: " + ", ".join(parts) + hint + partial + "."
