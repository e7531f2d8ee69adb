"""The process table: a light line-API widget that repaints only the rows that changed.

Rows are keyed 'pid:create_time'. Each tick the rows are filtered and sorted, and only the rows on
screen (the window) get their cells formatted and diffed against what is shown: a line is
repainted only if its text changed. So a tick costs one sort of every row plus the window's
cells, whether 40 or 5,000 processes are listed (a DataTable re-renders every cell on any change,
~10x more CPU at 1 Hz on 40 rows). Column widths grow to fit the rows seen since the last view
change: scrolling to a longer user name widens its column once.

The command is the last column and gets the rest of the line; when that would be fewer than
rows.COMMAND_MIN cells, the less useful columns (rows.DROP_ORDER: peak, host memory, type, CPU,
run time, container, SM) give way first. Cells are made for every column, so a column coming back
needs no new cells. The CONTAINER column is there only while some process runs in a container, so
a box without containers sees no change.

The GPU column says where a process runs: ``0/1`` (GPU 0, GPU instance 1) on a MIG device. Only
rows on a GPU in MIG mode look that up (Snapshot.device_labels); the others show the index.

The rows' numbers (GPU memory, SM %, CPU %, run time...) are shown at most every
``table_refresh_s`` (issue 42): every process's SM % moves every reading, and a changed row costs
Textual ~100 µs to draw, so at a 1 s interval the table was most of the screen redrawn each
second. Each snapshot's rows are still taken at once (``row``, ``current``, a kill, the detail
screen read the newest); what waits is only their drawing. Shown at once, whatever the time: a
process that comes or goes, any change of a row that is not a plain number (state, verdict,
user, command, container, GPU: :data:`_VERDICT`), and anything the user does (sort, filter, tree,
tags, cursor, scrolling, resizing).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import cast

from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop import cells as C
from gputop.engine.model import ProcessRow, RowKey, Snapshot, row_identity
from gputop.ui import rows as R
from gputop.ui.paint.bare_strip import bare_strip
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.row_cursor import CURSOR_BINDINGS, RowCursor

GAP = 2  # spaces between columns
TABLE_REFRESH_S = 2.0  # the rows' numbers at most this often (nvitop's default refresh)
# A reading a little early is on time: the sampler's readings are an interval apart give or take
# a few ms, and at a 1 s interval a 1.999 s gap must not wait for a third reading.
_EARLY_S = 0.1


@dataclass(frozen=True, slots=True)
class _Shown:
    cells: tuple[str, ...]
    stuck: bool
    tagged: bool


class ProcessTable(FramedLines, RowCursor, ScrollView, can_focus=True):
    """Shows Snapshot.processes through a TableView, with a row cursor and tags."""

    COMPONENT_CLASSES = {
        "process-table--header",
        "process-table--cursor",
        "process-table--stuck",
        "process-table--tagged",
    }
    BINDINGS = [
        Binding(
            "space", "tag", "Tag", show=False, tooltip="tag / untag a row (k signals all tagged)"
        ),
        Binding("enter", "choose", "Details", show=False),
        Binding("down,j,ctrl+n", "cursor(1)", "Down", show=False),
        Binding("up,ctrl+p", "cursor(-1)", "Up", show=False),
        *CURSOR_BINDINGS,
        Binding("right", "sideways(8)", "Scroll right", show=False),
        Binding("left", "sideways(-8)", "Scroll left", show=False),
    ]

    @dataclass
    class TagsChanged(Message):
        """The set of tagged rows changed (the app shows the count)."""

        count: int

    @dataclass
    class RowChosen(Message):
        """Enter (or a second click) on a row: open its details."""

        key: str

    def __init__(self, *, id: str | None = None, table_refresh_s: float | None = None) -> None:
        super().__init__(id=id)
        # The rows' numbers at most this often (0: every snapshot; None: TABLE_REFRESH_S, read
        # now so that tests of per-snapshot behaviour can pin it); see the module docstring.
        self.table_refresh_s = TABLE_REFRESH_S if table_refresh_s is None else table_refresh_s
        self.view = R.TableView(stuck_first=True)
        self.tags: set[str] = set()
        self.wide = False
        self.containers = False  # some process runs in a container: the CONTAINER column shows
        self.stuck_count = 0  # stuck processes among the rows shown
        self.cursor = 0
        self._rows: dict[str, ProcessRow] = {}
        self._keys: dict[RowKey, str] = {}  # process identity -> its key, for the rows in _rows
        self._tick = 0  # the RowChanges.tick of the rows taken last (0: not known)
        self._now_wall = 0.0
        self._snapshot: Snapshot | None = None
        self._mig_gpus: frozenset[int] = frozenset()  # GPUs in MIG mode: rows there say 0/1
        self._candidates: tuple[R.Column, ...] = R.columns(False, containers=False)
        self._cols: tuple[R.Column, ...] = self._candidates  # on screen: candidates that fit
        self._widths: dict[R.Column, int] = {}
        self._order: list[str] = []
        self._depths: dict[str, int] = {}  # tree depth of the rows that have one
        self._shown: dict[str, _Shown] = {}  # the window's rows (and any painted since)
        self._lines: dict[str, str] = {}
        self._styles: dict[str, Style] = {}
        self._painted: dict[int, tuple[str, Style, Strip]] = {}
        self._paint_geometry: tuple[int, int, int] | None = None
        self._header_text = ""
        self._layout = C.RowLayout((), GAP)
        self._shown_at_mono: float | None = None  # taken_at_mono of the snapshot drawn last
        self._latest: Snapshot | None = None  # the newest snapshot, drawn or waiting
        # Rows changed since the snapshot drawn last: key -> its row then (for order_holds);
        # None: every row is to be ordered again.
        self._held: dict[str, ProcessRow] | None = {}
        self._behind = False  # the newest snapshot's numbers wait to be drawn

    # -- data ---------------------------------------------------------------------------
    def on_mount(self) -> None:
        self._sync(full=True)

    def update_snapshot(self, snapshot: Snapshot, *, now: bool = False) -> None:
        """Take the processes of a new snapshot and repaint what changed: at once when a
        process came or went, a row's state or verdict changed, the last drawing is
        ``table_refresh_s`` old, or ``now`` (a kill's follow-up); else the numbers wait."""
        # What changed since the rows taken last (gputop.engine.changes): at thousands of idle
        # workers a few rows, and formatting 5,000 keys would be a third of this method.
        before = self._rows
        moved = self._take(snapshot)
        if moved is None and before is not self._rows and before.keys() == self._rows.keys():
            # Taken whole (no change to follow), yet the same processes: compare them all.
            moved = (list(before.values()), list(map(self._rows.__getitem__, before)))
        self._latest = snapshot
        if moved is not None and self._held is not None:
            keys = list(map(self._keys.__getitem__, map(row_identity, moved[1])))
            self._held = dict(zip(keys, moved[0], strict=True)) | self._held  # the oldest wins
        else:
            self._held = None
        if (
            now
            or moved is None
            or not self._waits(snapshot.taken_at_mono)
            or list(map(_VERDICT, moved[0])) != list(map(_VERDICT, moved[1]))
        ):
            self._show_latest()
        else:
            self._behind = True

    def _waits(self, taken_at_mono: float) -> bool:
        """Whether a reading taken then is too soon after the one drawn to be drawn."""
        shown = self._shown_at_mono
        return shown is not None and taken_at_mono - shown < self.table_refresh_s - _EARLY_S

    def catch_up(self) -> None:
        """Draw the numbers that wait, if any (the user acted: show the newest)."""
        if self._behind:
            self._show_latest()

    def _show_latest(self, *, full: bool = False, resort: bool = False) -> None:
        """Draw the newest snapshot's rows and every change held back since the last drawing;
        ``resort``: order every row again (the view changed)."""
        snapshot = self._latest
        held, self._held, self._behind = self._held, {}, False
        if resort:
            held = None
        if snapshot is None:  # nothing taken yet
            self._sync(full=full)
            return
        rows = self._rows
        moved = None if held is None else (list(held.values()), list(map(rows.__getitem__, held)))
        self._shown_at_mono = snapshot.taken_at_mono
        self._now_wall = snapshot.taken_at_wall
        self._snapshot = snapshot
        self._mig_gpus = frozenset(g.index for g in snapshot.gpus if g.mig_mode or g.mig_devices)
        if moved is None or list(map(_container_of, moved[0])) != list(
            map(_container_of, moved[1])
        ):
            containers = R.any_container(rows.values())
            if containers != self.containers:  # the column comes or goes with the next fit
                self.containers = containers
                self._candidates = R.columns(self.wide, containers=containers)
        if self.tags - rows.keys():
            self.tags &= rows.keys()  # tags of processes that are gone
            self.post_message(self.TagsChanged(len(self.tags)))
        self._sync(full=full, moved=moved)

    def _take(self, snapshot: Snapshot) -> tuple[list[ProcessRow], list[ProcessRow]] | None:
        """Take the snapshot's rows: (the rows replaced, their new rows) when the same processes
        are listed as before, else None."""
        changes = snapshot.changes
        tick, self._tick = self._tick, changes.tick if changes is not None else 0
        if changes is not None and changes.tick == tick:
            return [], []  # the rows taken last, again (a stale re-send)
        if changes is None or not changes.follows(tick):
            self._take_all(snapshot.processes)
            return None
        rows, keys = self._rows, self._keys
        for gone in changes.removed:
            del rows[keys.pop(gone)]
        for row in changes.added:
            keys[row.identity] = name = R.row_key(row)
            rows[name] = row
        news = list(changes.changed)
        keyed = list(map(keys.__getitem__, map(row_identity, news)))
        olds = list(map(rows.__getitem__, keyed))
        rows.update(zip(keyed, news, strict=True))
        return (olds, news) if changes.quiet else None

    def _take_all(self, procs: tuple[ProcessRow, ...]) -> None:
        """Key every row; a process listed before keeps its key."""
        ids = list(map(row_identity, procs))
        keyed = _with_keys(list(map(self._keys.get, ids)), procs)  # in C: no Python step a row
        self._rows = dict(zip(keyed, procs, strict=True))
        self._keys = dict(zip(ids, keyed, strict=True))

    def set_view(self, view: R.TableView) -> None:
        """Show the rows through another view (sort, filter, tree...).

        A sort the user picks (column or direction) is theirs alone: stuck rows no longer lead.
        """
        header = (view.sort, view.reverse) != (self.view.sort, self.view.reverse)
        if header and view.stuck_first:
            view = replace(view, stuck_first=False)
        self.view = view
        self._show_latest(full=header, resort=True)

    def set_wide(self, wide: bool) -> None:
        """Show every column (wide) or hide the ones the detail screen shows."""
        if wide != self.wide:
            self.wide = wide
            self._candidates = R.columns(wide, containers=self.containers)
            self._show_latest(full=True, resort=True)

    # -- queries ------------------------------------------------------------------------
    @property
    def columns(self) -> tuple[R.Column, ...]:
        """The columns on screen, in order (the command last)."""
        return self._cols

    @property
    def current_key(self) -> str | None:
        """The row key under the cursor."""
        return self._order[self.cursor] if 0 <= self.cursor < len(self._order) else None

    @property
    def current(self) -> ProcessRow | None:
        """The process under the cursor."""
        key = self.current_key
        return None if key is None else self._rows.get(key)

    def visible_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._order)

    def row(self, key: str) -> ProcessRow | None:
        """The process with this row key, if present."""
        return self._rows.get(key)

    def get_row_index(self, key: str) -> int:
        """Display position of a row key."""
        return self._order.index(key)

    def cell_text(self, key: str, column: R.Column) -> str:
        """What a cell shows (for tests and screen readers)."""
        return self._shown_of(key).cells[_POSITION[column]]

    def header_label(self, column: R.Column) -> str:
        """A column's header text, with the sort marker on the sorted column."""
        label = R.LABELS[column]
        if column == self.view.sort:
            label += "▼" if self.view.reverse else "▲"
        return label

    def tagged_rows(self) -> list[ProcessRow]:
        """The tagged processes still present, in display order."""
        return [self._rows[k] for k in self._order if k in self.tags] + [
            self._rows[k] for k in sorted(self.tags) if k in self._rows and k not in self._order
        ]

    # -- actions ------------------------------------------------------------------------
    @property
    def row_count(self) -> int:
        """Rows shown (after the view's filter)."""
        return len(self._order)

    def action_sideways(self, columns: int) -> None:
        self.catch_up()
        self.scroll_to(x=self.scroll_x + columns, animate=False)

    def action_choose(self) -> None:
        key = self.current_key
        if key is not None:
            self.post_message(self.RowChosen(key))

    def action_tag(self) -> None:
        key = self.current_key
        if key is None:
            return
        self.tags.symmetric_difference_update({key})
        self.post_message(self.TagsChanged(len(self.tags)))
        self._show_latest(resort=True)
        self.action_cursor(1)

    def move_cursor(self, row: int) -> None:
        super().move_cursor(row)  # among the rows as drawn, then the newest (it follows them)
        self.catch_up()

    def header_clicked(self, x: int) -> None:
        column = self._column_at(x)
        if column is not None:
            same = column == self.view.sort
            reverse = not self.view.reverse if same else column in R.NUMERIC
            self.set_view(replace(self.view, sort=column, reverse=reverse))

    def _column_at(self, x: int) -> R.Column | None:
        start = 1
        for col in self._cols:
            end = start + self._widths.get(col, 0)
            if start <= x < end + GAP:
                return col
            start = end + GAP
        return None

    # -- diff and paint -----------------------------------------------------------------
    def _sync(
        self,
        *,
        full: bool = False,
        moved: tuple[list[ProcessRow], list[ProcessRow]] | None = None,
    ) -> None:
        """Order, format and repaint. ``moved``: the same processes as before, these rows (old,
        new) changed; when every one stands where it stood, the order is kept without a sort
        (at thousands of processes, most ticks: see gputop.engine.changes)."""
        keep = self.current_key
        view = self.view
        if moved is not None and R.order_holds(*moved, view):
            order = self._order
        else:
            wanted = R.ordered(self._rows.values(), view, self._now_wall)
            keys = self._keys
            order = [keys[row_identity(r)] for r, _ in wanted]
            self._depths = {keys[row_identity(r)]: d for r, d in wanted if d} if view.tree else {}
            self.stuck_count = sum(1 for r, _ in wanted if R.is_stuck(r))
        old_order, old_shown, old_cursor = self._order, self._shown, self.cursor
        self._order = order
        if keep is not None and keep in self._rows and keep in order:
            self.cursor = order.index(keep)  # the cursor follows its process
        else:
            self.cursor = max(0, min(self.cursor, len(order) - 1))
        self._shown = {}
        full = self._fill_window(reset=full, old=old_shown) or full
        self.virtual_size = Size(self._line_width(), len(order) + 1)
        if full:
            self.refresh()
            return
        # Repaint the window's lines whose process, text or cursor highlight changed; lines past
        # the end of the shorter list are repainted too (blank, or a new row).
        top, height = self._window()
        changed = [
            i
            for i in range(top, min(top + height, max(len(order), len(old_order))))
            if i >= len(order)
            or i >= len(old_order)
            or order[i] != old_order[i]
            or self._shown[order[i]] != old_shown.get(order[i])
        ]
        if self.cursor != old_cursor:
            changed += [old_cursor, self.cursor]
        self.refresh_rows(sorted({i + 1 - top for i in changed if top <= i < top + height}))

    def _window(self) -> tuple[int, int]:
        """(first row index, row count) of the rows on screen now."""
        return int(self.scroll_y), max(0, self.scrollable_content_region.height - 1)

    def _fill_window(self, *, reset: bool = False, old: dict[str, _Shown] | None = None) -> bool:
        """Format the rows on screen (and the cursor's); True when the column widths changed,
        and so every line must be painted again."""
        top, height = self._window()
        order = self._order
        window = {order[i] for i in range(top, min(len(order), top + height))}
        if 0 <= self.cursor < len(order):
            window.add(order[self.cursor])
        shown = self._shown
        for key in window:
            if key not in shown:
                shown[key] = self._format(key)
        widths = self._grow_widths(shown.values(), reset=reset)
        cols = self._fit(widths)
        changed = (
            reset
            or cols != self._cols
            or any(widths[c] != self._widths.get(c) for c in cols)  # a hidden one may grow
        )
        if changed:
            self._cols = cols
            self._set_widths(widths)
            self._header_text = self._header_line()
            self._lines = {k: self._line(v.cells) for k, v in shown.items()}
            return True
        self._widths = widths  # hidden columns may have grown: kept for when they come back
        # Same column widths: a row's text is new only if its cells changed.
        old = old if old is not None else shown
        old_lines = self._lines
        self._lines = {
            k: old_lines[k] if k in old_lines and v == old.get(k) else self._line(v.cells)
            for k, v in shown.items()
        }
        return False

    def _format(self, key: str) -> _Shown:
        row = self._rows[key]
        tagged = key in self.tags
        snapshot, mig = self._snapshot, self._mig_gpus
        on_mig = bool(mig) and snapshot is not None and not mig.isdisjoint(row.gpu_indices)
        cells = R.cells(
            row,
            depth=self._depths.get(key, 0),
            now_wall=self._now_wall,
            tagged=tagged,
            cols=_ALL,
            devices=snapshot.device_labels(row) if on_mig and snapshot is not None else None,
        )
        return _Shown(cells=cells, stuck=row.stuck, tagged=tagged)

    def _shown_of(self, key: str) -> _Shown:
        """A row's cells: the window's are formatted each tick, any other on demand."""
        shown = self._shown.get(key)
        if shown is None:
            shown = self._shown[key] = self._format(key)
        return shown

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        if round(old_value) != round(new_value):
            self.catch_up()
            self._fill_window()  # the rows scrolled into view, before they are painted
        super().watch_scroll_y(old_value, new_value)

    def on_resize(self) -> None:
        self.catch_up()
        if self._fill_window():
            self.virtual_size = Size(self._line_width(), len(self._order) + 1)

    def _grow_widths(self, shown: Iterable[_Shown], *, reset: bool) -> dict[R.Column, int]:
        """Column widths only grow between view changes, so columns don't jitter per tick."""
        # In terminal cells, as every cell is padded and the line scrolled (gputop.cells).
        widths = {c: C.cell_len(self.header_label(c)) for c in _ALL}
        if not reset:
            for c in _ALL:
                widths[c] = max(widths[c], self._widths.get(c, 0))
        columns = zip(*(item.cells for item in shown), strict=True)
        for c, values in zip(_ALL, columns, strict=False):  # no rows: no columns
            # ASCII (nearly always) is a cell a character; measuring in C is 4x cheaper
            measure = len if "".join(values).isascii() else C.cell_len
            widths[c] = max(widths[c], *map(measure, values))
        return widths

    def _fit(self, widths: dict[R.Column, int]) -> tuple[R.Column, ...]:
        """The candidate columns that leave the command its room (rows.fit_columns)."""
        # The vertical scrollbar's column is kept free: it comes and goes with the row count,
        # and the columns must not change with it.
        room = self.size.width - 1  # size: inside the border
        if room <= 0:  # not laid out yet
            return self._candidates
        return R.fit_columns(self._candidates, widths, room, GAP)

    def _line_width(self) -> int:
        return 1 + sum(self._widths.get(c, 0) for c in self._cols) + GAP * (len(self._cols) - 1)

    def _line(self, cells: tuple[str, ...]) -> str:
        return self._layout.line(cells)

    def _set_widths(self, widths: dict[R.Column, int]) -> None:
        self._widths = widths
        # One format call per row ("{1:>6}  {2:<8}..."), not one pad per cell; a row holds the
        # cells of every column, and the shown ones are picked by position.
        self._layout = C.RowLayout(
            [(_POSITION[col], widths.get(col, 0), col in R.NUMERIC) for col in self._cols], GAP
        )

    def _header_line(self) -> str:
        return self._line(tuple(self.header_label(c) for c in _ALL))

    def _begin_paint(self) -> None:
        # One geometry lookup per paint instead of one per row (FramedLines calls this).
        self._paint_geometry = self._geometry()

    def _end_paint(self) -> None:
        self._paint_geometry = None

    def _geometry(self) -> tuple[int, int, int]:
        """(view width, scroll x, scroll y)."""
        return self._paint_geometry or (
            self.scrollable_content_region.width,
            int(self.scroll_x),
            int(self.scroll_y),
        )

    def render_line(self, y: int) -> Strip:
        width, scroll_x, scroll_y = self._geometry()
        base = self._style("base")
        if y == 0:
            text, style = self._header_text, self._style("process-table--header")
        else:
            index = scroll_y + y - 1
            if index >= len(self._order):
                return Strip.blank(width, base)
            key = self._order[index]
            known = self._lines.get(key)
            if known is None:  # scrolled into view before a tick formatted it
                known = self._lines[key] = self._line(self._shown_of(key).cells)
            text, style = known, self._row_style(key, index, base)
        # Exactly ``width`` cells, or the terminal keeps another row's text past a short one.
        return self._paint(y, C.window(text, scroll_x, width), style, width, bare_strip)

    def _row_style(self, key: str, index: int, base: Style) -> Style:
        shown = self._shown_of(key)
        style = base
        if shown.stuck:
            style += self._style("process-table--stuck")
        if shown.tagged:
            style += self._style("process-table--tagged")
        if index == self.cursor:
            style += self._style("process-table--cursor")
        return style


def _with_keys(found: list[str | None], rows: Sequence[ProcessRow]) -> list[str]:
    """``found`` (the key each row had, None for a new one) with a key made for each new row."""
    if None in found:
        for i in compress(count(), map(is_, found, repeat(None))):
            found[i] = R.row_key(rows[i])
    return cast(list[str], found)


_ALL = tuple(R.Column)
_container_of = attrgetter("info.container")
# What a row shows or means besides plain numbers: a change here is drawn at once, however soon.
# Not info.status: running/sleeping flips every reading; what it means (stopped, zombie) is in
# states.
_VERDICT = attrgetter(
    "states",
    "gpu_indices",
    "type",
    "parent_note",
    "device_files",
    "info.visible",
    "info.user",
    "info.name",
    "info.cmdline",
    "info.ppid",
    "info.note",
    "info.container",
    "info.blocked",
)
_POSITION = {c: i for i, c in enumerate(R.Column)}
