"""``gputop dmon``: nvidia-smi dmon's scrolling device monitor, one row per GPU per interval.

Metric groups (``-s``, default ``puc``), always in this order: p power/temperature, u utilisation,
c clocks, v violations, m frame buffer/BAR1 memory, e ECC/PCIe replay errors, t PCIe throughput.
A ``-`` is a reading the driver does not give. The header repeats every screenful.

Each row waits for its reading at most until it is due (``--timeout`` caps it); a GPU that did
not answer by then gets its row anyway, ``-`` in every column. A run with ``-c`` that printed
such a row exits 3, and one line on stderr says which call hung.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from gputop.argtypes import (
    INTERVAL_BOUNDS_HELP,
    add_timeout_argument,
    interval_seconds,
    positive_int,
)
from gputop.commands.query import select_gpus
from gputop.commands.schedule import Rows, run_on_schedule
from gputop.engine.deadline import DEFAULT_TIMEOUT_S, timeout_of
from gputop.engine.model import GpuSample, GpuState
from gputop.engine.source import source_from_args
from gputop.errors import UsageError
from gputop.units import KiB, whole_mib

DEFAULT_GROUPS = "puc"
GROUP_ORDER = "pucvmet"
NON_TTY_PAGE_ROWS = 20  # header repeat when the output is not a terminal
_POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
_THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})

Getter = Callable[[GpuSample], int | None]


@dataclass(frozen=True, slots=True)
class Column:
    """One dmon column: header name, unit line text, width, reading."""

    name: str
    unit: str
    width: int
    get: Getter


def _round(value: float | None, scale: float = 1.0) -> int | None:
    return None if value is None else round(value / scale)


def _mib(value_bytes: int | None) -> int | None:
    return None if value_bytes is None else whole_mib(value_bytes)


def _flag(reasons: tuple[str, ...] | None, wanted: frozenset[str], on: int) -> int | None:
    if reasons is None:
        return None
    return on if wanted.intersection(reasons) else 0


COLUMNS: dict[str, tuple[Column, ...]] = {
    "p": (
        Column("pwr", "W", 5, lambda g: _round(g.power_draw_mw, 1000)),
        Column("gtemp", "C", 6, lambda g: g.temperature_c),
        Column("mtemp", "C", 6, lambda g: g.temperature_memory_c),
    ),
    "u": (
        Column("sm", "%", 5, lambda g: g.utilization_gpu_percent),
        Column("mem", "%", 5, lambda g: g.utilization_memory_percent),
        Column("enc", "%", 5, lambda g: g.encoder_percent),
        Column("dec", "%", 5, lambda g: g.decoder_percent),
    ),
    "c": (
        Column("mclk", "MHz", 5, lambda g: g.clock_memory_mhz),
        Column("pclk", "MHz", 5, lambda g: g.clock_graphics_mhz),
    ),
    # nvidia-smi's pviol is the % of the interval spent power-capped; gputop reads the reasons
    # at the sample instant, so it shows 100 (capped now) or 0.
    "v": (
        Column("pviol", "%", 5, lambda g: _flag(g.throttle_reasons, _POWER_REASONS, 100)),
        Column("tviol", "bool", 5, lambda g: _flag(g.throttle_reasons, _THERMAL_REASONS, 1)),
    ),
    "m": (
        Column("fb", "MB", 5, lambda g: _mib(g.memory_used_bytes)),
        Column("bar1", "MB", 5, lambda g: _mib(g.bar1_used_bytes)),
    ),
    "e": (
        Column("sbecc", "errs", 5, lambda g: None),  # corrected errors are not read
        Column("dbecc", "errs", 5, lambda g: g.ecc_errors_uncorrected_volatile),
        Column("pci", "errs", 5, lambda g: None),  # PCIe replay counter is not read
    ),
    "t": (
        Column("rxpci", "MB/s", 5, lambda g: _round(g.pcie_rx_kbps, KiB)),
        Column("txpci", "MB/s", 5, lambda g: _round(g.pcie_tx_kbps, KiB)),
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """nvidia-smi dmon's options: -s, -d, -c, -i, -o."""
    parser.add_argument(
        "-s",
        "--select",
        default=DEFAULT_GROUPS,
        metavar="GROUPS",
        help="metric groups (default puc): p power/temp, u utilization, c clocks, "
        "v violations, m memory, e ECC errors, t PCIe throughput",
    )
    parser.add_argument(
        "-d",
        "--delay",
        type=interval_seconds,
        default=1.0,
        metavar="SEC",
        help=f"seconds between samples, {INTERVAL_BOUNDS_HELP} (default 1)",
    )
    parser.add_argument(
        "-c", "--count", type=positive_int, default=None, metavar="N", help="stop after N samples"
    )
    parser.add_argument("-i", "--id", metavar="IDS", help="GPUs: index, UUID or PCI bus id list")
    parser.add_argument(
        "-o", "--options", default="", metavar="DT", help="D: date column, T: time column"
    )
    add_timeout_argument(
        parser,
        default_s=DEFAULT_TIMEOUT_S,
        then="a row waits at most until it is due; a GPU that did not answer shows -, "
        "and with -c exit 3",
    )


def columns_for(groups: str) -> tuple[Column, ...]:
    """The columns of the selected groups, in nvidia-smi's order; UsageError for a bad letter."""
    unknown = sorted(set(groups) - set(GROUP_ORDER))
    if unknown or not groups:
        raise UsageError(f"unknown dmon metric group {''.join(unknown)!r}: use letters of pucvmet")
    return tuple(c for g in GROUP_ORDER if g in groups for c in COLUMNS[g])


def _time_parts(options: str) -> tuple[str, ...]:
    unknown = set(options.upper()) - {"D", "T"}
    if unknown:
        raise UsageError(f"unknown dmon -o option {''.join(sorted(unknown))!r}: use D and/or T")
    return tuple(p for p in "DT" if p in options.upper())


def header_lines(columns: Sequence[Column], time_parts: Sequence[str] = ()) -> tuple[str, str]:
    """The two header lines: names, then units; both start with '#'."""
    names = [{"D": "Date", "T": "Time"}[p].ljust(8) for p in time_parts]
    units = [{"D": "YYYYMMDD", "T": "HH:MM:SS"}[p] for p in time_parts]
    names.append("gpu".rjust(5))
    units.append("Idx".rjust(5))
    names += [c.name.rjust(c.width) for c in columns]
    units += [c.unit.rjust(c.width) for c in columns]
    return _mark(" ".join(names)), _mark(" ".join(units))


def _mark(line: str) -> str:
    return "#" + line[1:] if line.startswith(" ") else "#" + line


def row_line(
    gpu: GpuSample, columns: Sequence[Column], wall_s: float, time_parts: Sequence[str] = ()
) -> str:
    """One data row; '-' for a reading the driver does not give (or a lost or silent GPU)."""
    local = time.localtime(wall_s)
    cells = [time.strftime({"D": "%Y%m%d", "T": "%H:%M:%S"}[p], local) for p in time_parts]
    cells.append(str(gpu.index).rjust(5))
    ok = gpu.state is GpuState.OK
    for c in columns:
        value = c.get(gpu) if ok else None
        cells.append(("-" if value is None else str(value)).rjust(c.width))
    line = " ".join(cells)
    return " " + line if time_parts else line


def _page_rows(out: IO[str]) -> int:
    if out.isatty():
        return max(shutil.get_terminal_size().lines - 2, 1)
    return NON_TTY_PAGE_ROWS


def run(args: argparse.Namespace) -> int:
    """Print rows every -d seconds until -c samples, Ctrl-C or SIGTERM/SIGHUP.

    The CLI turns those signals into KeyboardInterrupt and sets the exit code (128+N).
    """
    columns = columns_for(args.select)
    time_parts = _time_parts(args.options)
    head = header_lines(columns, time_parts)
    out = sys.stdout
    source = source_from_args(args)
    try:
        rows = Rows(source, interval_s=args.delay, timeout_s=timeout_of(args), count=args.count)
        first = [rows.first()]
        start = first[0].taken_at_mono
        indices = select_gpus(first[0], args.id)
        page = _page_rows(out)
        since_header = [page]  # forces a header before the first rows

        def tick(k: int) -> None:
            snapshot = first.pop() if first else rows.next()
            gpus = [g for i in indices if (g := snapshot.gpu(i)) is not None]
            if since_header[0] + len(gpus) > page:
                out.write("\n".join(head) + "\n")
                since_header[0] = 0
            for gpu in gpus:
                out.write(row_line(gpu, columns, rows.wall_of(snapshot, gpu), time_parts) + "\n")
            since_header[0] += len(gpus)
            out.flush()
            rows.shown(snapshot, indices)

        with contextlib.suppress(KeyboardInterrupt):
            run_on_schedule(tick, interval_s=args.delay, count=args.count, start=start)
    finally:
        source.close()
    return rows.finish()
