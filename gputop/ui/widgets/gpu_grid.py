"""The GPU panels: a grid on wide terminals, compact rows (or a scroll) when space is short."""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual.containers import ScrollableContainer

from gputop.engine.history import History
from gputop.engine.model import Snapshot
from gputop.ui.widgets.gpu_panel import PANEL_HEIGHT, Density, GpuPanel

MIN_PANEL_WIDTH = {Density.FULL: 48, Density.COMPACT: 100, Density.MINI: 80}
MIN_TABLE_LINES = 9  # header + ~6 process rows + the unattributed-memory line
CHROME_LINES = 2  # the header bar and the footer


@dataclass(frozen=True, slots=True)
class GridLayout:
    """How the panels are arranged for a terminal size."""

    density: Density
    columns: int
    height: int  # lines the grid takes (it scrolls when the panels need more)


def plan_layout(gpu_count: int, width: int, height: int) -> GridLayout:
    """The roomiest density whose grid leaves the process table MIN_TABLE_LINES."""
    n = max(1, gpu_count)
    room = max(1, height - CHROME_LINES - MIN_TABLE_LINES)
    for density in Density:
        columns = max(1, min(n, width // MIN_PANEL_WIDTH[density]))
        needed = math.ceil(n / columns) * PANEL_HEIGHT[density]
        if needed <= room or density is Density.MINI:
            return GridLayout(density=density, columns=columns, height=min(needed, room))
    raise AssertionError("unreachable: MINI always returns")


class GpuGrid(ScrollableContainer, can_focus=False):
    """Holds one GpuPanel per GPU and lays them out for the terminal size."""

    DEFAULT_CSS = "GpuGrid { layout: grid; height: auto; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._term_size = (80, 24)
        self.layout_plan: GridLayout | None = None
        self._panels: dict[int, GpuPanel] = {}  # by GPU index; kept so ticks never query the DOM

    @property
    def panels(self) -> list[GpuPanel]:
        """The panels, in GPU order."""
        return [self._panels[i] for i in sorted(self._panels)]

    def update_snapshot(self, snapshot: Snapshot, history: History) -> None:
        """Give each panel its sample and trend; add or remove panels when GPUs change."""
        panels = self._panels
        wanted = [g.index for g in snapshot.gpus]
        if sorted(panels) != sorted(wanted):
            for index in [i for i in panels if i not in wanted]:
                panels.pop(index).remove()
            new = [GpuPanel(i, id=f"gpu-{i}") for i in wanted if i not in panels]
            if new:
                self.mount_all(new)
                panels.update((p.index, p) for p in new)
            self.relayout(*self._term_size)
        for gpu in snapshot.gpus:
            panels[gpu.index].show(gpu, history)

    def relayout(self, width: int, height: int) -> None:
        """Choose density, columns and height for a terminal of this size."""
        self._term_size = (width, height)
        panels = self.panels
        plan = plan_layout(len(panels), width, height)
        if plan != self.layout_plan:
            self.layout_plan = plan
            self.styles.grid_size_columns = plan.columns
            self.styles.grid_rows = str(PANEL_HEIGHT[plan.density])
            self.styles.height = plan.height
            self.set_class(plan.density.value != "full", "-dense")
        for panel in panels:
            panel.density = plan.density
