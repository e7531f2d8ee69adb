"""The process table's content as pure functions: which rows, in which order, with which cells.

The widget (widgets/process_table.py) makes the cells of the rows on screen with these and
repaints a line only when its text changed (no DataTable).
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import repeat

from gputop import units
from gputop.cells import truncate
from gputop.engine.model import ProcessRow, ProcessType, ProcInfo, ProcState


class Column(StrEnum):
    """Process table columns, in display order; the value is the column key."""

    GPU = "gpu"
    PID = "pid"
    USER = "user"
    CONTAINER = "container"
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
    Column.CONTAINER: "CONTAINER",
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
# The columns that give way, first to last, when the command would get fewer than COMMAND_MIN
# cells; GPU, PID, USER, GPU-MEM and STATE always stay (the process detail screen has the rest).
DROP_ORDER = (
    Column.PEAK,
    Column.HOST,
    Column.TYPE,
    Column.CPU,
    Column.TIME,
    Column.CONTAINER,
    Column.SM,
)
COMMAND_MIN = 36  # "python3 train.py --model llama-7b": the arguments that tell jobs apart
USER_WIDTH = 8
CONTAINER_WIDTH = 20  # a Kubernetes container's or a Docker name; a 12-character short id

_STATE_TEXT = {ProcState.NAMESPACE: "other-ns"}
_TYPE_TEXT = {ProcessType.COMPUTE: "C", ProcessType.GRAPHICS: "G", ProcessType.MIXED: "C+G"}


@dataclass(frozen=True, slots=True, kw_only=True)
class TableView:
    """How the user wants the table: sort, filter, only one user, tree, one GPU.

    ``stuck_first`` puts stuck processes (holders, defunct, orphans, stopped) above the others,
    each group in the sort order: the table starts so, and a sort the user picks turns it off.
    """

    sort: Column = Column.MEM
    reverse: bool = True
    stuck_first: bool = False
    filter_text: str = ""
    only_user: str | None = None
    tree: bool = False
    gpu: int | None = None

    @property
    def filtered(self) -> bool:
        """Whether a filter (user, GPU or text) hides some rows."""
        return self.only_user is not None or self.gpu is not None or bool(self.filter_text.strip())


def row_key(row: ProcessRow) -> str:
    """A process identity that survives PID reuse: 'pid:create_time'."""
    return f"{row.pid}:{row.info.create_time}"


def columns(wide: bool, *, containers: bool = True) -> tuple[Column, ...]:
    """The columns shown at this width; CONTAINER only with ``containers`` (a process in one)."""
    return tuple(
        c
        for c in Column
        if (wide or c not in NARROW_HIDDEN) and (containers or c is not Column.CONTAINER)
    )


def any_container(rows: Iterable[ProcessRow]) -> bool:
    """True when a process runs in a container (the table shows the CONTAINER column then).
    Asked of every row each tick: about 0.2 ms at 5,000 processes, less once one is found."""
    return any(r.info.container is not None for r in rows)


def fit_columns(
    candidates: tuple[Column, ...], widths: dict[Column, int], room: int, gap: int
) -> tuple[Column, ...]:
    """``candidates`` less the DROP_ORDER columns the command needs the room of.

    A line is one blank, then the columns ``gap`` apart, the command last. Columns give way
    until the command gets COMMAND_MIN cells (or its longest text, when shorter) of ``room``.
    """
    want = min(COMMAND_MIN, widths.get(Column.COMMAND, COMMAND_MIN))
    shown = list(candidates)

    def command_room() -> int:
        return room - 1 - sum(widths.get(c, 0) + gap for c in shown if c is not Column.COMMAND)

    for column in DROP_ORDER:
        if command_room() >= want:
            break
        if column in shown:
            shown.remove(column)
    return tuple(shown)


def _stuck_states() -> frozenset[ProcState]:
    """The states ProcessRow.stuck calls stuck (it looks at the row's first state), read off it
    once so that it stays the one definition."""
    return frozenset(
        s for s in ProcState if ProcessRow(pid=0, info=ProcInfo(pid=0), states=(s,)).stuck
    )


STUCK_STATES = _stuck_states()


def is_stuck(row: ProcessRow) -> bool:
    """``row.stuck``, about ten times faster: each tick asks it of every row (5,000 at most)."""
    states = row.states
    return bool(states) and states[0] in STUCK_STATES


def _runtime_s(row: ProcessRow, now_wall: float) -> float | None:
    ct = row.info.create_time
    return None if ct is None else max(0.0, now_wall - ct)


# The sort values that are a row's attribute, read in C where many rows are compared
# (order_holds).
_SORT_GETTERS: dict[Column, Callable[[ProcessRow], object]] = {
    Column.PID: operator.attrgetter("pid"),
    Column.USER: operator.attrgetter("info.user"),
    Column.MEM: operator.attrgetter("used_memory_bytes"),
    Column.PEAK: operator.attrgetter("peak_memory_bytes"),
    Column.SM: operator.attrgetter("sm_util_percent"),
    Column.CPU: operator.attrgetter("info.cpu_percent"),
    Column.HOST: operator.attrgetter("info.host_rss_bytes"),
}


def _at_any_time(get: Callable[[ProcessRow], object]) -> Callable[[ProcessRow, float], object]:
    return lambda row, _: get(row)


_SORT_VALUES: dict[Column, Callable[[ProcessRow, float], object]] = {
    Column.GPU: lambda r, _: r.gpu_indices[0] if r.gpu_indices else None,
    Column.CONTAINER: lambda r, _: _container_label(r),
    Column.TYPE: lambda r, _: r.type.value if r.type else None,
    Column.TIME: _runtime_s,
    Column.STATE: lambda r, _: r.state.value,
    Column.COMMAND: lambda r, _: r.info.command,
    **{column: _at_any_time(get) for column, get in _SORT_GETTERS.items()},
}
_STATES = operator.attrgetter("states")


def sort_value(row: ProcessRow, column: Column, now_wall: float) -> tuple[int, object]:
    """A sort key for ``column``; unknown values always sort last-ish (before known ones)."""
    return _known(_SORT_VALUES[column](row, now_wall))


def _known(value: object) -> tuple[int, object]:
    return (0, 0) if value is None else (1, value)


_PID = operator.attrgetter("pid")


def matches(row: ProcessRow, view: TableView) -> bool:
    """True when the row passes the view's user, GPU and text filters."""
    if view.only_user is not None and row.info.user != view.only_user:
        return False
    if view.gpu is not None and view.gpu not in row.gpu_indices:
        return False
    needle = view.filter_text.strip().lower()
    if not needle:
        return True
    info = row.info
    hay = " ".join((str(row.pid), info.user or "", info.command, row.state.value, info.name or ""))
    if needle in hay.lower():
        return True
    box = info.container
    if box is None:
        return False
    # The container by its name or id (the full id, so that a prefix of either matches), and the
    # pod and namespace it runs in.
    return needle in " ".join((box.name or "", box.id, box.pod or "", box.namespace or "")).lower()


def order_holds(olds: Sequence[ProcessRow], news: Sequence[ProcessRow], view: TableView) -> bool:
    """Whether :func:`ordered` would keep its order when each row of ``olds`` becomes the one
    of ``news`` in its place (the same process a tick later): every one keeps its sort value,
    stuck group and filter verdict. Never under the runtime sort or in the tree, which move
    anyway. Compared in C where it can be: a few hundred rows a tick (gputop.engine.changes)."""
    if view.tree or view.sort is Column.TIME:
        return False
    value = _SORT_GETTERS.get(view.sort)
    if value is not None:
        same = list(map(value, olds)) == list(map(value, news))
    else:
        by = _SORT_VALUES[view.sort]
        same = list(map(by, olds, repeat(0.0))) == list(map(by, news, repeat(0.0)))
    if not same:
        return False
    if list(map(_STATES, olds)) != list(map(_STATES, news)) and list(map(is_stuck, olds)) != list(
        map(is_stuck, news)
    ):
        return False
    return not view.filtered or all(
        matches(old, view) == matches(new, view) for old, new in zip(olds, news, strict=True)
    )


def ordered(
    rows: Iterable[ProcessRow], view: TableView, now_wall: float
) -> list[tuple[ProcessRow, int]]:
    """The visible rows in display order, each with its tree depth (0 unless tree view)."""
    # Each tick sorts every row (5,000 at most): no filter, no call a row.
    chosen = [r for r in rows if matches(r, view)] if view.filtered else list(rows)
    # PID as a tie-breaker keeps equal rows from swapping places between ticks.
    chosen.sort(key=_PID)
    value = _SORT_VALUES[view.sort]
    chosen.sort(key=lambda r: _known(value(r, now_wall)), reverse=view.reverse)
    if view.stuck_first:
        # stable: each group keeps the sort order (is_stuck inline: a row each)
        chosen.sort(key=lambda r: not (r.states and r.states[0] in STUCK_STATES))
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
    # Cut in cells (a CJK character takes two), so that the next column does not move.
    return units.NA if name is None else truncate(name, USER_WIDTH)


def _container_label(row: ProcessRow) -> str | None:
    box = row.info.container
    return None if box is None else box.label


def _container(row: ProcessRow) -> str:
    """The container column's text: its label (cut to CONTAINER_WIDTH), "-" when in none."""
    box = row.info.container
    if box is None:
        return "-"
    return truncate(box.label, CONTAINER_WIDTH)


def short_command(row: ProcessRow) -> str:
    """The command with the program's directory dropped (the detail screen has it in full)."""
    argv = row.info.cmdline
    if not argv:
        return row.info.name or "?"
    return " ".join((os.path.basename(argv[0]) or argv[0], *argv[1:]))


def cells(
    row: ProcessRow,
    *,
    depth: int,
    now_wall: float,
    tagged: bool,
    cols: tuple[Column, ...],
    devices: tuple[str, ...] | None = None,
) -> tuple[str, ...]:
    """The text of each shown column for one row.

    ``devices``: where it runs, one label per GPU (Snapshot.device_labels: ``"0/1"`` on a MIG
    device), for the GPU column; None: the GPU indices.
    """
    info = row.info
    command = short_command(row)
    if depth:
        command = "  " * (depth - 1) + "└ " + command
    ptype = row.type
    gpus = ",".join(devices) if devices is not None else ",".join(map(str, row.gpu_indices))
    every = (  # in Column order
        ("●" if tagged else " ") + (gpus or "-"),
        str(row.pid),
        _user(info.user),
        _container(row),
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
