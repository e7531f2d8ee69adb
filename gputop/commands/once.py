"""``gputop --once``: one line per GPU in the spirit of ``gpustat -cp`` (no Textual here).

Layout::

    host  2026-11-22 18:54:09  driver 550.54.15  CUDA 12.4  DEMO
    [0]   NVIDIA A100-SXM4-80GB | 61°C,  85 % | 61234 / 81920 MiB | alice:python/1234(20480M)
    [2→0] NVIDIA L40S           | 52°C,  35 % | 20480 / 46068 MiB | serve(18000M)
    [3]   NVIDIA H100 80GB HBM3 | 41°C,   N/A | 51207 / 81559 MiB
     ├ 3/1  3g.40gb |   N/A | 30615 / 40448 MiB | alice:python/1235(28529M) bob:jupyter-lab(2048M)
     └ 3/13 1g.10gb |   N/A |  6212 /  9984 MiB | carol:python(6200M)

A GPU in MIG mode has a line per MIG device under it: GPU/GPU instance (``3/1``; then ``/CI``
where a GPU instance has several compute instances), the profile as nvidia-smi names it, its
utilisation (NVML gives none in MIG mode: N/A), its memory and the processes running on it.

A GPU that fell off the bus is ``LOST (reason)``; one the driver did not answer for within
``--timeout`` is ``NOT RESPONDING for 5 s (nvmlDeviceGetPowerUsage did not return)``. A GPU whose
health verdict (gputop.engine.gpu_health) is not ok has it in brackets after its readings, with
the worst evidence: ``[reset needed: recovery: GPU reset +1]``, ``[reboot needed: Xid 79]``.

``[2→0]``: NVML index 2 is CUDA device 0 in a program started from this shell (shown only when
CUDA_VISIBLE_DEVICES or CUDA_DEVICE_ORDER make the two differ; ``→-`` means CUDA will not see it).
A process is ``[user:]name[/pid](memory)`` (``-u``; ``-c`` for the full command; ``-p``),
followed by its state in brackets when it is not simply active (e.g. ``[holder]``). Lines never
exceed the width, counted in terminal cells (a CJK character takes two, a combining mark
none): the process list ends in ``…+N`` and, if needed, the name is shortened.
Where stdout cannot carry Unicode (an ISO-8859-1 or ASCII locale), ``->``, ``...`` and ``61C``
stand in for the glyphs, and any other character it cannot encode becomes an ASCII stand-in.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, replace
from datetime import datetime

from gputop import glyphs, units
from gputop.cells import cell_len, cut, ljust
from gputop.engine.gpu_health import Verdict, assess
from gputop.engine.model import GpuSample, GpuState, MigDevice, ProcessRow, ProcState, Snapshot
from gputop.glyphs import Glyphs
from gputop.units import Level

_MIN_PARTIAL = 8  # a process token cut shorter than this says nothing
_LEVEL_STYLE = {Level.OK: "32", Level.WARN: "33", Level.HOT: "91", Level.CRIT: "1;31"}


@dataclass(frozen=True, slots=True, kw_only=True)
class OnceOptions:
    """What ``--once`` shows; ``width`` None means the terminal's width.

    ``encoding``: what the text will be encoded as (None: what stdout can carry); it decides
    between Unicode glyphs and ASCII stand-ins.
    """

    show_cmd: bool = False
    show_pid: bool = False
    show_user: bool = False
    show_fan: bool = False
    show_power: bool = False
    color: bool = False
    width: int | None = None
    encoding: str | None = None


@dataclass(frozen=True, slots=True)
class _Seg:
    """A run of text with one ANSI SGR style ("" for none)."""

    text: str
    style: str = ""


_Line = list[_Seg]


def _length(line: _Line) -> int:
    """The line's width in terminal cells (a CJK character takes two)."""
    return sum(cell_len(s.text) for s in line)


def _paint(line: _Line, color: bool) -> str:
    if not color:
        return "".join(s.text for s in line)
    return "".join(f"\x1b[{s.style}m{s.text}\x1b[0m" if s.style else s.text for s in line)


def _clip(line: _Line, width: int, ellipsis: str) -> _Line:
    """The line cut to ``width`` cells, ending in an ellipsis when something was cut."""
    if _length(line) <= width:
        return line
    room = max(width - cell_len(ellipsis), 0)
    out: _Line = []
    for seg in line:
        if room <= 0:
            break
        out.append(_Seg(cut(seg.text, room), seg.style))
        room -= cell_len(out[-1].text)
    if width > 0:
        out.append(_Seg(cut(ellipsis, width)))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Proc:
    """One process as the --once line needs it, from either source of process data."""

    pid: int
    user: str | None = None
    name: str | None = None  # the short command name, e.g. "python"
    used_memory_bytes: int | None = None
    state: ProcState = ProcState.ACTIVE
    mig: MigDevice | None = None  # the MIG device it runs on (its GPU is in MIG mode)


def _mig_of(gpu: GpuSample, pid: int) -> MigDevice | None:
    """The MIG device of ``gpu`` that the driver lists ``pid`` on, if any."""
    if not gpu.mig_devices:
        return None
    for proc in gpu.processes:
        if proc.pid == pid:
            return gpu.mig_device_of(proc)
    return None


def _row_memory(row: ProcessRow, gpu: GpuSample) -> int | None:
    """This GPU's share: NVML's per-GPU figure when listed, else the row's (single-GPU) sum."""
    for proc in gpu.processes:
        if proc.pid == row.pid:
            return proc.used_memory_bytes
    return row.used_memory_bytes if len(row.gpu_indices) <= 1 else None


def _procs_for(gpu: GpuSample, snapshot: Snapshot) -> list[_Proc]:
    """The GPU's processes: enriched rows when the snapshot has them, else NVML's bare list."""
    if not snapshot.processes:
        return [
            _Proc(pid=p.pid, used_memory_bytes=p.used_memory_bytes, mig=gpu.mig_device_of(p))
            for p in gpu.processes
        ]
    return [
        _Proc(
            pid=row.pid,
            user=row.info.user,
            name=row.info.name or _basename(row.info.cmdline),
            used_memory_bytes=_row_memory(row, gpu),
            state=row.state,
            mig=_mig_of(gpu, row.pid),
        )
        for row in snapshot.processes
        if gpu.index in row.gpu_indices
    ]


def _basename(cmdline: tuple[str, ...]) -> str | None:
    return os.path.basename(cmdline[0]) or None if cmdline else None


def _proc_token(proc: _Proc, options: OnceOptions) -> _Line:
    """gpustat's ``user:command/pid(memory)``; just ``pid(memory)`` when the OS told nothing."""
    token: _Line = []
    if proc.user is None and proc.name is None:
        token.append(_Seg(str(proc.pid), "90"))
    else:
        if options.show_user or not options.show_cmd:
            token.append(_Seg(proc.user or "?", "1"))
        if options.show_cmd:
            token += [_Seg(":")] if token else []
            token.append(_Seg(proc.name or "?", "34"))
        if options.show_pid:
            token += [_Seg("/"), _Seg(str(proc.pid), "90")]
    token += [_Seg("("), _Seg(units.mib_compact(proc.used_memory_bytes), "33"), _Seg(")")]
    if proc.state is not ProcState.ACTIVE:
        token.append(_Seg(f"[{proc.state.value}]", "1;31"))
    return token


def _fit_tokens(head: _Line, tokens: list[_Line], width: int, ellipsis: str) -> _Line:
    """head + as many tokens as fit, then "…+N" for the rest.

    When the first token fits only without the count, it is followed by a bare "…"; when not
    even it fits whole, as much of it as fits is shown, ending in "…".
    """
    line = list(head)
    for i, token in enumerate(tokens):
        rest = len(tokens) - i - 1
        reserve = 0 if rest == 0 else cell_len(f" {ellipsis}+{rest}")
        if _length(line) + 1 + _length(token) + reserve <= width:
            line += [_Seg(" "), *token]
            continue
        room = width - _length(line) - 1
        if i == 0 and rest and _length(token) + cell_len(f" {ellipsis}") <= room:
            return [*line, _Seg(" "), *token, _Seg(f" {ellipsis}")]
        if i == 0 and room >= _MIN_PARTIAL:
            return [*line, _Seg(" "), *_clip(token, room, ellipsis)]
        more = f" {ellipsis}+{len(tokens) - i}"
        return [*line, _Seg(more)] if _length(line) + cell_len(more) <= width else line
    return line


def _index_label(gpu: GpuSample, show_cuda: bool, arrow: str) -> str:
    if not show_cuda:
        return f"[{gpu.index}]"
    cuda = "-" if gpu.cuda_index is None else str(gpu.cuda_index)
    return f"[{gpu.index}{arrow}{cuda}]"


def _show_cuda(gpus: tuple[GpuSample, ...]) -> bool:
    """True when a healthy GPU's CUDA index differs from its NVML index (and any is known).

    LOST/ERROR GPUs do not count: their CUDA index may simply be unknown.
    """
    healthy = [g for g in gpus if g.state is GpuState.OK]
    if all(g.cuda_index is None for g in healthy):
        return False
    return any(g.cuda_index != g.index for g in healthy)


def _metrics(gpu: GpuSample, options: OnceOptions, g: Glyphs) -> _Line:
    """``61°C,  40 %,  85 %,  250 / 400 W | 61234 / 81920 MiB`` with level styles."""
    temp_level = units.temperature_level(gpu.temperature_c, gpu.temperature_slowdown_c)
    parts = [
        _Seg(units.temperature(gpu.temperature_c, g.degree).rjust(4), _LEVEL_STYLE[temp_level])
    ]
    if options.show_fan:
        fan = gpu.fan_speed_percent
        parts += [_Seg(", "), _Seg(units.percent_padded(fan), "36")]
    util = gpu.utilization_gpu_percent
    parts += [
        _Seg(", "),
        _Seg(units.percent_padded(util), _LEVEL_STYLE[units.utilization_level(util)]),
    ]
    if options.show_power:
        level = units.power_level(gpu.power_draw_mw, gpu.power_limit_mw)
        power = units.power_pair(gpu.power_draw_mw, gpu.power_limit_mw, width=3)
        parts += [_Seg(", "), _Seg(power, _LEVEL_STYLE[level])]
    used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
    memory = units.mib_pair(used, total, width=5)
    parts += [_Seg(" | "), _Seg(memory, _LEVEL_STYLE[units.memory_level(used, total)])]
    return parts


def _tokens(gpu: GpuSample, snapshot: Snapshot, options: OnceOptions) -> list[_Line]:
    """The GPU's process tokens (but those on its MIG devices' lines), then its unattributed
    memory (a stuck holder's trace)."""
    tokens = [_proc_token(p, options) for p in _procs_for(gpu, snapshot) if p.mig is None]
    unattributed = dict(snapshot.unattributed_memory_bytes).get(gpu.index)
    if unattributed:
        tokens.append([_Seg(f"(+{units.mib_compact(unattributed)} unattributed)", "1;33")])
    return tokens


def _health_tag(gpu: GpuSample, room: int) -> _Line:
    """`` [reset needed: Xid 79]`` when the GPU's health verdict is neither ok nor unknown;
    just `` [reset needed]`` when that would not leave ``room`` cells."""
    health = assess(gpu)
    if health.verdict in (Verdict.OK, Verdict.UNKNOWN):
        return []
    style = "1;33" if health.verdict is Verdict.DEGRADED else "1;31"
    text = f" [{health.tag}]"
    if cell_len(text) > room:
        text = f" [{health.verdict.value}]"
    return [_Seg(" "), _Seg(text[1:], style)]


def _tag_room(gpu: GpuSample, options: OnceOptions, g: Glyphs, fixed_w: int) -> int:
    """The cells a health tag may take on the GPU's line beside ``fixed_w`` cells (label and
    name) and its readings."""
    metrics = _length(_metrics(gpu, options, g)) if gpu.state is GpuState.OK else 0
    return (options.width or 80) - fixed_w - metrics


def _gpu_head(
    gpu: GpuSample, options: OnceOptions, g: Glyphs, label: str, name: str, tag: _Line
) -> _Line:
    """Everything before the process list (the whole line for a LOST/ERROR GPU)."""
    head: _Line = [_Seg(label, "36"), _Seg(" "), _Seg(name, "34"), _Seg(" | ")]
    if gpu.state is not GpuState.OK:
        return [*head, _Seg(state_text(gpu), "1;31"), *tag]
    if gpu.stale_s is not None:  # read before the driver crashed: an old reading, said so
        head = [*head, _Seg(f"STALE {units.duration(gpu.stale_s)}", "1;31"), _Seg(" | ")]
    return head + _metrics(gpu, options, g) + tag


def state_text(gpu: GpuSample) -> str:
    """A GPU that is not OK in words: ``LOST (reason)``, ``NOT RESPONDING for 5 s (call ...)``."""
    if gpu.state is GpuState.NOT_RESPONDING:
        since = f" for {gpu.stale_s:.0f} s" if gpu.stale_s is not None else ""
        reason = f" ({gpu.error})" if gpu.error else ""
        return f"NOT RESPONDING{since}{reason}"
    reason = f" ({gpu.error})" if gpu.error else ""
    return f"{gpu.state.value.upper()}{reason}"


def _mig_label(mig: MigDevice, gpu: GpuSample, show_cuda: bool, arrow: str) -> str:
    """``0/1`` (GPU/GI); ``0/1/0`` when its GPU instance has several compute instances; with
    ``→cuda`` (``→-``) when CUDA indices are shown."""
    label = mig.label
    shared = sum(m.gpu_instance_id == mig.gpu_instance_id for m in gpu.mig_devices) > 1
    if shared and mig.compute_instance_id is not None:
        label += f"/{mig.compute_instance_id}"
    if show_cuda:
        label += arrow + ("-" if mig.cuda_index is None else str(mig.cuda_index))
    return label


def _mig_lines(
    gpu: GpuSample, snapshot: Snapshot, options: OnceOptions, g: Glyphs, show_cuda: bool
) -> list[_Line]:
    """One line per MIG device of a GPU in MIG mode: label, profile, utilisation, memory and
    the processes that run on it."""
    devices = gpu.mig_devices
    if gpu.state is not GpuState.OK or not devices:
        return []
    width = options.width or 80
    procs = [p for p in _procs_for(gpu, snapshot) if p.mig is not None]
    labels = [_mig_label(m, gpu, show_cuda, g.arrow) for m in devices]
    label_w = max(len(label) for label in labels)
    profile_w = max(cell_len(units.text(m.profile)) for m in devices)
    lines = []
    for n, (mig, label) in enumerate(zip(devices, labels, strict=True)):
        last = n == len(devices) - 1
        branch = ("└" if last else "├") if g.unicode else ("`-" if last else "|-")
        util = mig.utilization_gpu_percent
        used, total = mig.memory_used_bytes, mig.memory_total_bytes
        head: _Line = [
            _Seg(f" {branch} "),
            _Seg(label.ljust(label_w), "36"),
            _Seg(" "),
            _Seg(ljust(units.text(mig.profile), profile_w), "34"),
            _Seg(" | "),
            _Seg(units.percent_padded(util), _LEVEL_STYLE[units.utilization_level(util)]),
            _Seg(" | "),
            _Seg(
                units.mib_pair(used, total, width=5), _LEVEL_STYLE[units.memory_level(used, total)]
            ),
        ]
        tokens = [_proc_token(p, options) for p in procs if p.mig == mig]
        lines.append(_gpu_line(head, tokens, width, g.ellipsis))
    return lines


def _gpu_line(head: _Line, tokens: list[_Line], width: int, ellipsis: str) -> _Line:
    if not tokens:
        return _clip(head, width, ellipsis)
    line = _fit_tokens([*head, _Seg(" |")], tokens, width, ellipsis)
    return _clip(line, width, ellipsis)


def _header(snapshot: Snapshot) -> _Line:
    system = snapshot.system
    when = datetime.fromtimestamp(snapshot.taken_at_wall).strftime("%Y-%m-%d %H:%M:%S")
    line: _Line = [_Seg(system.hostname, "1"), _Seg(f"  {when}")]
    line.append(_Seg(f"  driver {units.text(system.driver_version)}"))
    if system.cuda_driver_version:
        line.append(_Seg(f"  CUDA {system.cuda_driver_version}"))
    if system.simulated:
        line.append(_Seg("  DEMO", "1;35"))
    if snapshot.stale_s is not None:
        line.append(_Seg(f"  STALE {units.duration(snapshot.stale_s)}", "1;31"))
    return line


def _name_width(
    gpus: tuple[GpuSample, ...],
    tokens: list[list[_Line]],
    tags: list[_Line],
    fixed_w: int,
    options: OnceOptions,
    g: Glyphs,
) -> int:
    """Names share one width, shortened so the readings and a "| …+N" marker still fit."""
    widest = max((cell_len(units.text(gpu.name)) for gpu in gpus), default=0)
    needed = 0
    for gpu, gpu_tokens, tag in zip(gpus, tokens, tags, strict=True):
        more = cell_len(f" | {g.ellipsis}+{len(gpu_tokens)}") if gpu_tokens else 0
        metrics = _length(_metrics(gpu, options, g)) if gpu.state is GpuState.OK else 0
        tag_w = _length(tag) if gpu.state is GpuState.OK else 0
        needed = max(needed, metrics + tag_w + more)
    room = (options.width or 80) - fixed_w - needed
    return max(min(widest, room), 4)


def render_once(snapshot: Snapshot, options: OnceOptions) -> str:
    """The ``--once`` text: a header line, then one line per GPU; ends with a newline."""
    if options.width is None:
        options = replace(options, width=max(shutil.get_terminal_size().columns, 1))
    encoding = options.encoding or glyphs.output_encoding(sys.stdout)
    g = glyphs.for_encoding(encoding)
    width = options.width or 80
    gpus = snapshot.gpus
    show_cuda = _show_cuda(gpus)
    labels = [_index_label(gpu, show_cuda, g.arrow) for gpu in gpus]
    label_w = max((cell_len(label) for label in labels), default=0)
    tokens = [_tokens(gpu, snapshot, options) for gpu in gpus]
    fixed_w = label_w + len(" ") + len(" | ")
    # Names are sized beside the verdict alone ([degraded]); its evidence comes only where the
    # line then has room for it, so a long tag never cuts every GPU's name short.
    name_w = _name_width(gpus, tokens, [_health_tag(gpu, 0) for gpu in gpus], fixed_w, options, g)
    tags = [_health_tag(gpu, _tag_room(gpu, options, g, fixed_w + name_w)) for gpu in gpus]
    lines = [_clip(_header(snapshot), width, g.ellipsis)]
    for gpu, label, gpu_tokens, tag in zip(gpus, labels, tokens, tags, strict=True):
        name = _fit_name(units.text(gpu.name), name_w, g.ellipsis)
        head = _gpu_head(gpu, options, g, ljust(label, label_w), name, tag)
        lines.append(_gpu_line(head, gpu_tokens, width, g.ellipsis))
        lines += _mig_lines(gpu, snapshot, options, g, show_cuda)
    if not gpus:
        lines.append(_clip([_Seg("no NVIDIA GPU found")], width, g.ellipsis))
    text = "".join(_paint(line, options.color) + "\n" for line in lines)
    return glyphs.safe_text(text, encoding)  # names and commands may hold anything


def _fit_name(name: str, width: int, ellipsis: str) -> str:
    """``name`` padded to ``width`` cells, or cut to them ending in ``ellipsis``."""
    if cell_len(name) <= width:
        return ljust(name, width)
    return ljust(cut(name, max(width - cell_len(ellipsis), 0)) + ellipsis, width)  # width >= 4
