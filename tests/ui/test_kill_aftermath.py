"""The kill dialog's aftermath: after a signal, whether the GPU memory came back, in the dialog
and a toast; and no signal offered for an unkillable (state D) process. Real processes are
signalled; the readings after the signal are posted as the sampler would post them."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest
from textual.pilot import Pilot
from textual.widgets import Button

from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcState, Snapshot
from gputop.ui.app import GputopApp
from gputop.ui.bridge import current_user
from gputop.ui.messages import SnapshotReady
from gputop.ui.screens.confirm_kill import ConfirmKill
from tests.fakes import GiB, make_gpu
from tests.ui.data import proc_row, run, snapshot
from tests.ui.test_kill import on_screen, recorder, spawner

# Forks a worker (that ignores TERM, as one outliving its parent would), prints its PID, sleeps.
FORKS = (
    "import os, signal, time\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "    time.sleep(60)\n"
    "    os._exit(0)\n"
    "print(pid, flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def spawn() -> Iterator[Any]:
    """Start real child processes; all are killed and reaped after the test."""
    with spawner() as start:
        yield start


SVG_OUT = os.environ.get("GPUTOP_AFTERMATH_SVG")  # where to save the toast's screenshot, if set


def _row(pid: int, *states: ProcState, mem_gib: float | None = 2.0) -> ProcessRow:
    row = proc_row(
        pid,
        user=current_user(),
        uid=os.geteuid(),
        create_time=psutil.Process(pid).create_time(),
        cmd=("python3", "-c", "work"),
        mem_gib=mem_gib,
        states=states or (ProcState.ACTIVE,),
    )
    return replace(row, device_files=("/dev/nvidia0",))


def _reading(rows: tuple[ProcessRow, ...], listed: dict[int, float], used_gib: float) -> Snapshot:
    """A reading taken now: GPU 0 lists ``listed`` (PID: GiB) and uses ``used_gib``."""
    procs = tuple(
        GpuProcess(pid=p, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=int(g * GiB))
        for p, g in listed.items()
    )
    gpu = make_gpu(0, memory_used_bytes=int(used_gib * GiB), processes=procs)
    return replace(snapshot(rows), gpus=(gpu,), taken_at_mono=time.monotonic())


async def _send(app: GputopApp, pilot: Pilot[Any], follow_s: float) -> ConfirmKill:
    await pilot.press("k")
    dialog = app.screen
    assert isinstance(dialog, ConfirmKill)
    dialog.follow_s = follow_s
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()
    return dialog


async def _until_answered(dialog: ConfirmKill, pilot: Pilot[Any]) -> None:
    deadline = time.monotonic() + 10
    while dialog.aftermath is None and time.monotonic() < deadline:
        await pilot.pause(0.1)
    assert dialog.aftermath is not None


def test_worker_left_holding_the_gpu_is_named(spawn: Any) -> None:
    parent = spawn(FORKS)
    assert parent.stdout is not None
    worker = int(parent.stdout.readline())
    first = _reading((_row(parent.pid),), {parent.pid: 2.0}, used_gib=20.0)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen = recorder(app)
        dialog = await _send(app, pilot, follow_s=1.0)
        assert "following their GPU memory for 1 s…" in on_screen(dialog.query_one("#kill-result"))
        # The driver still lists the exited parent's memory: its worker holds the device.
        holder = _row(worker, ProcState.ORPHAN, ProcState.HOLDER, mem_gib=None)
        after = _reading((holder,), {parent.pid: 2.0}, used_gib=20.0)
        app.post_message(SnapshotReady(replace(after, taken_at_mono=time.monotonic() + 1.5)))
        await _until_answered(dialog, pilot)
        line = (
            f"GPU 0: 2.0 GiB not released after 1 s: still held by PID {worker} (python"
            # the name psutil gives, then who it is:
        )
        assert any(s.startswith(line) for s in seen), seen
        toast = next(s for s in seen if s.startswith(line))
        assert toast.endswith(f", child of {parent.pid}); next: signal {worker} (its row, k)"), (
            toast
        )
        text = on_screen(dialog.query_one("#kill-result"))
        assert f"sent TERM to PID {parent.pid}; it exited" in text
        assert "not released after 1 s" in text and "following" not in text
        await pilot.pause(0.2)  # the toast is drawn
        svg = app.export_screenshot(title="kill aftermath")
        assert "GPU&#160;memory" in svg  # the toast's title, drawn over the dashboard
        assert svg.count("not&#160;released") == 2  # in the toast and in the dialog
        if SVG_OUT:
            Path(SVG_OUT).write_text(svg)

    run(body, first=first, size=(120, 36))


def test_released_memory_is_told_even_after_the_dialog_closed(spawn: Any) -> None:
    proc = spawn()
    first = _reading((_row(proc.pid),), {proc.pid: 2.0}, used_gib=20.0)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen = recorder(app)
        dialog = await _send(app, pilot, follow_s=5.0)
        await pilot.press("escape")  # closed before the memory was seen released
        assert not isinstance(app.screen, ConfirmKill)
        app.post_message(SnapshotReady(_reading((), {}, used_gib=18.0)))
        await _until_answered(dialog, pilot)
        assert "✓ GPU 0: 2.0 GiB released" in seen
        assert proc.wait(timeout=5) is not None

    run(body, first=first)


def test_no_signal_is_offered_for_an_unkillable_process(spawn: Any) -> None:
    proc = spawn()
    stuck = _row(proc.pid, ProcState.UNKILLABLE, ProcState.HOLDER)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        text = " ".join(on_screen(dialog.query_one("#kill-result")).split())  # unwrapped
        assert text.startswith(f"✗ refused: PID {proc.pid} is in uninterruptible sleep (state D)")
        assert "kill cannot help" in text
        assert dialog.query_one("#kill-send", Button).has_class("-hidden")
        assert app.focused is dialog.query_one("#kill-close", Button)
        await pilot.press("enter")  # Close: nothing was sent
        assert app.killer is not None and app.killer.log == ()
        assert proc.poll() is None

    run(body, first=_reading((stuck,), {}, used_gib=20.0))
