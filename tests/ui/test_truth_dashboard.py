"""The dashboard on issue 14's box (tests/engine/test_truth.py), read from the simulated driver.

A C+G process is one row of type C+G with its memory once and the driver's name for it; the 3 GiB
no process owns is in the footer; the GPU lost before start has a LOST panel.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from gputop.engine.enrich import enrich
from gputop.engine.model import Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.widgets.gpu_panel import GpuPanel
from tests.engine.test_truth import FOREIGN_PID, box
from tests.ui.data import run, visible_pids


def read_box(sim_source: Any) -> Snapshot:
    source, _ = sim_source(box(lost_after_s=0.0))
    return enrich(source.snapshot())


def test_cg_row_lost_panel_and_unowned_memory_on_screen(sim_source: Any) -> None:
    first = read_box(sim_source)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert visible_pids(app) == [FOREIGN_PID]
        header = app.main_screen.table.render_line(0).text
        line = app.main_screen.table.render_line(1).text
        type_at = header.index("TYPE")
        assert line[type_at:].startswith("C+G")
        assert "6.0G" in line and "12.0G" not in line
        assert "blender" in line
        panel = app.query_one("#gpu-1", GpuPanel)
        assert panel.has_class("-lost")
        assert "GPU 1 LOST: GPU is lost" in panel.render().plain
        assert "GPU 0: 3.0G" in app.main_screen._unattributed_body

    run(body, size=(160, 30), first=first)
