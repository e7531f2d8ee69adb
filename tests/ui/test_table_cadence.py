"""The process table draws its rows' numbers at most every ``table_refresh_s`` (issue 42), and a
process that comes or goes, a row's state, or the user's own act at once. Pilot, snapshots a
second apart (as the sampler's at a 1 s interval), each with its ``changes`` as the enricher's."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gputop.engine.changes import RowTracker
from gputop.engine.model import ProcessRow, ProcState
from gputop.ui import rows as R
from gputop.ui.app import GputopApp, make_app
from gputop.ui.messages import SnapshotReady
from gputop.ui.widgets import process_table
from tests.ui.conftest import PRODUCT_TABLE_REFRESH_S
from tests.ui.data import SAMPLE_ROWS, proc_row, run, snapshot


def _cpu(row: ProcessRow, cpu: float) -> ProcessRow:
    return replace(row, info=replace(row.info, cpu_percent=cpu))


class _Feed:
    """Posts the rows as the sampler would: snapshot ``seq`` taken at 1000 + seq s."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.tracker = RowTracker()
        self.seq = 1
        self.interval_s = interval_s
        self.first = self.snapshot(SAMPLE_ROWS)

    def snapshot(self, rows: tuple[ProcessRow, ...]) -> Any:
        snap = snapshot(rows, self.seq, changes=self.tracker.track(rows))
        return replace(snap, taken_at_mono=1000.0 + self.seq * self.interval_s)

    async def post(self, app: GputopApp, pilot: Any, rows: tuple[ProcessRow, ...]) -> None:
        self.seq += 1
        app.post_message(SnapshotReady(self.snapshot(rows)))
        await pilot.pause()


def _app(table_refresh_s: float | None = PRODUCT_TABLE_REFRESH_S) -> GputopApp:
    return make_app(
        None, start_sampler=False, clock=lambda: 1001.5, table_refresh_s=table_refresh_s
    )


def _cpu_shown(app: GputopApp, pid: int) -> str:
    table = app.main_screen.table
    key = next(k for k in table.visible_keys() if k.startswith(f"{pid}:"))
    return table.cell_text(key, R.Column.CPU)


def test_the_product_draws_the_numbers_every_two_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PRODUCT_TABLE_REFRESH_S == 2.0
    monkeypatch.setattr(process_table, "TABLE_REFRESH_S", PRODUCT_TABLE_REFRESH_S)  # unpinned
    assert _app(None).main_screen.table.table_refresh_s == 2.0
    assert _app(5.0).main_screen.table.table_refresh_s == 5.0  # the CLI's --table-refresh


def test_numbers_change_at_most_every_two_seconds_at_a_one_second_interval() -> None:
    feed = _Feed()
    a, b, c, d = SAMPLE_ROWS
    shown: list[str] = []

    async def body(app: GputopApp, pilot: Any) -> None:
        table = app.main_screen.table
        for cpu in (11.0, 12.0, 13.0, 14.0, 15.0):
            await feed.post(app, pilot, (_cpu(a, cpu), b, c, d))
            shown.append(_cpu_shown(app, 100))
        # The newest rows are taken at once all the same: a kill or the detail reads them.
        assert table.row(R.row_key(a)).info.cpu_percent == 15.0  # type: ignore[union-attr]

    run(body, app=_app(), first=feed.first, size=(120, 30))
    # Readings at 1 s (drawn first), 2 s, 3 s, 4 s, 5 s, 6 s: drawn at 1, 3, 5 s.
    assert shown == ["10", "12", "12", "14", "14"]


def test_a_tick_whose_numbers_wait_repaints_no_row() -> None:
    feed = _Feed()
    a, b, c, d = SAMPLE_ROWS

    async def body(app: GputopApp, pilot: Any) -> None:
        table = app.main_screen.table
        repainted: list[list[int]] = []
        original = table.refresh_rows

        def spy(rows: Any) -> None:
            rows = list(rows)
            repainted.append(rows)
            original(rows)

        table.refresh_rows = spy  # type: ignore[method-assign]
        await feed.post(app, pilot, (_cpu(a, 11.0), _cpu(b, 91.0), c, d))
        assert repainted in ([], [[]])  # nothing drawn: the numbers wait
        await feed.post(app, pilot, (_cpu(a, 12.0), _cpu(b, 92.0), c, d))
        assert [rows for rows in repainted if rows] == [[2, 3]]  # 100 and 101, once

    run(body, app=_app(), first=feed.first, size=(120, 30))


def test_a_new_process_and_a_gone_one_are_drawn_at_once_with_the_newest_numbers() -> None:
    feed = _Feed()
    a, b, c, d = SAMPLE_ROWS
    new = proc_row(104, user="dave", gpu=1, cpu=7.0)

    async def body(app: GputopApp, pilot: Any) -> None:
        table = app.main_screen.table
        await feed.post(app, pilot, (_cpu(a, 11.0), b, c, d))
        assert _cpu_shown(app, 100) == "10"
        await feed.post(app, pilot, (_cpu(a, 12.0), b, c, d, new))  # 1 s after the last drawn
        assert 104 in {table.row(k).pid for k in table.visible_keys()}  # type: ignore[union-attr]
        assert _cpu_shown(app, 104) == "7"
        assert _cpu_shown(app, 100) == "12"  # what waited is drawn with it
        await feed.post(app, pilot, (_cpu(a, 13.0), b, d, new))  # 102 ends
        assert 102 not in {table.row(k).pid for k in table.visible_keys()}  # type: ignore[union-attr]

    run(body, app=_app(), first=feed.first, size=(120, 30))


def test_a_state_change_is_drawn_at_once() -> None:
    feed = _Feed()
    a, b, c, d = SAMPLE_ROWS

    async def body(app: GputopApp, pilot: Any) -> None:
        table = app.main_screen.table
        key = R.row_key(b)
        await feed.post(app, pilot, (a, _cpu(b, 50.0), c, d))
        await feed.post(app, pilot, (a, _cpu(b, 51.0), c, d))  # drawn: 2 s after the first
        assert table.cell_text(key, R.Column.CPU) == "51"
        assert table.cell_text(key, R.Column.STATE) == "active"
        stopped = replace(_cpu(b, 0.0), states=(ProcState.STOPPED,))
        await feed.post(app, pilot, (a, stopped, c, d))  # 1 s after that drawing
        assert table.cell_text(key, R.Column.STATE) == ProcState.STOPPED.value
        assert table.cell_text(key, R.Column.CPU) == "0"
        assert table.stuck_count == 2  # 103 (a holder) and 101 now

    run(body, app=_app(), first=feed.first, size=(120, 30))


def test_the_users_act_draws_the_numbers_that_wait() -> None:
    feed = _Feed()
    a, b, c, d = SAMPLE_ROWS

    async def body(app: GputopApp, pilot: Any) -> None:
        table = app.main_screen.table
        await feed.post(app, pilot, (_cpu(a, 11.0), b, c, d))
        assert _cpu_shown(app, 100) == "10"
        await pilot.press("down")  # the cursor moves: what the user looks at is the newest
        assert _cpu_shown(app, 100) == "11"
        await feed.post(app, pilot, (_cpu(a, 12.0), b, c, d))
        assert _cpu_shown(app, 100) == "11"  # 1 s after that drawing: waits again
        await pilot.press("s")  # a sort
        assert _cpu_shown(app, 100) == "12"
        await feed.post(app, pilot, (_cpu(a, 13.0), b, c, d))
        table.update_snapshot(app.main_screen.snapshot, now=True)  # type: ignore[arg-type]
        assert _cpu_shown(app, 100) == "13"  # a kill's follow-up

    run(body, app=_app(), first=feed.first, size=(120, 30))


def test_every_snapshot_is_drawn_when_the_interval_is_as_long() -> None:
    feed = _Feed(interval_s=2.0)
    a, b, c, d = SAMPLE_ROWS
    shown: list[str] = []

    async def body(app: GputopApp, pilot: Any) -> None:
        for cpu in (11.0, 12.0, 13.0):
            await feed.post(app, pilot, (_cpu(a, cpu), b, c, d))
            shown.append(_cpu_shown(app, 100))

    run(body, app=_app(), first=feed.first, size=(120, 30))
    assert shown == ["11", "12", "13"]


def test_snapshots_without_changes_wait_too_and_a_reading_a_little_early_is_on_time() -> None:
    # Taken whole (no Snapshot.changes: frames, a skipped tick), yet the same processes.
    a, b, c, d = SAMPLE_ROWS
    shown: list[str] = []

    async def body(app: GputopApp, pilot: Any) -> None:
        for taken_at_mono, cpu in ((1002.0, 11.0), (1002.95, 12.0), (1003.5, 13.0)):
            snap = replace(snapshot((_cpu(a, cpu), b, c, d)), taken_at_mono=taken_at_mono)
            app.post_message(SnapshotReady(snap))
            await pilot.pause()
            shown.append(_cpu_shown(app, 100))

    run(
        body, app=_app(), first=replace(snapshot(SAMPLE_ROWS), taken_at_mono=1001.0), size=(120, 30)
    )
    # 1 s after the drawing: waits; 1.95 s: drawn (readings jitter); 0.55 s after that: waits.
    assert shown == ["10", "12", "12"]
