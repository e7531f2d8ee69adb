"""The process table pads, cuts and scrolls in terminal cells: a CJK user and a command of
combining marks keep every column where the header says, and every painted row is exactly as
wide as the table, so the terminal never keeps another row's text past a short one.

The rows are real processes (tests/wide.py: a user added for the test), read through the
simulated driver and /proc as the dashboard reads them, and shown with Pilot.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from rich.cells import cell_len, split_text
from textual.geometry import Region
from textual.pilot import Pilot
from textual.strip import Strip

from gputop.engine.enrich import enrich
from gputop.engine.model import Snapshot
from gputop.fleet.client import Answer, Series
from gputop.fleet.model import Fleet, build_fleet
from gputop.ui import rows as R
from gputop.ui.app import GputopApp
from gputop.ui.fleet.app import FleetApp
from gputop.ui.fleet.host_table import HostTable
from gputop.ui.messages import SnapshotReady
from gputop.ui.widgets.gpu_panel import Density, GpuPanel
from gputop.ui.widgets.process_table import ProcessTable
from tests.ui.data import run
from tests.wide import CJK_ARGV0, MARKS_ARGV0, WideBox, wide_box


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WideBox]:
    with wide_box(tmp_path_factory.mktemp("wide")) as started:
        yield started


@pytest.fixture
def first(wide: WideBox, sim_source: Any) -> Snapshot:
    source, _ = sim_source(json.loads(wide.scenario.read_text()))
    return enrich(source.snapshot())


def real_cells(strip: Strip) -> int:
    """What the terminal is sent: the cells of the strip's text (not what it claims)."""
    return sum(cell_len(segment.text) for segment in strip)


def assert_every_row_fills_the_table(table: ProcessTable) -> None:
    width, height = table.region.size
    strips = table.render_lines(Region(0, 0, width, height))
    assert [real_cells(s) for s in strips] == [width] * height


def cells_at(line: str, start: int, width: int) -> str:
    """The text in cells [start, start + width) of ``line``, cut by Rich."""

    def head(text: str, cells: int) -> tuple[str, str]:  # Rich's split fails past the end
        return (text, "") if cell_len(text) <= cells else split_text(text, cells)

    return head(head(line, start)[1], width)[0]


def assert_columns_line_up(table: ProcessTable) -> None:
    """Each row's cell starts (left-aligned) or ends (right-aligned) where its header does."""
    header = table.render_line(0).text
    for y, key in enumerate(table.visible_keys(), start=1):
        line = table.render_line(y).text
        for column in table.columns:
            text = table.cell_text(key, column)
            label = table.header_label(column)
            start = cell_len(header[: header.index(label)])
            if column in R.NUMERIC:
                start += cell_len(label) - cell_len(text)
            if column is R.Column.COMMAND:
                text = cells_at(text, 0, 20)  # the start of it: the table's edge cuts the rest
            assert cells_at(line, start, cell_len(text)) == text, (column, line)


def test_wide_names_keep_the_columns_and_fill_each_row(wide: WideBox, first: Snapshot) -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        keys = {table.row(k).pid: k for k in table.visible_keys()}  # type: ignore[union-attr]
        assert table.cell_text(keys[wide.cjk], R.Column.USER) == "用户名…"  # 7 of 8 cells
        assert table.cell_text(keys[wide.cjk], R.Column.COMMAND).startswith(CJK_ARGV0)
        assert table.cell_text(keys[wide.marks], R.Column.COMMAND).startswith(MARKS_ARGV0)
        assert table.cell_text(keys[wide.zw], R.Column.COMMAND).startswith("s\\u200bsh ")
        assert_columns_line_up(table)
        assert_every_row_fills_the_table(table)

        # The rows change places (the CJK row's line gets the marks row, and back): every
        # line repainted is the table's width, so none keeps a cell of what stood there.
        for seq, grown, other in ((2, wide.marks, wide.cjk), (3, wide.cjk, wide.marks)):
            rows = tuple(
                replace(r, used_memory_bytes=80 * 1024**3) if r.pid == grown else r
                for r in first.processes
            )
            app.post_message(SnapshotReady(replace(first, seq=seq, processes=rows)))
            await pilot.pause()
            pids = [table.row(k).pid for k in table.visible_keys()]  # type: ignore[union-attr]
            assert pids.index(grown) < pids.index(other)
            assert_columns_line_up(table)
            assert_every_row_fills_the_table(table)

        # The GPU panels' one-line summary: the CJK-named GPU's bars start where the other's do.
        summaries = []
        for panel in app.query(GpuPanel):
            panel.density = Density.MINI
            summaries.append(panel.content_lines(120)[0].plain)
        assert any("计算卡" in line for line in summaries), summaries
        assert len({cell_len(line[: line.index("UTIL")]) for line in summaries}) == 1, summaries

        # Scrolled sideways a cell at a time, a wide character cut by the edge is a blank.
        for x in range(12):
            table.scroll_to(x=x, animate=False)
            await pilot.pause()
            assert int(table.scroll_x) == x
            assert_every_row_fills_the_table(table)

    run(body, size=(160, 30), first=first)


# -- the fleet overview's host table ----------------------------------------------------------
FLEET_HOSTS = ("gpu-node-01", "計算ノード二号", "n3")


def cjk_fleet() -> Fleet:
    """Three hosts, one named in CJK, a GPU each (as Prometheus would answer for them)."""
    answers: dict[str, list[Series]] = {}
    for n, host in enumerate(FLEET_HOSTS):
        labels = {"job": "gpus", "instance": f"{host}:9400", "Hostname": host, "gpu": "0"}
        labels["UUID"] = f"GPU-{n}"
        for key, value in (("util", 50.0 + n), ("temp", 40.0), ("used", 1000.0), ("free", 1000.0)):
            answers.setdefault(key, []).append(Series(labels=labels, value=value))
        answers.setdefault("up", []).append(
            Series(labels={"job": "gpus", "instance": f"{host}:9400"}, value=1)
        )
    now = time.time()
    return build_fleet(
        {k: Answer(at=now, series=tuple(v)) for k, v in answers.items()}, prometheus="http://p"
    )


def assert_host_columns_line_up(table: HostTable) -> None:
    header = table.render_line(0).text
    for y, name in enumerate(table.row_names, start=1):
        line = table.render_line(y).text
        for column, label in zip(table.columns, table.labels, strict=True):
            text = table.cell(name, column)
            start = cell_len(header[: header.index(label)])
            if column in table.right:
                start += cell_len(label) - cell_len(text)
            assert cells_at(line, start, cell_len(text)) == text, (column, line)


def test_fleet_host_table_keeps_columns_under_a_cjk_host_name() -> None:
    fleet = cjk_fleet()
    app = FleetApp(lambda: fleet, interval_s=60, source="http://p")

    async def main() -> None:
        async with app.run_test(size=(200, 20)) as pilot:
            table = app.screen.query_one("#fleet-hosts", HostTable)
            for _ in range(100):
                if len(table.row_names) == len(FLEET_HOSTS):
                    break
                await pilot.pause(0.05)
            assert sorted(table.row_names) == sorted(FLEET_HOSTS)
            assert_host_columns_line_up(table)
            await pilot.resize_terminal(60, 20)  # narrower than the rows: they scroll sideways
            await pilot.pause()
            width, height = table.region.size
            for x in range(4):
                table.scroll_to(x=x, animate=False)
                await pilot.pause()
                assert int(table.scroll_x) == x
                strips = table.render_lines(Region(0, 0, width, height))
                assert [real_cells(s) for s in strips] == [width] * height
            app.poller.stop()

    asyncio.run(main())
