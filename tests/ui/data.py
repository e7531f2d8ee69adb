"""Process rows and snapshots for UI tests, and a small runner for Pilot coroutines."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from typing import Any

from gputop.engine.model import ProcessRow, ProcessType, ProcInfo, ProcState, Snapshot
from gputop.ui.app import GputopApp, make_app
from gputop.ui.messages import SnapshotReady
from tests.fakes import GiB, make_snapshot

BASE_WALL = 1_700_000_000.0


def proc_row(
    pid: int,
    *,
    user: str = "alice",
    gpu: int = 0,
    mem_gib: float | None = 1.0,
    states: tuple[ProcState, ...] = (ProcState.ACTIVE,),
    cmd: tuple[str, ...] = ("python", "train.py"),
    create_time: float | None = None,
    ppid: int = 1,
    cpu: float | None = 10.0,
    uid: int = 1000,
) -> ProcessRow:
    """A GPU process row with a readable identity."""
    return ProcessRow(
        pid=pid,
        info=ProcInfo(
            pid=pid,
            create_time=BASE_WALL - 100 - pid % 50 if create_time is None else create_time,
            user=user,
            uid=uid,
            name=cmd[0] if cmd else "python",
            cmdline=cmd,
            status="running",
            ppid=ppid,
            cpu_percent=cpu,
            host_rss_bytes=2 * GiB,
        ),
        states=states,
        gpu_indices=(gpu,),
        type=ProcessType.COMPUTE,
        used_memory_bytes=None if mem_gib is None else int(mem_gib * GiB),
        peak_memory_bytes=None if mem_gib is None else int(mem_gib * GiB),
        sm_util_percent=50,
    )


def snapshot(rows: tuple[ProcessRow, ...] = (), seq: int = 1, **changes: Any) -> Snapshot:
    """A 2-GPU snapshot (tests/fakes) with these process rows."""
    return replace(make_snapshot(seq), processes=rows, **changes)


SAMPLE_ROWS = (
    proc_row(100, user="alice", gpu=0, mem_gib=30, cmd=("python", "train.py", "--rank", "0")),
    proc_row(101, user="bob", gpu=1, mem_gib=10, cmd=("python", "serve.py"), cpu=90.0),
    proc_row(102, user="alice", gpu=1, mem_gib=2, cmd=("python", "eval.py"), ppid=100),
    proc_row(
        103,
        user="carol",
        gpu=0,
        mem_gib=None,
        states=(ProcState.HOLDER, ProcState.ORPHAN),
        cmd=("python", "loader.py"),
    ),
)


def run(
    body: Callable[[GputopApp, Any], Awaitable[None]],
    *,
    app: GputopApp | None = None,
    size: tuple[int, int] = (80, 24),
    first: Snapshot | None = None,
) -> GputopApp:
    """Run ``body(app, pilot)`` in a headless app that was fed ``first`` (default: SAMPLE_ROWS)."""
    the_app = app or make_app(None, start_sampler=False, clock=lambda: 1001.5)

    async def main() -> None:
        async with the_app.run_test(size=size, notifications=True) as pilot:
            the_app.post_message(SnapshotReady(first or snapshot(SAMPLE_ROWS)))
            await pilot.pause()
            await body(the_app, pilot)

    _run(main())
    return the_app


def _run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


async def proc_reads_shown(app: GputopApp, pilot: Any) -> None:
    """Let the process detail's /proc reads (worker threads) finish and show."""
    await app.workers.wait_for_complete()
    await pilot.pause()


def visible_pids(app: GputopApp) -> list[int]:
    """The PIDs of the table's rows, top to bottom."""
    return [int(k.split(":")[0]) for k in app.main_screen.table.visible_keys()]
