"""The keys a person brings from htop, nvtop and nvitop: Tab, the signal keys, quitting, help.

Signals go to real spawned processes, through the dialog's confirmation (tests/ui/test_kill.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from textual.binding import Binding
from textual.pilot import Pilot
from textual.widgets import Button, Checkbox, Footer, RadioSet

from gputop.ui.app import GputopApp, make_app
from gputop.ui.screens.confirm_kill import GRACE_S, ConfirmKill
from gputop.ui.screens.gpu_detail import GpuDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.main import MainScreen
from gputop.ui.screens.process_detail import ProcessDetailScreen
from gputop.ui.widgets.gpu_panel import GpuPanel
from gputop.ui.widgets.process_table import ProcessTable
from tests.fakes import make_gpu
from tests.ui.data import SAMPLE_ROWS, proc_reads_shown, run, snapshot
from tests.ui.test_kill import IGNORE_TERM, ended, on_screen, row_for, spawner, wait_kill


@pytest.fixture
def spawn() -> Iterator[Any]:
    with spawner() as start:
        yield start


def focused_gpu(app: GputopApp) -> int | None:
    focused = app.focused
    return focused.index if isinstance(focused, GpuPanel) else None


def test_one_tab_between_the_regions_and_arrows_within_the_gpu_panels() -> None:
    eight = replace(snapshot(SAMPLE_ROWS), gpus=tuple(make_gpu(i) for i in range(8)))

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        table = app.main_screen.table
        plan = app.main_screen.grid.layout_plan
        assert plan is not None
        c = plan.columns  # the panels in reading order, c to a row
        assert 2 <= c < 8
        assert app.focused is table
        await pilot.press("tab")  # one Tab, whatever the number of GPUs
        assert focused_gpu(app) == 0
        await pilot.press("right")
        assert focused_gpu(app) == 1
        await pilot.press("down")
        assert focused_gpu(app) == 1 + c
        await pilot.press("up", "up")  # no row above: it stays
        assert focused_gpu(app) == 1
        await pilot.press("left", "left")  # the first stays the first
        assert focused_gpu(app) == 0
        await pilot.press(*["right"] * c)  # past the row's end: on to the next row
        assert focused_gpu(app) == c
        last_row = c + (7 - c) // c * c
        await pilot.press(*["down"] * 8)  # no row below the last: it stays
        assert focused_gpu(app) == last_row
        await pilot.press("tab")
        assert app.focused is table
        await pilot.press("home", "down")  # the arrows are the table's again
        assert app.focused is table and table.cursor == 1
        await pilot.press("tab")  # back to the panel focused last
        assert focused_gpu(app) == last_row
        await pilot.press("shift+tab")
        assert app.focused is table
        await pilot.press("shift+tab")
        assert focused_gpu(app) == last_row
        await pilot.press("enter")
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.gpu_index == last_row

    run(body, first=eight, size=(200, 60))


def test_one_column_of_panels_up_and_down_and_the_filter_keeps_its_arrows() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("tab", "down")
        assert focused_gpu(app) == 1
        await pilot.press("up", "up")
        assert focused_gpu(app) == 0
        await pilot.press("slash", *"py", "left", "backspace")  # the filter box's own arrows
        assert app.main_screen.filter_box.value == "y"
        assert focused_gpu(app) is None
        await pilot.press("tab")  # from the filter box: to the processes
        assert app.focused is app.main_screen.table

    run(body)  # 80x24: one panel per row


@pytest.mark.parametrize(("key", "signal"), [("T", "TERM"), ("K", "KILL"), ("I", "INT")])
def test_shift_letter_opens_the_dialog_on_its_signal_and_enter_sends_it(
    spawn: Any, key: str, signal: str
) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press(key)
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        assert dialog.chosen_signal.value == signal
        radio = dialog.query_one("#kill-signal", RadioSet).pressed_button
        assert radio is not None and radio.id == f"sig-{signal}"
        assert app.focused is dialog.query_one("#kill-send", Button)
        assert f"Send {signal}" in on_screen(dialog.query_one("#kill-send"))
        await pilot.pause(0.2)
        assert proc.poll() is None  # nothing is sent before the confirmation
        await pilot.press("enter")
        await wait_kill(app, pilot)
        assert ended(proc)
        assert app.killer is not None
        assert [(e.pid, e.signal.value) for e in app.killer.log][-1] == (proc.pid, signal)

    run(body, first=snapshot((row_for(proc),)))


def test_f9_opens_the_dialog_like_k_and_escape_sends_nothing(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("f9")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill) and dialog.chosen_signal.value == "TERM"
        assert [r.pid for r in dialog.rows] == [proc.pid]
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)
        assert proc.poll() is None and app.killer is not None and not app.killer.log

    run(body, first=snapshot((row_for(proc),)))


def test_k_then_k_then_enter_sends_kill(spawn: Any) -> None:
    """The dialog's k chooses KILL, wherever the focus is: Enter then sends KILL, not TERM."""
    proc = spawn(IGNORE_TERM)  # TERM would leave it running

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        await pilot.press("tab")  # off the Send button
        assert app.focused is not dialog.query_one("#kill-send", Button)
        await pilot.press("k", "enter")
        await wait_kill(app, pilot)
        assert app.killer is not None
        assert [e.signal.value for e in app.killer.log if e.pid == proc.pid][-1] == "KILL"
        assert ended(proc)
        assert "sent KILL" in on_screen(dialog.query_one("#kill-result"))

    run(body, first=snapshot((row_for(proc),)))


def test_dialog_hotkeys_and_arrows_choose_the_signal(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill)
        radios = dialog.query_one("#kill-signal", RadioSet)
        send = dialog.query_one("#kill-send", Button)

        def chosen() -> str:
            pressed = radios.pressed_button
            assert pressed is not None and pressed.id is not None
            assert f"Send {dialog.chosen_signal}" in on_screen(send)
            return f"{dialog.chosen_signal}/{pressed.id.removeprefix('sig-')}"

        assert chosen() == "TERM/TERM"
        for key, expected in [
            ("down", "KILL"),
            ("down", "INT"),
            ("down", "INT"),  # the last one stays
            ("up", "KILL"),
            ("i", "INT"),
            ("t", "TERM"),
            ("K", "KILL"),
            ("up", "TERM"),
            ("up", "TERM"),
        ]:
            await pilot.press(key)
            assert chosen() == f"{expected}/{expected}", key
        dialog.action_choose("KILL")  # two keys faster than the radio buttons' messages:
        dialog.action_choose("INT")  # the later one wins
        await pilot.pause()
        assert chosen() == "INT/INT"
        await pilot.click("#sig-KILL")  # and a click chooses too
        assert chosen() == "KILL/KILL"
        await pilot.press("t")
        await pilot.press("c")
        assert dialog.query_one("#kill-children", Checkbox).value
        await pilot.press("c")
        assert not dialog.query_one("#kill-children", Checkbox).value
        assert proc.poll() is None
        await pilot.press("i", "enter")
        await wait_kill(app, pilot)
        assert ended(proc)
        await pilot.press("k")  # once sent, the choice stays what was sent
        assert chosen() == "INT/INT"

    run(body, first=snapshot((row_for(proc),)))


def test_dialog_states_the_real_wait() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("k")
        hint = on_screen(app.screen.query_one("#kill-hint"))
        assert f"waits {GRACE_S:g} s" in hint
        assert isinstance(app.screen, ConfirmKill) and app.screen.grace_s == GRACE_S

    run(body)


def test_dialog_shows_the_whole_command_wrapped_at_80_columns() -> None:
    def worker(rank: int) -> Any:
        return replace(
            SAMPLE_ROWS[0],
            pid=4240 + rank,
            info=replace(
                SAMPLE_ROWS[0].info,
                pid=4240 + rank,
                cmdline=(
                    "python",
                    "-m",
                    "torch.distributed.run",
                    "--nproc-per-node=8",
                    "train.py",
                    "--config",
                    "/data/experiments/llama-70b/config.yaml",
                    f"--lr=3e-{rank}",
                ),
            ),
        )

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("space", "space", "k")
        text = on_screen(app.screen.query_one("#kill-target-rows"))
        assert "--lr=3e-1" in text and "--lr=3e-2" in text  # the last, telling argument

    run(body, first=snapshot((worker(1), worker(2))), size=(80, 24))


def test_e_on_the_list_opens_the_process_environment(spawn: Any) -> None:
    proc = spawn(env={**os.environ, "CUDA_VISIBLE_DEVICES": "3"})

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("tab", "e")  # on the GPU panels e is not the list's
        assert isinstance(app.screen, MainScreen)
        await pilot.press("tab", "e")
        screen = app.screen
        assert isinstance(screen, ProcessDetailScreen) and screen.row.pid == proc.pid
        await proc_reads_shown(app, pilot)
        info = on_screen(screen.query_one("#proc-info"))
        assert f"Environment of PID {proc.pid}" in info and "CUDA_VISIBLE_DEVICES=3" in info
        await pilot.press("e")  # again: the process's facts
        await proc_reads_shown(app, pilot)
        assert "Parent chain" in on_screen(screen.query_one("#proc-info"))

    run(body, first=snapshot((row_for(proc),)), size=(100, 40))


QUIT_FROM = {
    "main": (),
    "filter box": ("slash", "x"),
    "help": ("question_mark",),
    "kill dialog": ("k",),
    "process detail": ("enter",),
    "gpu detail": ("d",),
}


@pytest.mark.parametrize("key", ["ctrl+c", "f10"])
@pytest.mark.parametrize("where", list(QUIT_FROM))
def test_ctrl_c_and_f10_quit_at_once_from_every_screen(key: str, where: str) -> None:
    seen: list[str] = []

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        original = app.notify
        app.notify = lambda message, **kw: seen.append(message) or original(message, **kw)  # type: ignore[method-assign,func-returns-value]
        await pilot.press(*QUIT_FROM[where])
        assert app.screen is not app.main_screen or where in ("main", "filter box")
        await pilot.press(key)
        assert not app.is_running

    app = run(body)
    assert app.return_code == 0
    assert not [s for s in seen if "quit" in s.lower()]  # no "press ctrl+q to quit" notice


def help_rows(app: GputopApp) -> dict[str, list[tuple[str, str]]]:
    screen = app.screen
    assert isinstance(screen, HelpScreen)
    return dict(screen.sections)


def shown_keys(app: GputopApp, bindings: list[Any]) -> set[str]:
    return {app.key_label(b.key) for b in Binding.make_bindings(bindings) if b.description}


def test_help_lists_every_binding_once() -> None:
    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        sections = help_rows(app)
        main = [b for b in MainScreen.BINDINGS if isinstance(b, Binding) and "." not in b.action]

        def on_panels(b: Binding) -> bool:
            return b.action.startswith(("switch_region", "panel_move"))

        places = {
            "Everywhere": GputopApp.BINDINGS,
            "Processes": [*ProcessTable.BINDINGS, *(b for b in main if not on_panels(b))],
            "GPU panels": [*GpuPanel.BINDINGS, *(b for b in main if on_panels(b))],
            "GPU detail": GpuDetailScreen.BINDINGS,
            "Process detail": ProcessDetailScreen.BINDINGS,
            "Signal dialog": ConfirmKill.BINDINGS,
        }
        assert set(places) <= set(sections)
        for title, rows in sections.items():
            keys = [k for row_keys, _ in rows for k in row_keys.split(" ")]
            assert len(keys) == len(set(keys)), f"{title}: a key listed twice: {keys}"
            assert shown_keys(app, list(places.get(title, []))) <= set(keys), title
        everything = {k for rows in sections.values() for row, _ in rows for k in row.split(" ")}
        main_keys = shown_keys(app, list(MainScreen.BINDINGS))
        assert main_keys <= everything
        processes = dict(sections["Processes"])
        assert processes["e"].startswith("the environment")
        assert processes["T K I"] and processes["k F9"].startswith("signal the tagged")
        assert dict(sections["GPU detail"])["← → [ ]"] == "previous / next GPU"
        assert dict(sections["Everywhere"])["q F10 ^c"] == "quit gputop"
        panels = dict(sections["GPU panels"])
        assert "tab shift+tab" in panels and "↑ ↓ ← →" in panels
        # The movement keys once: not also in a hand-written list.
        assert sum("↑" in row for row, _ in sections["Processes"]) == 1

    run(body)


def test_readonly_help_says_nothing_of_signals() -> None:
    app = make_app(None, readonly=True, start_sampler=False, clock=lambda: 1001.5)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("question_mark")
        sections = help_rows(app)
        assert "Signal dialog" not in sections
        for title, rows in sections.items():
            for keys, text in rows:
                assert "kill" not in text.lower() and "signal" not in text.lower(), (title, text)
                assert not {"k", "F9", "T", "K", "I"} & set(keys.split(" ")), (title, keys)
        shown = on_screen(app.screen.query_one("#help-body > Static"))
        assert "k is kill" not in shown and "read-only session" in shown

    run(body, app=app)


def footer_width(app: GputopApp) -> int:
    footer = app.screen.query_one(Footer)
    return max(k.region.right for k in footer.query("FooterKey")) - footer.region.x


@pytest.mark.parametrize("readonly", [False, True], ids=["normal", "readonly"])
def test_footer_fits_80_columns(readonly: bool) -> None:
    app = make_app(None, readonly=readonly, start_sampler=False, clock=lambda: 1001.5)

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        for keys in [(), ("tab",), ("tab", "enter")]:  # table, GPU panel, process detail
            await pilot.press(*keys)
            footer = app.screen.query_one(Footer)
            assert footer_width(app) <= 80, (keys, footer_width(app))
            labels = " ".join(on_screen(k) for k in footer.query("FooterKey"))
            assert "Help" in labels and ("Quit" if len(keys) < 2 else "Back") in labels
            assert ("Kill" in labels) is (not readonly)

    run(body, app=app)


def test_shift_letters_and_f9_in_the_process_detail_too(spawn: Any) -> None:
    proc = spawn()

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        await pilot.press("enter")
        assert isinstance(app.screen, ProcessDetailScreen)
        for key, signal in [("I", "INT"), ("K", "KILL"), ("f9", "TERM")]:
            await pilot.press(key)
            dialog = app.screen
            assert isinstance(dialog, ConfirmKill) and dialog.chosen_signal.value == signal, key
            assert [r.pid for r in dialog.rows] == [proc.pid]
            await pilot.press("escape")
            assert isinstance(app.screen, ProcessDetailScreen)
        assert proc.poll() is None and app.killer is not None and not app.killer.log

    run(body, first=snapshot((row_for(proc),)))
