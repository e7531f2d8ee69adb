"""``gputop query``: an nvidia-smi ``--query-gpu`` / ``--query-compute-apps`` compatible logger.

Same field names, headers and value text as nvidia-smi (see :mod:`gputop.commands.query_fields`), so
existing parsers keep working; ``--format=json`` writes one JSON object per row instead. Samples
are taken on a fixed schedule (no drift), every line is flushed, Ctrl-C ends cleanly.

Each sample waits for the driver at most ``--timeout`` (in a loop: until its row is due, see
gputop.commands.schedule.Rows). A GPU that did not answer in time still gets its row, each
reading ``[Unknown Error]`` (nvidia-smi's text for a call that failed for no stated reason);
the identity fields the driver gave when it opened (index, name, uuid, pci.bus_id, ...) and
the timestamp print as usual. A run that ends by itself (no loop, or ``--count``) then exits 3,
and one line on stderr says which call hung.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

from gputop.argtypes import (
    INTERVAL_BOUNDS_HELP,
    add_timeout_argument,
    interval_milliseconds,
    interval_seconds,
    positive_int,
)
from gputop.commands.json_out import for_stream
from gputop.commands.query_fields import (
    UNKNOWN_ERROR,
    AppField,
    AppRow,
    Field,
    app_text,
    field_text,
    gpu_value,
    help_text,
    parse_app_fields,
    parse_gpu_fields,
    wanted_readings,
)
from gputop.commands.schedule import Rows, run_on_schedule
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.model import GpuSample, GpuState, ProcessType, Snapshot
from gputop.engine.private_file import UnsafeFile, open_private
from gputop.engine.probes import Probe
from gputop.engine.sanitize import json_safe
from gputop.engine.source import Source
from gputop.errors import UsageError
from gputop.sources import source_from_args, timeout_of

DEFAULT_LOOP_S = 5.0  # nvidia-smi's -l without a value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options as nvidia-smi spells them, plus --count and --format=json."""
    parser.add_argument("--query-gpu", metavar="FIELDS", help="comma-separated GPU fields")
    parser.add_argument(
        "--query-compute-apps", metavar="FIELDS", help="comma-separated compute process fields"
    )
    parser.add_argument(
        "--format",
        default="csv",
        metavar="FMT",
        help="csv[,noheader][,nounits] (as nvidia-smi), or json: one object per line (default csv)",
    )
    parser.add_argument(
        "-l",
        "--loop",
        nargs="?",
        const=DEFAULT_LOOP_S,
        type=interval_seconds,
        metavar="SEC",
        help=f"repeat every SEC seconds (default {DEFAULT_LOOP_S:g}; {INTERVAL_BOUNDS_HELP}) "
        "until Ctrl-C",
    )
    parser.add_argument(
        "-lms",
        "--loop-ms",
        type=interval_milliseconds,
        metavar="MS",
        help="repeat every MS ms (100 to 86400000)",
    )
    parser.add_argument("-f", "--filename", metavar="FILE", help="write to FILE, not stdout")
    parser.add_argument(
        "-i",
        "--id",
        metavar="IDS",
        help="only these GPUs: index, UUID or PCI bus id, comma list (default: every GPU)",
    )
    parser.add_argument(
        "--count",
        type=positive_int,
        metavar="N",
        help="stop after N samples (1 or more), one interval apart (without -l: "
        f"{DEFAULT_LOOP_S:g} s; default: 1 sample without -l, until Ctrl-C with it)",
    )
    add_timeout_argument(
        parser,
        default_s=DEFAULT_TIMEOUT_S,
        then="with -l, a row waits at most until it is due; a GPU that did not answer shows "
        "[Unknown Error], exit 3 (unless the loop is endless)",
    )
    parser.add_argument(
        "--help-query-gpu", action="store_true", help="list the supported --query-gpu fields"
    )
    parser.add_argument(
        "--help-query-compute-apps",
        action="store_true",
        help="list the supported --query-compute-apps fields",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """What ``--format`` asked for."""

    json: bool = False
    header: bool = True
    units: bool = True


def parse_format(text: str) -> OutputFormat:
    """``csv``, ``csv,noheader``, ``csv,nounits``, ``csv,noheader,nounits`` or ``json``."""
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    if parts == ["json"]:
        return OutputFormat(json=True, header=False, units=False)
    if not parts or parts[0] != "csv" or set(parts[1:]) - {"noheader", "nounits"}:
        raise UsageError(f"unknown --format {text!r}: use csv[,noheader][,nounits] or json")
    return OutputFormat(header="noheader" not in parts, units="nounits" not in parts)


def _bus_key(text: str) -> tuple[int, int, int, int] | None:
    """``00000000:07:00.0`` or ``07:00.0`` as numbers, for comparing PCI bus ids."""
    try:
        rest, function = text.rsplit(".", 1)
        parts = rest.split(":")
        if len(parts) == 2:
            parts.insert(0, "0")
        if len(parts) != 3:
            return None
        domain, bus, device = (int(p, 16) for p in parts)
        return domain, bus, device, int(function, 16)
    except ValueError:
        return None


def _matches(gpu: GpuSample, wanted: str) -> bool:
    if wanted.isdigit():
        return gpu.index == int(wanted)
    if gpu.uuid and wanted.lower() in (gpu.uuid.lower(), gpu.uuid.lower().removeprefix("gpu-")):
        return True
    key = _bus_key(wanted)
    return key is not None and gpu.pci_bus_id is not None and key == _bus_key(gpu.pci_bus_id)


def select_gpus(snapshot: Snapshot, ids: str | None) -> tuple[int, ...]:
    """NVML indices for ``-i`` (all GPUs without it); UsageError naming an unknown id."""
    if not ids:
        return tuple(g.index for g in snapshot.gpus)
    chosen: list[int] = []
    for wanted in (w.strip() for w in ids.split(",") if w.strip()):
        found = [g.index for g in snapshot.gpus if _matches(g, wanted)]
        if not found:
            raise UsageError(f"no GPU matches id {wanted!r} (use an index, UUID or PCI bus id)")
        chosen.extend(i for i in found if i not in chosen)
    return tuple(chosen)


def process_name(pid: int) -> str | None:
    """argv[0] of the process (what nvidia-smi shows), its name, or None when not visible."""
    from gputop.engine.proc_lookup import read_proc  # psutil only for --query-compute-apps

    info = read_proc(pid)
    if not info.visible:
        return None
    return info.cmdline[0] if info.cmdline else info.name


def app_rows(
    snapshot: Snapshot, indices: Sequence[int], names: Callable[[int], str | None]
) -> list[AppRow]:
    """One row per compute context on the chosen GPUs (graphics-only contexts are left out).

    A PID this namespace cannot see is named by the driver (nvmlSystemGetProcessName), as
    nvidia-smi names it.
    """
    rows: list[AppRow] = []
    for index in indices:
        gpu = snapshot.gpu(index)
        if gpu is None:
            continue
        rows.extend(
            AppRow(process=p, gpu=gpu, process_name=names(p.pid) or p.driver_name)
            for p in gpu.processes
            if p.type is not ProcessType.GRAPHICS
        )
    return rows


def csv_cell(value: str) -> str:
    """``value`` as one CSV cell: quoted (RFC 4180) only when it holds a comma or a quote.

    nvidia-smi never quotes, so plain values stay as it writes them; a process name with a comma
    would otherwise add a column. Newlines cannot occur: names are cleaned where they are read.
    """
    if "," in value or '"' in value:
        return '"' + value.replace('"', '""') + '"'
    return value


def gpu_lines(
    snapshot: Snapshot, fields: Sequence[Field], indices: Sequence[int], fmt: OutputFormat
) -> list[str]:
    """The data lines of one sample of --query-gpu."""
    lines: list[str] = []
    for index in indices:
        gpu = snapshot.gpu(index)
        if gpu is None:
            continue
        if fmt.json:
            record = {f.name: gpu_value(f, snapshot, gpu) for f in fields}
            lines.append(json_safe(json.dumps(record, ensure_ascii=False)))
        else:
            lines.append(
                ", ".join(csv_cell(gpu_cell(f, snapshot, gpu, units=fmt.units)) for f in fields)
            )
    return lines


def gpu_cell(field: Field, snapshot: Snapshot, gpu: GpuSample, *, units: bool = True) -> str:
    """One CSV cell: as nvidia-smi prints it, and ``[Unknown Error]`` for every value a GPU that
    did not answer in time could not give (its known identity fields print as usual)."""
    if gpu.state is GpuState.NOT_RESPONDING and gpu_value(field, snapshot, gpu) is None:
        return UNKNOWN_ERROR
    return field_text(field, snapshot, gpu, units=units)


def app_lines(
    snapshot: Snapshot, fields: Sequence[AppField], rows: Sequence[AppRow], fmt: OutputFormat
) -> list[str]:
    """The data lines of one sample of --query-compute-apps."""
    if fmt.json:
        return [
            json_safe(json.dumps({f.name: f.read(snapshot, r) for f in fields}, ensure_ascii=False))
            for r in rows
        ]
    return [
        ", ".join(csv_cell(app_text(f, snapshot, r, units=fmt.units)) for f in fields) for r in rows
    ]


@contextmanager
def _output(filename: str | None) -> Iterator[IO[str]]:
    if filename is None:
        yield sys.stdout
        return
    try:
        # Perhaps root's hands: no link, FIFO or another user's file; emptied only once checked.
        fd = open_private(filename, truncate=True)
    except UnsafeFile as exc:
        raise UsageError(f"cannot write {filename}: {exc.reason}") from None
    handle = open(fd, "w", encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        yield handle
        handle.flush()
    except OSError as exc:  # disk full, a file size limit, a file system gone read-only
        raise UsageError(f"cannot write {filename}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(OSError):  # its flush failed above already
            handle.close()


def _interval_s(args: argparse.Namespace) -> float | None:
    """Seconds between samples; None for a single sample.

    ``--count N`` without ``-l``/``-lms`` samples every DEFAULT_LOOP_S (``-l``'s default, as
    nvidia-smi's), not back to back: N readings milliseconds apart would all say the same.
    """
    if args.loop_ms is not None:
        return float(args.loop_ms) / 1000
    if args.loop is not None:
        return float(args.loop)
    return DEFAULT_LOOP_S if args.count is not None and args.count > 1 else None


def _lines_for(
    args: argparse.Namespace, fmt: OutputFormat
) -> tuple[str, Callable[[Snapshot, Sequence[int]], list[str]], Sequence[Field]]:
    """(header line, sample -> data lines, the GPU fields to ask the driver for) for the query
    asked for; UsageError first."""
    if args.query_gpu and args.query_compute_apps:
        raise UsageError("use one of --query-gpu or --query-compute-apps, not both")
    try:
        if args.query_gpu:
            fields = parse_gpu_fields(args.query_gpu)
            header = ", ".join(f.header for f in fields)
            return header, lambda s, ix: gpu_lines(s, fields, ix, fmt), fields
        if args.query_compute_apps:
            apps = parse_app_fields(args.query_compute_apps)
            header = ", ".join(f.header for f in apps)
            return (
                header,
                lambda s, ix: app_lines(s, apps, app_rows(s, ix, process_name), fmt),
                (),
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    raise UsageError("nothing to query: give --query-gpu=FIELDS or --query-compute-apps=FIELDS")


def run(args: argparse.Namespace) -> int:
    """Print (or log to -f FILE) the asked-for fields once, or on a schedule with -l/-lms."""
    if args.help_query_gpu or args.help_query_compute_apps:
        sys.stdout.write(help_text(apps=not args.help_query_gpu))
        return 0
    fmt = parse_format(args.format)
    header, lines_of, gpu_fields = _lines_for(args, fmt)
    source = source_from_args(args)
    try:
        if gpu_fields:
            ask_driver(source, gpu_fields)
        return _log(source, args, fmt, header, lines_of)
    finally:
        source.close()


def ask_driver(source: Source, fields: Sequence[Field]) -> None:
    """Ask the source for the extra readings these fields need, before its first snapshot.

    Only the fields asked for are read, and only here: the dashboard's snapshots never carry
    them. A source without extra readings (a test's fake) leaves them N/A.
    """
    ask_for(source, *wanted_readings(fields))


def ask_for(source: Source, probes: Sequence[Probe], explain: Sequence[str] = ()) -> None:
    """Have the source read these probes (and explain these readings) from its next snapshot
    on (dmon's extra columns too); a source without extra readings (SourceBase's) ignores it."""
    source.request_probes(probes, explain)


def _log(
    source: Source,
    args: argparse.Namespace,
    fmt: OutputFormat,
    header: str,
    lines_of: Callable[[Snapshot, Sequence[int]], list[str]],
) -> int:
    interval = _interval_s(args)
    rows = Rows(source, interval_s=interval, timeout_s=timeout_of(args), count=args.count)
    first: list[Snapshot] = [rows.first()]
    start = first[0].taken_at_mono
    indices = select_gpus(first[0], args.id)
    with _output(args.filename) as out:
        if fmt.header:
            out.write(header + "\n")
            out.flush()

        def tick(k: int) -> None:
            snapshot = first.pop() if first else rows.next()
            for index in indices:
                gpu = snapshot.gpu(index)
                if gpu is None:
                    continue
                for line in lines_of(rows.stamped(snapshot, gpu), (index,)):
                    out.write((for_stream(line, out) if fmt.json else line) + "\n")
                    out.flush()  # `| tee` and `tail -f` see each row at once
            rows.shown(snapshot, indices)

        # Ctrl-C is how a loop ends: everything written so far is complete.
        with contextlib.suppress(KeyboardInterrupt):
            run_on_schedule(
                tick,
                interval_s=interval,
                count=args.count,
                start=start,  # the first row is on the schedule too
            )
    return rows.finish()
