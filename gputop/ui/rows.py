"""The process table's content as pure functions: which rows, in which order, with which cells.

The widget (widgets/process_table.py) only diffs these cells into a DataTable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from gputop import units
from gputop.engine.model import ProcessRow, ProcessType, ProcState


class Column(StrEnum):
    """Process table columns, in display order; the value is the column key."""

    GPU = "gpu"
    PID = "pid"
    USER = "user"
    TYPE = "type"
    MEM = "mem"
    PEAK = "peak"
    SM = "sm"
    CPU = "cpu"
    HOST = "host"
    TIME = "time"
    STATE = "state"
    COMMAND = "command"


LABELS: dict[Column, str] = {
    Column.GPU: "GPU",
    Column.PID: "PID",
    Column.USER: "USER",
    Column.TYPE: "TYPE",
    Column.MEM: "GPU-MEM",
    Column.PEAK: "PEAK",
    Column.SM: "SM%",
    Column.CPU: "CPU%",
    Column.HOST: "HOST-MEM",
    Column.TIME: "TIME",
    Column.STATE: "STATE",
    Column.COMMAND: "COMMAND",
}
NUMERIC = frozenset({Column.PID, Column.MEM, Column.PEAK, Column.SM, Column.CPU, Column.HOST})
# Hidden below WIDE_MIN_COLUMNS terminal columns; the process detail screen shows them.
NARROW_HIDDEN = frozenset({Column.TYPE, Column.PEAK, Column.HOST})
WIDE_MIN_COLUMNS = 120
USER_WIDTH = 8

_STATE_TEXT = {ProcState.NAMESPACE: "other-ns"}
_TYPE_TEXT = {ProcessType.COMPUTE: "C", ProcessType.GRAPHICS: "G", ProcessType.MIXED: "C+G"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TableView:
    """How the user wants the table: sort, filter, only one user, tree, one GPU."""

    sort: Column = Column.MEM
    reverse: bool = True
    filter_text: str = ""
    only_user: str | None = None
    tree: bool = False
    gpu: int | None = None


def row_key(row: ProcessRow) -> str:
    """A process identity that survives PID reuse: 'pid:create_time'."""
    return f"{row.pid}:{row.info.create_time}"


def columns(wide: bool) -> tuple[Column, ...]:
    """The columns shown at this width."""
    return tuple(c for c in Column if wide or c not in NARROW_HIDDEN)


def _runtime_s(row: ProcessRow, now_wall: float) -> float | None:
    ct = row.info.create_time
    return None if ct is None else max(0.0, now_wall - ct)


_SORT_VALUES: dict[Column, Callable[[ProcessRow, float], object]] = {
    Column.GPU: lambda r, _: r.gpu_indices[0] if r.gpu_indices else None,
    Column.PID: lambda r, _: r.pid,
    Column.USER: lambda r, _: r.info.user,
    Column.TYPE: lambda r, _: r.type.value if r.type else None,
    Column.MEM: lambda r, _: r.used_memory_bytes,
    Column.PEAK: lambda r, _: r.peak_memory_bytes,
    Column.SM: lambda r, _: r.sm_util_percent,
    Column.CPU: lambda r, _: r.info.cpu_percent,
    Column.HOST: lambda r, _: r.info.host_rss_bytes,
    Column.TIME: _runtime_s,
    Column.STATE: lambda r, _: r.state.value,
    Column.COMMAND: lambda r, _: r.info.command,
}


def sort_value(row: ProcessRow, column: Column, now_wall: float) -> tuple[int, object]:
    """A sort key for ``column``; unknown values always sort last-ish (before known ones)."""
    value = _SORT_VALUES[column](row, now_wall)
    return (0, 0) if value is None else (1, value)


def matches(row: ProcessRow, view: TableView) -> bool:
    """True when the row passes the view's user, GPU and text filters."""
    if view.only_user is not None and row.info.user != view.only_user:
        return False
    if view.gpu is not None and view.gpu not in row.gpu_indices:
        return False
    needle = view.filter_text.strip().lower()
    if not needle:
        return True
    hay = " ".join(
        (str(row.pid), row.info.user or "", row.info.command, row.state.value, row.info.name or "")
    )
    return needle in hay.lower()


def ordered(
    rows: Iterable[ProcessRow], view: TableView, now_wall: float
) -> list[tuple[ProcessRow, int]]:
    """The visible rows in display order, each with its tree depth (0 unless tree view)."""
    chosen = [r for r in rows if matches(r, view)]
    # PID as a tie-breaker keeps equal rows from swapping places between ticks.
    chosen.sort(key=lambda r: r.pid)
    chosen.sort(key=lambda r: sort_value(r, view.sort, now_wall), reverse=view.reverse)
    if not view.tree:
        return [(r, 0) for r in chosen]
    return _as_tree(chosen)


def _as_tree(rows: list[ProcessRow]) -> list[tuple[ProcessRow, int]]:
    """Children under their parent (when the parent is listed too), siblings in sort order."""
    by_pid = {r.pid: r for r in rows}
    kids: dict[int, list[ProcessRow]] = {}
    roots: list[ProcessRow] = []
    for r in rows:
        parent = r.info.ppid
        if parent is not None and parent in by_pid and parent != r.pid:
            kids.setdefault(parent, []).append(r)
        else:
            roots.append(r)
    out: list[tuple[ProcessRow, int]] = []
    seen: set[int] = set()

    def walk(row: ProcessRow, depth: int) -> None:
        if row.pid in seen:
            return
        seen.add(row.pid)
        out.append((row, depth))
        for kid in kids.get(row.pid, []):
            walk(kid, depth + 1)

    for root in roots:
        walk(root, 0)
    for r in rows:  # a parent loop leaves rows unreached: list them flat rather than lose them
        walk(r, 0)
    return out


def _user(name: str | None) -> str:
    if name is None:
        return units.NA
    return name if len(name) <= USER_WIDTH else name[: USER_WIDTH - 1] + "…"


def short_command(row: ProcessRow) -> str:
    """The command with the program's directory dropped (the detail screen has it in full)."""
    argv = row.info.cmdline
    if not argv:
        return row.info.name or "?"
    return " ".join((os.path.basename(argv[0]) or argv[0], *argv[1:]))


def cells(
    row: ProcessRow, *, depth: int, now_wall: float, tagged: bool, cols: tuple[Column, ...]
) -> tuple[str, ...]:
    """The text of each shown column for one row."""
    info = row.info
    command = short_command(row)
    if depth:
        command = "  " * (depth - 1) + "└ " + command
    ptype = row.type
    every = (  # in Column order
        ("●" if tagged else " ") + (",".join(map(str, row.gpu_indices)) or "-"),
        str(row.pid),
        _user(info.user),
        _TYPE_TEXT.get(ptype, "-") if ptype else "-",
        units.short_size(row.used_memory_bytes),
        units.short_size(row.peak_memory_bytes),
        units.number(row.sm_util_percent),
        units.number(info.cpu_percent),
        units.short_size(info.host_rss_bytes),
        units.duration_coarse(_runtime_s(row, now_wall)),
        _STATE_TEXT.get(row.state, row.state.value),
        command,
    )
    if cols == _ALL:
        return every
    return tuple(every[_POSITION[c]] for c in cols)


_ALL = tuple(Column)
_POSITION = {c: i for i, c in enumerate(Column)}
