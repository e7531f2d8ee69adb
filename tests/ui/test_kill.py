"""Signals through the dashboard: real spawned processes, a refusal, tags, and --readonly."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, Checkbox

from gputop.engine.model import ProcessRow, ProcState
from gputop.ui.app import GputopApp, make_app
from gputop.ui.bridge import current_user
from gputop.ui.keys import action_name
from gputop.ui.screens.confirm_kill import ConfirmKill
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.process_detail import ProcessDetailScreen
from tests.ui.data import proc_reads_shown, proc_row, run, snapshot

SLEEP = "import time; time.sleep(60)"
IGNORE_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


@contextlib.contextmanager
def spawner() -> Iterator[Any]:
    """Start real child processes (``start(code, env=...)``); all are killed and reaped after."""
    procs: list[subprocess.Popen[str]] = []

    def start(code: str = SLEEP, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-S", "-c", code], stdout=subprocess.PIPE, text=True, env=env
        )
        procs.append(proc)
        if "ready" in code:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        return proc

    try:
        yield start
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def spawn() -> Iterator[Any]:
    """Start real child processes; all are killed and reaped after the test."""
    with spawner() as start:
        yield start


def row_for(
    proc: subprocess.Popen[str], *, create_time_shift: float = 0.0, gpu: int = 0
) -> ProcessRow:
    """A GPU process row for a real child, with its real (or a shifted) start time."""
    created = psutil.Process(proc.pid).create_time() + create_time_shift
    return proc_row(
        proc.pid,
        user=current_user(),
        uid=os.geteuid(),
        gpu=gpu,
        create_time=created,
        cmd=(sys.executable, "-c", "sleep"),
    )


def recorder(app: GputopApp) -> list[str]:
    """Collect every notification's text."""
    seen: list[str] = []
    original = app.notify

    def notify(message: str, **kwargs: Any) -> None:
        seen.append(message)
        original(message, **kwargs)

    app.notify = notify  # type: ignore[method-assign]
    return seen


def ended(proc: subprocess.Popen[str]) -> bool:
    """True once the child has exited (the Killer may have reaped it already)."""
    proc.wait(timeout=5)
    return not psutil.pid_exists(proc.pid)


def on_screen(widget: Widget) -> str:
    """The text a widget shows, line by line."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


async def wait_kill(app: GputopApp, pilot: Pilot[Any]) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()


def test_kill_a_real_process_through_the_dialog(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen = recorder(app)
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        assert str(proc.pid) in on_screen(dialog.query_one("#kill-target-rows"))
        assert app.focused is dialog.query_one("#kill-send", Button)
        assert dialog.chosen_signal.value == "TERM" and "Send TERM" in on_screen(app.focused)
        await pilot.press("enter")  # "Send" has the focus; TERM is the default
        await wait_kill(app, pilot)
        assert ended(proc)
        result = str(dialog.query_one("#kill-result").render())
        assert f"sent TERM to PID {proc.pid}; it exited" in result
        assert any("it exited" in s for s in seen)
        assert dialog.query_one("#kill-escalate", Button).has_class("-hidden")
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]
        assert app.killer is not None
        entry = app.killer.log[-1]
        assert (entry.pid, entry.signal.value, entry.result) == (proc.pid, "TERM", "exited")

    run(body, first=snapshot((row_for(proc),)))


def test_term_ignored_offers_kill(spawn: Any) -> None:
    proc = spawn(IGNORE_TERM)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        dialog.grace_s = 0.3  # keep the test quick; the real dialog waits GRACE_S
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert proc.poll() is None
        assert "still running" in str(dialog.query_one("#kill-result").render())
        escalate = dialog.query_one("#kill-escalate", Button)
        assert not escalate.has_class("-hidden") and app.focused is escalate
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert ended(proc)
        assert app.killer is not None and app.killer.log[-1].signal.value == "KILL"

    run(body, first=snapshot((row_for(proc),)))


def test_tagged_processes_get_one_signal_each(spawn: Any) -> None:
    a, b, spare = spawn(), spawn(), spawn()
    rows = (row_for(a), row_for(b, gpu=1), row_for(spare))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        keys = app.main_screen.table.visible_keys()
        tagged = [k for k in keys if int(k.split(":")[0]) in (a.pid, b.pid)]
        for key in tagged:
            app.main_screen.table.move_cursor(row=app.main_screen.table.get_row_index(key))
            await pilot.press("space")
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        assert sorted(r.pid for r in dialog.rows) == sorted([a.pid, b.pid])
        await pilot.click("#sig-INT")
        await pilot.click("#kill-send")
        await wait_kill(app, pilot)
        assert ended(a) and ended(b)
        assert spare.poll() is None
        assert app.killer is not None
        assert {(e.pid, e.signal.value) for e in app.killer.log} == {(a.pid, "INT"), (b.pid, "INT")}
        await pilot.press("escape")
        assert app.main_screen.table.tags == set()

    run(body, first=snapshot(rows), size=(200, 60))


def test_reused_pid_is_refused_with_a_clear_notification(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen = recorder(app)
        await pilot.press("k", "enter")
        await wait_kill(app, pilot)
        assert proc.poll() is None
        assert any("is now a different process" in s for s in seen)
        assert "refused" in str(app.screen.query_one("#kill-result").render())

    run(body, first=snapshot((row_for(proc, create_time_shift=-1000.0),)))


def test_kill_from_the_process_detail_screen_with_children_option(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessDetailScreen)
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        dialog.query_one("#kill-children", Checkbox).value = True
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert ended(proc)

    run(body, first=snapshot((row_for(proc),)))


def test_readonly_has_no_signal_path(spawn: Any) -> None:
    proc = spawn()
    app = make_app(None, readonly=True, start_sampler=False, clock=lambda: 1001.5)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        assert app.killer is None
        assert "READONLY" in app.query_one("#header").render().plain  # type: ignore[attr-defined]
        await pilot.press("k", "f9", "T", "K", "I")
        assert len(app.screen_stack) == 1
        assert app.screen.check_action("kill", ()) is False
        assert app.screen.check_action("kill", ("KILL",)) is False
        active = [b.binding for b in app.active_bindings.values() if b.enabled]
        assert not [b for b in active if action_name(b.action) == "kill"]
        app.main_screen.kill_rows([row_for(proc)])  # even a direct call opens nothing
        await pilot.pause()
        assert len(app.screen_stack) == 1
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessDetailScreen)
        await pilot.press("k", "f9", "K")
        assert isinstance(app.screen, ProcessDetailScreen)
        await proc_reads_shown(app, pilot)
        assert "signals are disabled" in str(app.screen.query_one("#proc-info").render())
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert not {"k", "k F9", "T K I"} & set(dict(app.screen.rows))
        assert proc.poll() is None

    run(body, app=app, first=snapshot((row_for(proc),)))


ZOMBIE_PARENT = """
import os, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(60)
"""


def test_defunct_process_is_refused_and_its_parent_offered(spawn: Any) -> None:
    parent = spawn(ZOMBIE_PARENT)
    assert parent.stdout is not None
    zombie_pid = int(parent.stdout.readline())
    for _ in range(100):  # the child exits at once; wait until it is a zombie
        if psutil.Process(zombie_pid).status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.01)
    zombie = proc_row(
        zombie_pid,
        user=current_user(),
        uid=os.geteuid(),
        create_time=psutil.Process(zombie_pid).create_time(),
        states=(ProcState.DEFUNCT, ProcState.ACTIVE),
    )

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        seen = recorder(app)
        await pilot.press("k", "enter")
        await wait_kill(app, pilot)
        assert any(f"PID {zombie_pid} is defunct" in s for s in seen)
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        offer = dialog.query_one("#kill-parent", Button)
        assert not offer.has_class("-hidden") and app.focused is offer
        assert str(parent.pid) in str(offer.label)
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert ended(parent)
        assert any(f"sent TERM to PID {parent.pid}" in s for s in seen)

    run(body, first=snapshot((zombie,)))
