"""The process table takes each tick's rows from ``Snapshot.changes`` (gputop.engine.changes):
a change that follows the rows it shows is applied, any other snapshot is taken whole. Pilot."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gputop.engine.changes import RowTracker
from gputop.engine.model import ProcessRow
from gputop.ui import rows as R
from gputop.ui.app import GputopApp
from gputop.ui.messages import SnapshotReady
from tests.ui.data import SAMPLE_ROWS, proc_row, run, snapshot


def _cpu(row: ProcessRow, cpu: float) -> ProcessRow:
    return replace(row, info=replace(row.info, cpu_percent=cpu))


def test_the_table_follows_the_changes_and_takes_all_after_a_missed_one() -> None:
    tracker = RowTracker()
    seq = iter(range(2, 100))
    a, b, c, d = SAMPLE_ROWS
    first = snapshot(SAMPLE_ROWS, changes=tracker.track(SAMPLE_ROWS))

    async def show(app: GputopApp, pilot: Any, rows: tuple[ProcessRow, ...]) -> None:
        app.post_message(SnapshotReady(snapshot(rows, next(seq), changes=tracker.track(rows))))
        await pilot.pause()

    def cpu_of(app: GputopApp) -> dict[int, str]:
        table = app.main_screen.table
        return {
            table.row(k).pid: table.cell_text(k, R.Column.CPU)  # type: ignore[union-attr]
            for k in table.visible_keys()
        }

    async def body(app: GputopApp, pilot: Any) -> None:
        assert cpu_of(app) == {100: "10", 101: "90", 102: "10", 103: "10"}
        # One row changed, the same processes: that cell follows.
        await show(app, pilot, (a, _cpu(b, 55.0), c, d))
        assert cpu_of(app)[101] == "55"
        # A tick the table never sees (PID 100 moves), then one that changes PID 102 only:
        # the change does not follow the rows shown, so every row is taken.
        tracker.track((_cpu(a, 33.0), _cpu(b, 55.0), c, d))
        await show(app, pilot, (_cpu(a, 33.0), _cpu(b, 55.0), _cpu(c, 44.0), d))
        assert cpu_of(app) == {100: "33", 101: "55", 102: "44", 103: "10"}
        # A process goes, another comes: applied as a change.
        new = proc_row(104, user="dave", gpu=1, cpu=7.0)
        await show(app, pilot, (_cpu(a, 33.0), _cpu(b, 55.0), new, d))
        assert cpu_of(app) == {100: "33", 101: "55", 104: "7", 103: "10"}
        table = app.main_screen.table
        assert [r.pid for r in map(table.row, table.visible_keys()) if r] == [103, 100, 101, 104]

    run(body, first=first, size=(120, 30))
