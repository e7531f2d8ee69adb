"""The process detail reads /proc on worker threads, one read at a time, and shows the result."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.engine import proc_lookup
from gputop.engine.model import Container, ProcInfo
from gputop.ui.app import GputopApp
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens import process_detail
from gputop.ui.screens.process_detail import ProcessDetailScreen
from tests.ui.data import SAMPLE_ROWS, proc_reads_shown, run, snapshot


def info_text(app: GputopApp) -> str:
    return str(app.screen.query_one("#proc-info").render())


def test_proc_reads_happen_off_the_ui_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    readers: dict[str, list[threading.Thread]] = {}

    def spy(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            readers.setdefault(name, []).append(threading.current_thread())
            return real(*args, **kwargs)

        return call

    child = ProcInfo(pid=4321, user="zed", cmdline=("python", "child.py"))
    monkeypatch.setattr(proc_lookup, "parent_chain", spy("parent_chain", proc_lookup.parent_chain))
    monkeypatch.setattr(proc_lookup, "children", spy("children", lambda pid: [child]))
    monkeypatch.setattr(proc_lookup, "environment", spy("environment", proc_lookup.environment))
    monkeypatch.setattr(process_detail, "held_by", spy("held_by", process_detail.held_by))
    ui_threads: list[threading.Thread] = []

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        ui_threads.append(threading.current_thread())
        await pilot.press("down", "enter")  # 100, past the stuck holder 103
        assert isinstance(app.screen, ProcessDetailScreen)
        await proc_reads_shown(app, pilot)
        assert "4321  zed        python child.py" in info_text(app)  # the worker's reading
        app.post_message(SnapshotReady(snapshot(SAMPLE_ROWS, seq=2)))  # every tick reads again
        await pilot.pause()
        await proc_reads_shown(app, pilot)
        await pilot.press("e")
        await proc_reads_shown(app, pilot)
        assert "Environment of PID 100" in info_text(app)

    run(body)
    assert sorted(readers) == ["children", "environment", "held_by", "parent_chain"]
    assert len(readers["children"]) == 2
    threads = [t for called in readers.values() for t in called]
    assert ui_threads == [threading.main_thread()]
    assert all(t is not threading.main_thread() for t in threads)


def test_one_read_at_a_time_then_one_more_for_the_newest_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = threading.Event()
    reads: list[int] = []

    def slow_children(pid: int) -> list[ProcInfo]:
        reads.append(pid)
        gate.wait(10)  # a /proc read blocked on a stuck process
        return []

    monkeypatch.setattr(proc_lookup, "children", slow_children)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "enter")  # 100, past the stuck holder 103
        await pilot.pause()
        for seq in (2, 3, 4):  # ticks while the first read hangs
            row = replace(SAMPLE_ROWS[0], info=replace(SAMPLE_ROWS[0].info, user=f"user{seq}"))
            app.post_message(SnapshotReady(snapshot((row, *SAMPLE_ROWS[1:]), seq=seq)))
            await pilot.pause()
        assert "PID 100" in str(app.screen.query_one("#proc-title").render())  # UI not blocked
        assert reads == [100]  # no new thread while the first read is under way
        gate.set()
        await proc_reads_shown(
            app, pilot
        )  # the first read ends; one more starts, for the newest row
        await proc_reads_shown(app, pilot)
        assert reads == [100, 100]
        assert "user4 (uid" in info_text(app)

    run(body)


def test_the_detail_names_the_container_and_pod() -> None:
    box = Container(
        "containerd", "ab" * 32, name="worker", pod="train-0", namespace="ml", pod_uid="u-1"
    )
    in_pod = replace(SAMPLE_ROWS[1], info=replace(SAMPLE_ROWS[1].info, container=box))
    rows = (SAMPLE_ROWS[0], in_pod, *SAMPLE_ROWS[2:])

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "down", "enter")  # 101: past the stuck 103 and 100
        assert isinstance(app.screen, ProcessDetailScreen) and app.screen.row.pid == 101
        await proc_reads_shown(app, pilot)
        assert "container     containerd worker (abababababab)  pod ml/train-0" in info_text(app)
        await pilot.press("escape", "up", "enter")  # 100 runs on the host
        await proc_reads_shown(app, pilot)
        assert "container     none" in info_text(app)

    run(body, first=snapshot(rows), size=(120, 40))


def test_children_with_a_wide_user_name_keep_their_commands_in_one_column(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CJK user name takes two cells a character: the commands still start in one column."""
    from rich.cells import cell_len

    kids = [
        ProcInfo(pid=4321, user="用户", cmdline=("python", "a.py")),  # 2 characters, 4 cells
        ProcInfo(pid=4322, user="zed", cmdline=("python", "b.py")),
    ]
    monkeypatch.setattr(proc_lookup, "children", lambda pid: kids)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("down", "enter")
        await proc_reads_shown(app, pilot)
        lines = [line for line in info_text(app).splitlines() if "python " in line]
        starts = {cell_len(line[: line.index("python ")]) for line in lines}
        assert len(lines) == 2 and len(starts) == 1, lines

    run(body)
