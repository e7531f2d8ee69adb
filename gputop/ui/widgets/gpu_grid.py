"""The GPU panels: a grid on wide terminals, compact rows (or a scroll) when space is short.

Space goes first to the process table, one line per process (MIN_TABLE_LINES at least); the
panels take the rest. Bordered panels come in as few columns as keep them under MAX_PANEL_WIDTH,
so wide terminals get wide sparklines, and lines the table does not need make the panels' charts
taller (up to MAX_CHART_ROWS lines each). When the panels cannot all be shown, the grid scrolls
and its last line says how many are out of view; with no GPU at all it says so.

A GPU in MIG mode needs lines for its MIG devices (gpu_panel.mig_lines: one each in a bordered
panel, one in all in the dense rows): a row of panels is as tall as its tallest panel needs, so
the plan counts them in every density.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import ScrollableContainer
from textual.widgets import Static

from gputop.engine.history import History
from gputop.engine.model import Snapshot
from gputop.ui.widgets.gpu_panel import PANEL_HEIGHT, Density, GpuPanel, mig_lines

MIN_PANEL_WIDTH = {Density.FULL: 48, Density.COMPACT: 100, Density.MINI: 80}
MAX_PANEL_WIDTH = 100  # bordered panels: more columns than this needs only when rows are short
MIN_TABLE_LINES = 9  # header + ~6 process rows + the unattributed-memory line
# The table's borders, header and sideways scrollbar, and below it up to four lines of
# unattributed memory and holder-scan note.
TABLE_CHROME_LINES = 8
CHROME_LINES = 2  # the header bar and the footer
MAX_CHART_ROWS = 6  # lines of a bordered panel's utilisation (and memory) chart, at most
ROW_SLACK = 3  # processes that may go before the panels take their lines back
NO_GPUS = "no GPUs: the driver lists none"
NO_READING_YET = "no GPUs yet: waiting for the driver's first reading"


@dataclass(frozen=True, slots=True)
class GridLayout:
    """How the panels are arranged for a terminal size."""

    density: Density
    columns: int
    height: int  # lines the grid takes (it scrolls when the panels need more)
    chart_rows: int = 1  # lines of each sparkline chart (bordered panels only)
    hidden: int = 0  # panels out of view (the grid's last line says how many)
    # Lines each row of panels adds for MIG devices (the most one of its panels needs); empty
    # when no GPU is in MIG mode.
    mig_rows: tuple[int, ...] = ()

    @property
    def row_height(self) -> int:
        """Lines of a row of panels without MIG devices."""
        return PANEL_HEIGHT[self.density] + 2 * (self.chart_rows - 1)

    @property
    def row_heights(self) -> tuple[int, ...]:
        """Lines of each row of panels (one value for all when no GPU is in MIG mode)."""
        base = self.row_height
        return tuple(base + extra for extra in self.mig_rows) or (base,)

    def heights(self, rows: int) -> list[int]:
        """Lines of each of the first ``rows`` rows of panels."""
        base = self.row_height
        extra = self.mig_rows
        return [base + (extra[r] if r < len(extra) else 0) for r in range(rows)]

    def height_of(self, index: int) -> int:
        """Lines of the panel at this position (its row's)."""
        return self.heights(index // self.columns + 1)[-1]


def _mig_rows(mig: Sequence[int], columns: int, density: Density) -> tuple[int, ...]:
    """The MIG lines of each row of panels ``columns`` wide, from each GPU's bordered-panel
    count (the dense rows need one line for any); empty when there are none."""
    if not any(mig):
        return ()
    per_gpu = mig if density is Density.FULL else [min(1, n) for n in mig]
    return tuple(max(per_gpu[i : i + columns]) for i in range(0, len(per_gpu), columns))


def _shown_in(heights: Sequence[int], columns: int, room: int) -> int:
    """Panels whose rows fit whole in ``room`` lines."""
    shown = 0
    for h in heights:
        room -= h
        if room < 0:
            break
        shown += columns
    return shown


def plan_layout(
    gpu_count: int,
    width: int,
    height: int,
    table_rows: int | None = None,
    mig: Sequence[int] = (),
) -> GridLayout:
    """Where the panels go on a ``width`` x ``height`` terminal.

    ``mig``: per GPU, in order, the lines its MIG devices take in a bordered panel
    (gpu_panel.mig_lines; none or 0 for a GPU not in MIG mode).

    With ``table_rows`` (the processes listed) the table first gets a line for each, and bordered
    panels that fit in what is left come in as few columns as keep them under MAX_PANEL_WIDTH,
    their charts as tall as the spare lines allow. Else (or when they do not fit): the roomiest
    density whose grid leaves the process table MIN_TABLE_LINES, in as many columns as fit.
    """
    if gpu_count <= 0:
        return GridLayout(density=Density.FULL, columns=1, height=1)  # the "no GPUs" line
    n = gpu_count
    mig = [*mig[:n], *[0] * (n - len(mig))]
    lines = height - CHROME_LINES
    if table_rows is not None:
        room = lines - max(MIN_TABLE_LINES, table_rows + TABLE_CHROME_LINES)
        full = PANEL_HEIGHT[Density.FULL]
        most = max(1, min(n, width // MIN_PANEL_WIDTH[Density.FULL]))
        fewest = max(1, min(most, math.ceil(width / MAX_PANEL_WIDTH)))
        for columns in range(fewest, most + 1):
            rows = math.ceil(n / columns)
            extra = _mig_rows(mig, columns, Density.FULL)
            spare = room - rows * full - sum(extra)
            if spare >= 0:
                chart_rows = 1 + min(MAX_CHART_ROWS - 1, spare // (2 * rows))
                plan = GridLayout(Density.FULL, columns, 0, chart_rows=chart_rows, mig_rows=extra)
                return replace(plan, height=sum(plan.heights(rows)))
    room = max(1, lines - MIN_TABLE_LINES)
    for density in Density:
        columns = max(1, min(n, width // MIN_PANEL_WIDTH[density]))
        extra = _mig_rows(mig, columns, density)
        plan = GridLayout(density=density, columns=columns, height=0, mig_rows=extra)
        heights = plan.heights(math.ceil(n / columns))
        needed = sum(heights)
        if needed <= room or density is Density.MINI:
            hidden = 0
            if needed > room:  # the last line says how many are out of view
                hidden = n - min(n, _shown_in(heights, columns, max(0, room - 1)))
            return replace(plan, height=min(needed, room), hidden=hidden)
    raise AssertionError("unreachable: MINI always returns")


class GpuGrid(ScrollableContainer, can_focus=False):
    """Holds one GpuPanel per GPU and lays them out for the terminal size."""

    DEFAULT_CSS = """
    GpuGrid { layout: grid; height: auto; }
    GpuGrid > #gpu-note { dock: bottom; height: 1; display: none; }
    GpuGrid > #gpu-note.-shown { display: block; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._term_size = (80, 24)
        self.layout_plan: GridLayout | None = None
        self._panels: dict[int, GpuPanel] = {}  # by GPU index; kept so ticks never query the DOM
        self._table_rows: int | None = None  # processes the plan leaves lines for
        self._mig: tuple[int, ...] = ()  # per panel, in order: its MIG lines (bordered)
        self._seen = False  # a snapshot came: no panel at all then means no GPU
        self._waiting = False  # ... unless it is the stand-in before any reading
        self.note = Static("", id="gpu-note", markup=False)  # out-of-view count, or no GPUs
        self._note_text = ""

    def compose(self) -> ComposeResult:
        yield self.note

    @property
    def panels(self) -> list[GpuPanel]:
        """The panels, in GPU order."""
        return [self._panels[i] for i in sorted(self._panels)]

    def update_snapshot(self, snapshot: Snapshot, history: History) -> None:
        """Give each panel its sample and trend; add or remove panels when GPUs change, and
        relayout when they do, when the process count moves (by more than ROW_SLACK down) or a
        GPU's MIG devices do."""
        panels = self._panels
        wanted = [g.index for g in snapshot.gpus]
        relayout = not self._seen
        self._seen = True
        self._waiting = snapshot.no_reading_yet
        rows = len(snapshot.processes)
        old = self._table_rows
        if old is None or rows > old or rows < old - ROW_SLACK:
            self._table_rows = rows
            relayout = True
        if sorted(panels) != sorted(wanted):
            for index in [i for i in panels if i not in wanted]:
                panels.pop(index).remove()
            new = [GpuPanel(i, id=f"gpu-{i}") for i in wanted if i not in panels]
            if new:
                self.mount_all(new)
                panels.update((p.index, p) for p in new)
            relayout = True
        by_index = {g.index: mig_lines(g, Density.FULL) for g in snapshot.gpus}
        mig = tuple(by_index[i] for i in sorted(by_index)) if any(by_index.values()) else ()
        if mig != self._mig:
            self._mig = mig
            relayout = True
        if relayout:
            self.relayout(*self._term_size)
        for gpu in snapshot.gpus:
            panels[gpu.index].show(gpu, history)

    def relayout(self, width: int, height: int) -> None:
        """Choose density, columns and height for a terminal of this size."""
        self._term_size = (width, height)
        panels = self.panels
        plan = plan_layout(len(panels), width, height, self._table_rows, self._mig)
        if plan != self.layout_plan:
            self.layout_plan = plan
            self.styles.grid_size_columns = plan.columns
            self.styles.grid_rows = " ".join(map(str, plan.row_heights))
            self.styles.height = plan.height
            self.set_class(plan.density.value != "full", "-dense")
        index_width = len(str(max(self._panels, default=0)))
        for position, panel in enumerate(panels):
            panel.index_width = index_width
            panel.chart_rows = plan.chart_rows
            panel.density = plan.density
            panel.styles.height = plan.height_of(position)
        self._show_note(plan, bool(panels))

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        # Textual scrolls a focused panel into the grid's region, which the docked note's line
        # is part of: one under the note is scrolled above it.
        note = self.note
        if note.display and note.has_class("-shown"):
            below = event.widget.region.bottom - note.region.y
            if below > 0:
                self.scroll_relative(y=below, animate=False)

    def _show_note(self, plan: GridLayout, any_panel: bool) -> None:
        if not any_panel:
            text = (NO_READING_YET if self._waiting else NO_GPUS) if self._seen else ""
        elif plan.hidden:
            gpus = "GPU" if plan.hidden == 1 else "GPUs"
            text = f"+{plan.hidden} more {gpus}: enlarge the window / press d for a GPU's detail"
        else:
            text = ""
        if text != self._note_text:
            self._note_text = text
            self.note.update(Text(text))
            self.note.set_class(bool(text), "-shown")
