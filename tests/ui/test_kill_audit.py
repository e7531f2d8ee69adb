"""The kill dialog records what it showed; a planted --audit-log stops the dashboard at start."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.ui.app import GputopApp, make_app
from gputop.ui.screens.confirm_kill import ConfirmKill
from tests.planted import VICTIM_TEXT, as_user, nobody, their_folder, unchanged, victim_file
from tests.pty_terminal import on_terminal
from tests.ui.data import run, snapshot
from tests.ui.test_kill import ended, row_for, spawner, wait_kill


@pytest.fixture
def spawn() -> Iterator[Any]:
    with spawner() as start:
        yield start


def test_the_dialog_passes_the_command_it_showed(spawn: Any, tmp_path: Path) -> None:
    proc = spawn()
    row = row_for(proc)  # shows "python -c sleep"; the process runs "-S -c import time; ..."
    log = tmp_path / "audit.jsonl"

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        assert isinstance(app.screen, ConfirmKill)
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert ended(proc)

    run(body, app=make_app(None, start_sampler=False, audit_log=log), first=snapshot((row,)))
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["result"] for r in records] == ["sending", "exited"]
    for record in records:
        assert record["command_shown"] == row.info.command
        assert "time.sleep(60)" in record["command"]


def test_a_symlinked_audit_log_is_one_line_and_exit_2() -> None:
    with their_folder() as folder:
        victim = victim_file(folder)
        before = victim.stat()
        path = folder / "g.jsonl"
        as_user(nobody(), lambda: os.symlink(victim, path))
        with on_terminal("--demo", "--audit-log", str(path)) as term:
            assert term.read_to_end() == 2
        text = bytes(term.output).decode("utf-8", "replace")
        lines = [line for line in text.replace("\r", "").splitlines() if line.strip()]
        assert lines == [f"gputop: cannot write audit log {path}: is a symbolic link"]
        assert unchanged(victim, before) and victim.read_text() == VICTIM_TEXT
