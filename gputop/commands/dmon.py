"""``gputop dmon``: nvidia-smi dmon's scrolling device monitor, one row per GPU per interval.

Metric groups (``-s``, default ``puc``), printed in the order given, as nvidia-smi does:
p power/temperature, u utilisation, c clocks, v violations, m frame buffer/BAR1 memory,
e ECC/PCIe replay errors, t PCIe throughput. Drivers from 535 on add nvidia-smi's newer columns
(jpg and ofa under u, ccpm under m). A ``-`` is a reading the driver does not give. The header
repeats every screenful.

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
from gputop.commands.query import ask_for, select_gpus
from gputop.commands.query_table import SPECS, driver_major
from gputop.commands.schedule import Rows, run_on_schedule
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.model import GpuSample, GpuState, Snapshot
from gputop.engine.probes import Probe, call
from gputop.errors import UsageError
from gputop.sources import source_from_args, timeout_of
from gputop.units import pcie_mb_per_s, whole_mib

DEFAULT_GROUPS = "puc"
GROUP_ORDER = "pucvmet"
NEW_COLUMNS_SINCE = 535  # nvidia-smi dmon's jpg, ofa and ccpm columns: drivers 535 and later
NON_TTY_PAGE_ROWS = 20  # header repeat when the output is not a terminal
_POWER_REASONS = frozenset({"sw_power_cap", "hw_power_brake_slowdown"})
_THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})

Getter = Callable[[Snapshot, GpuSample], int | None]


@dataclass(frozen=True, slots=True)
class Column:
    """One dmon column: header name, unit line text, width, reading, extra driver readings."""

    name: str
    unit: str
    width: int
    get: Getter
    probes: tuple[Probe, ...] = ()
    since: int | None = None  # the first driver (major version) whose nvidia-smi has it


def _round(value: float | None, scale: float = 1.0) -> int | None:
    return None if value is None else round(value / scale)


def _mib(value_bytes: int | None) -> int | None:
    return None if value_bytes is None else whole_mib(value_bytes)


def _number(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _field(field: str, name: str, unit: str, *, since: int | None = None) -> Column:
    """A column read as the ``--query-gpu`` field ``field`` reads it (the same driver call)."""
    spec = SPECS[field]
    probes = () if spec.probe is None else (spec.probe,)
    return Column(name, unit, 5, lambda s, g: _number(spec.read(s, g)), probes, since)


_REPLAYS = call("nvmlDeviceGetPcieReplayCounter")


def _replays(s: Snapshot, g: GpuSample) -> int | None:
    return _number(g.extra_value(_REPLAYS.key))


class Violations:
    """pviol and tviol from NVML's violation counters (nvmlDeviceGetViolationStatus).

    pviol is the % of the time between this GPU's last row and this one that power held its
    clocks down, tviol (bool) whether heat did at all. The first row (or one with no time since
    the last) has no interval: it shows whether the clocks are held down at that instant. A GPU
    without the counters shows ``-``, even where its clock event reasons are read.
    """

    POLICIES = {"power": "NVML_PERF_POLICY_POWER", "thermal": "NVML_PERF_POLICY_THERMAL"}

    def __init__(self) -> None:
        self._last: dict[tuple[int, str], tuple[int, int]] = {}  # (GPU, policy) -> (us, ns)

    @classmethod
    def probes(cls, policy: str) -> tuple[Probe, Probe]:
        """The counter's reference time (us) and violation time (ns)."""
        name = "nvmlDeviceGetViolationStatus"
        arg = cls.POLICIES[policy]
        return call(name, arg, part="referenceTime"), call(name, arg, part="violationTime")

    def share(self, gpu: GpuSample, policy: str, reasons: frozenset[str]) -> float | None:
        """The fraction (0..1) of the interval the policy held the clocks down; None: unknown."""
        ref_probe, viol_probe = self.probes(policy)
        ref_us = _number(gpu.extra_value(ref_probe.key))
        viol_ns = _number(gpu.extra_value(viol_probe.key))
        if ref_us is None or viol_ns is None:
            return None
        before = self._last.get((gpu.index, policy))
        self._last[(gpu.index, policy)] = (ref_us, viol_ns)
        if before is not None and ref_us > before[0]:
            spent_ns = max(0, viol_ns - before[1])
            return min(1.0, spent_ns / ((ref_us - before[0]) * 1000))
        if gpu.throttle_reasons is None:
            return None
        return 1.0 if reasons.intersection(gpu.throttle_reasons) else 0.0

    def columns(self) -> tuple[Column, ...]:
        """pviol and tviol, read through this run's counters."""

        def pviol(s: Snapshot, g: GpuSample) -> int | None:
            share = self.share(g, "power", _POWER_REASONS)
            return None if share is None else round(share * 100)

        def tviol(s: Snapshot, g: GpuSample) -> int | None:
            share = self.share(g, "thermal", _THERMAL_REASONS)
            return None if share is None else int(share > 0)

        return (
            Column("pviol", "%", 5, pviol, self.probes("power")),
            Column("tviol", "bool", 5, tviol, self.probes("thermal")),
        )


def group_columns(violations: Violations) -> dict[str, tuple[Column, ...]]:
    """Every group's columns, nvidia-smi's newest set (filter by :attr:`Column.since`)."""
    return {
        "p": (
            Column("pwr", "W", 5, lambda s, g: _round(g.power_draw_mw, 1000)),
            Column("gtemp", "C", 6, lambda s, g: g.temperature_c),
            Column("mtemp", "C", 6, lambda s, g: g.temperature_memory_c),
        ),
        "u": (
            Column("sm", "%", 5, lambda s, g: g.utilization_gpu_percent),
            Column("mem", "%", 5, lambda s, g: g.utilization_memory_percent),
            Column("enc", "%", 5, lambda s, g: g.encoder_percent),
            Column("dec", "%", 5, lambda s, g: g.decoder_percent),
            _field("utilization.jpeg", "jpg", "%", since=NEW_COLUMNS_SINCE),
            _field("utilization.ofa", "ofa", "%", since=NEW_COLUMNS_SINCE),
        ),
        "c": (
            Column("mclk", "MHz", 5, lambda s, g: g.clock_memory_mhz),
            Column("pclk", "MHz", 5, lambda s, g: g.clock_graphics_mhz),
        ),
        "v": violations.columns(),
        "m": (
            Column("fb", "MB", 5, lambda s, g: _mib(g.memory_used_bytes)),
            Column("bar1", "MB", 5, lambda s, g: _mib(g.bar1_used_bytes)),
            # confidential-computing protected memory in use
            _field("protected_memory.used", "ccpm", "MB", since=NEW_COLUMNS_SINCE),
        ),
        "e": (
            _field("ecc.errors.corrected.volatile.total", "sbecc", "errs"),
            Column("dbecc", "errs", 5, lambda s, g: g.ecc_errors_uncorrected_volatile),
            Column("pci", "errs", 5, _replays, (_REPLAYS,)),  # PCIe replays
        ),
        "t": (
            Column("rxpci", "MB/s", 5, lambda s, g: pcie_mb_per_s(g.pcie_rx_kbps)),
            Column("txpci", "MB/s", 5, lambda s, g: pcie_mb_per_s(g.pcie_tx_kbps)),
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
        "-c",
        "--count",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N samples (1 or more; default: until Ctrl-C)",
    )
    parser.add_argument(
        "-i",
        "--id",
        metavar="IDS",
        help="GPUs: index, UUID or PCI bus id list (default: every GPU)",
    )
    parser.add_argument(
        "-o",
        "--options",
        default="",
        metavar="DT",
        help="D: a date column, T: a time column (default: neither)",
    )
    add_timeout_argument(
        parser,
        default_s=DEFAULT_TIMEOUT_S,
        then="a row waits at most until it is due; a GPU that did not answer shows -, "
        "and with -c exit 3",
    )


def check_groups(groups: str) -> str:
    """The groups in the order given, each once; UsageError for a bad letter."""
    unknown = sorted(set(groups) - set(GROUP_ORDER))
    if unknown or not groups:
        raise UsageError(f"unknown dmon metric group {''.join(unknown)!r}: use letters of pucvmet")
    return "".join(dict.fromkeys(groups))


def columns_for(
    groups: str, driver: int | None = None, violations: Violations | None = None
) -> tuple[Column, ...]:
    """The columns of the selected groups in the order given (as nvidia-smi), as the driver's
    nvidia-smi has them (``driver``: its major version; None: unknown, the older set)."""
    table = group_columns(violations or Violations())
    return tuple(
        c
        for g in check_groups(groups)
        for c in table[g]
        if c.since is None or (driver is not None and driver >= c.since)
    )


def probes_of(columns: Sequence[Column]) -> tuple[Probe, ...]:
    """The extra driver readings these columns need."""
    return tuple(dict.fromkeys(p for c in columns for p in c.probes))


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
    snapshot: Snapshot,
    gpu: GpuSample,
    columns: Sequence[Column],
    wall_s: float,
    time_parts: Sequence[str] = (),
) -> str:
    """One data row; '-' for a reading the driver does not give (or a lost or silent GPU)."""
    local = time.localtime(wall_s)
    cells = [time.strftime({"D": "%Y%m%d", "T": "%H:%M:%S"}[p], local) for p in time_parts]
    cells.append(str(gpu.index).rjust(5))
    ok = gpu.state is GpuState.OK
    for c in columns:
        value = c.get(snapshot, gpu) if ok else None
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
    groups = check_groups(args.select)
    time_parts = _time_parts(args.options)
    violations = Violations()
    out = sys.stdout
    source = source_from_args(args)
    try:
        # Every column the groups may have: which ones nvidia-smi has, the driver says.
        ask_for(source, probes_of(columns_for(groups, NEW_COLUMNS_SINCE, violations)))
        rows = Rows(source, interval_s=args.delay, timeout_s=timeout_of(args), count=args.count)
        first = [rows.first()]
        columns = columns_for(groups, driver_major(first[0]), violations)
        head = header_lines(columns, time_parts)
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
                wall = rows.wall_of(snapshot, gpu)
                out.write(row_line(snapshot, gpu, columns, wall, time_parts) + "\n")
            since_header[0] += len(gpus)
            out.flush()
            rows.shown(snapshot, indices)

        with contextlib.suppress(KeyboardInterrupt):
            run_on_schedule(tick, interval_s=args.delay, count=args.count, start=start)
    finally:
        source.close()
    return rows.finish()
