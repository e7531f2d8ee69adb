"""Hostile names on every screen: shown as written, never read as markup, never run as an action.

The dashboard runs on a scenario listing real processes owned by real users (added for the test,
removed after) whose names are markup: ``[/]gt`` (a MarkupError in the kill dialog once),
``[link=x]root[/link]`` (shown as "root", with an OSC 8 link), ``[@click=app.quit]gt[/]`` (a click
ran app.quit). Their argv, name and environment carry markup, controls, C1, bidi, zero-width,
wide and combining characters. The fleet overview reads a fake Prometheus on loopback whose
labels and error text are hostile the same way. Every screen is driven with Pilot; what it would
write to a terminal is rendered from its compositor and read byte by byte; the text under every
hostile string is clicked, with app.quit replaced by a sentinel.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.cells import cell_len
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from gputop.engine.sanitize import clean
from gputop.fleet.client import PrometheusClient
from gputop.fleet.model import FleetReader, read_processes
from gputop.sources import open_source
from gputop.ui.app import GputopApp, make_app
from gputop.ui.fleet.app import FleetApp
from gputop.ui.fleet.host import HostScreen
from gputop.ui.fleet.host_table import HostTable
from gputop.ui.plain import plain
from gputop.ui.screens.confirm_kill import ConfirmKill
from gputop.ui.screens.gpu_detail import GpuDetailScreen
from gputop.ui.screens.help import HelpScreen
from gputop.ui.screens.process_detail import ProcessDetailScreen
from tests.fleet.conftest import send, static_server
from tests.ui.data import proc_reads_shown, visible_pids
from tests.users import added_user

MARKUP = ("[/]", "[@click=app.quit]x[/]", "[link=http://x]root[/link]", "[bold")
OTHER = ("\x1b]0;T\x07", "\x1b[2J", "\x9b2J", "\u202eevil", "s\u200bsh", "世界", "e\u0301\u0301")
ARGS = (*MARKUP, *OTHER)
# ':' ends a passwd field, so no user can be named "[link=http://x]..."; "[link=x]" links too.
USERS = ("[/]gt", "[link=x]root[/link]", "[@click=app.quit]gt[/]")
COMM = "[bold]s\u200bsh"  # the executable's name (15 bytes at most, no "/")
ENV_VALUE = "[/][@click=app.quit]x[/]\x1b]0;ENV\x07"
GPU_NAME = "NVIDIA [/][link=http://x]A100[/link]\x1b]0;GPU\x07"
DRIVER_NAME = "[@click=app.quit]drv[/]"

# What a terminal must never get from data: OSC (titles, links), BEL, C1, bidi, invisibles.
FORBIDDEN = re.compile(
    "\x1b\\]|\x07|[\x80-\x9f]|[\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff\u00ad]"
)
ESCAPE = re.compile("\x1b(\\[[0-9;?]*[mH]|.)")  # SGR and cursor moves are Textual's own


# -- what the screen writes ---------------------------------------------------------------------
def terminal(app: App[Any]) -> tuple[str, str]:
    """The screen as a terminal would get it (every byte) and as plain text, line by line."""
    width, height = app.size
    stream = io.StringIO()
    console = Console(
        width=width,
        height=height,
        file=stream,
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return stream.getvalue(), console.export_text(styles=False)


def assert_clean_stream(app: App[Any]) -> str:
    """No hostile byte in what the screen writes; its text."""
    stream, text = terminal(app)
    assert FORBIDDEN.findall(stream) == []
    own = {m.group() for m in ESCAPE.finditer(stream)}
    assert {e for e in own if not re.fullmatch("\x1b\\[[0-9;?]*[mH]", e)} == set()
    return text


def widget_text(widget: Widget) -> str:
    """The text a widget shows, line by line."""
    return "\n".join(strip.text for strip in widget.render_lines(widget.region.reset_offset))


def quit_sentinel(app: App[Any]) -> list[str]:
    """Replace app.quit: a ``[@click=app.quit]`` that ran would be recorded here."""
    ran: list[str] = []
    app.action_quit = lambda: ran.append("quit")  # type: ignore[method-assign]
    return ran


async def click_on(pilot: Pilot[Any], app: App[Any], needle: str, cells: int = 3) -> None:
    """Click the first cells of ``needle`` where the screen shows it (it must)."""
    _, text = terminal(app)
    for y, line in enumerate(text.splitlines()):
        if needle in line:
            x = cell_len(line[: line.index(needle)])
            for dx in range(cells):
                await pilot.click(offset=(x + dx, y))
            return
    raise AssertionError(f"{needle!r} is not on screen")


# -- real users and processes -------------------------------------------------------------------
@contextlib.contextmanager
def hostile_users() -> Iterator[dict[str, pwd.struct_passwd]]:
    """The users of USERS, added now and removed after (even on failure)."""
    with contextlib.ExitStack() as stack:
        yield {name: stack.enter_context(added_user(name)) for name in USERS}


@dataclass(frozen=True)
class Box:
    scenario: Path
    pids: dict[str, int]  # user name -> the PID of their process


def _gone(uids: set[int], timeout_s: float = 10.0) -> None:
    """Wait until no process runs as one of ``uids`` (userdel refuses a user still running)."""
    deadline = time.monotonic() + timeout_s
    while any(p.info["uids"].real in uids for p in psutil.process_iter(["uids"])):
        assert time.monotonic() < deadline, "a hostile user's process outlived its kill"
        time.sleep(0.05)


@contextlib.contextmanager
def hostile_box() -> Iterator[Box]:
    """A process per hostile user (argv ARGS, name COMM, environment ENV_VALUE), listed on a GPU
    named GPU_NAME by a scenario file; all killed after, then the users removed."""
    folder = Path(tempfile.mkdtemp(prefix="gputop-markup-"))
    try:
        folder.chmod(0o755)  # the users reach the executable through it
        shell = folder / COMM  # exec'd by this name: the process's name (comm) is COMM
        shell.symlink_to("/bin/sh")
        with hostile_users() as users:
            procs: list[subprocess.Popen[str]] = []
            try:
                for entry in users.values():
                    proc = subprocess.Popen(
                        [str(shell), "-c", "echo ready; sleep 600 & wait", "sh", *ARGS],
                        stdout=subprocess.PIPE,
                        text=True,
                        user=entry.pw_uid,
                        group=entry.pw_gid,
                        extra_groups=[],
                        cwd="/",
                        env={"PATH": "/usr/bin:/bin", "GPUTOP_EVIL": ENV_VALUE},
                        start_new_session=True,  # its sleep is killed with it
                    )
                    procs.append(proc)
                    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
                pids = {name: p.pid for name, p in zip(users, procs, strict=True)}
                gpu = {
                    "name": GPU_NAME,
                    "memory_total_mib": 81920,
                    "processes": [
                        {"pid": pid, "name": DRIVER_NAME, "used_memory_mib": 1024 * (i + 1)}
                        for i, pid in enumerate(pids.values())
                    ],
                }
                scenario = folder / "hostile.json"
                scenario.write_text(json.dumps({"name": "hostile-markup", "gpu": [gpu]}))
                yield Box(scenario=scenario, pids=pids)
            finally:
                for proc in procs:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(proc.pid, signal.SIGKILL)  # its group: the sh and its sleep
                    proc.wait(timeout=10)
                    if proc.stdout is not None:
                        proc.stdout.close()
                _gone({u.pw_uid for u in users.values()})
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def box() -> Iterator[Box]:
    with hostile_box() as made:
        yield made


async def until(pilot: Pilot[Any], done: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


# -- the dashboard ------------------------------------------------------------------------------
def test_every_dashboard_screen_shows_hostile_names_as_written(box: Box) -> None:
    shown_args = [clean(a) for a in ARGS]

    async def body(app: GputopApp, pilot: Pilot[Any]) -> None:
        quits = quit_sentinel(app)
        wanted = set(box.pids.values())
        await until(pilot, lambda: wanted <= set(visible_pids(app)), timeout_s=60)
        await pilot.pause()
        assert app.snapshot is not None
        owners = {r.info.user: r.pid for r in app.snapshot.processes if r.pid in wanted}
        assert owners == box.pids  # each process shown with its owner, as the kernel says
        text = assert_clean_stream(app)
        assert f"GPU 0 · {clean(GPU_NAME).removeprefix('NVIDIA ')}" in text  # the panel's title
        assert "[/]gt" in text  # the user column (a name cut to fit is cut, not parsed)

        # The process detail and its environment, on the "[link=x]root[/link]" user's process.
        table = app.main_screen.table
        for _ in range(len(wanted)):
            if table.current is not None and table.current.pid == box.pids[USERS[1]]:
                break
            await pilot.press("down")
        await pilot.press("enter")
        await proc_reads_shown(app, pilot)
        assert isinstance(app.screen, ProcessDetailScreen)
        text = assert_clean_stream(app)
        assert f"[link=x]root[/link] (uid {pwd.getpwnam(USERS[1]).pw_uid})" in text
        assert clean(COMM) in text and all(a in text for a in shown_args[:4])
        for needle in ("[@click=app.quit]x[/]", "[link=x]root[/link] (uid", clean(COMM)):
            await click_on(pilot, app, needle)
        await pilot.press("e")
        await proc_reads_shown(app, pilot)
        text = assert_clean_stream(app)
        assert "GPUTOP_EVIL=" + clean(ENV_VALUE) in text
        await click_on(pilot, app, clean(ENV_VALUE))
        await pilot.press("escape")

        await pilot.press("question_mark")  # help: keys like "[" and "]" as written
        assert isinstance(app.screen, HelpScreen)
        text = assert_clean_stream(app)
        assert "← → [ ]" in text
        await pilot.press("escape")

        await pilot.press("d")  # the GPU detail: its hostile name
        assert isinstance(app.screen, GpuDetailScreen)
        await pilot.pause()
        assert f"GPU 0 · {clean(GPU_NAME).removeprefix('NVIDIA ')}" in assert_clean_stream(app)
        await click_on(pilot, app, "[/][link=http://x]A100")
        await pilot.press("escape")

        # The kill dialog on all three: each name as written, beside its own PID.
        for _ in range(3):
            await pilot.press("home")
        for _ in USERS:
            await pilot.press("space")
        await pilot.press("k")
        dialog = app.screen
        assert isinstance(dialog, ConfirmKill) and len(dialog.rows) == 3
        assert_clean_stream(app)
        targets = widget_text(dialog.query_one("#kill-target-rows"))
        for user, pid in box.pids.items():
            line = next(x for x in targets.splitlines() if f" {pid} " in f" {x} ")
            assert user in line and clean(DRIVER_NAME) not in line
        await click_on(pilot, app, f"{box.pids[USERS[2]]} [@click=app.quit]gt[/]", cells=12)
        await pilot.press("enter")  # TERM to all three: the results as toasts
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = assert_clean_stream(app)
        assert all(f"sent TERM to PID {pid}" in text for pid in box.pids.values())
        await pilot.press("escape")
        assert quits == [] and app.is_running

    source = open_source(scenario=str(box.scenario), isolated=True)
    try:
        app = make_app(source, interval_s=10.0)  # one reading is enough: fewer repaints

        async def main() -> None:
            async with app.run_test(size=(200, 60), notifications=True) as pilot:
                await body(app, pilot)

        asyncio.run(main())
    finally:
        source.close()


# -- the fleet ----------------------------------------------------------------------------------
HOSTS = ("[/]alpha\u202e", "[@click=app.quit]bravo[/]世界")
MODEL = "[link=http://x]A100[/link]\x1b]0;M\x07"
PROCESS = {
    "user": "[/]",
    "command": "[@click=app.quit]python[/] \x1b[2J e\u0301\u0301",
    "container": "[link=http://x]root[/link]",
}
ERROR = "[/][@click=app.quit]x[/]\x1b]0;PWN\x07\x1b[2J\u202e"


class FakePrometheus:
    """Answers the overview's queries with HOSTS' GPUs and processes, or ERROR (HTTP 400)."""

    def __init__(self) -> None:
        self.failing = False

    def series(self, promql: str) -> list[dict[str, str]]:
        """The label sets of an instant query's answer (every value: 1)."""
        targets = [{"job": "gpus", "instance": f"10.0.0.{i}:9400"} for i in range(len(HOSTS))]
        by_host = [{**t, "Hostname": h} for t, h in zip(targets, HOSTS, strict=True)]
        gpus = [
            {**t, "gpu": gpu, "UUID": f"GPU-{i}-{gpu}", "modelName": MODEL}
            for i, t in enumerate(by_host)
            for gpu in ("0", "1")  # a gpu label that is no number drops its series
        ]
        if "gputop_process_gpu_memory_bytes" in promql:
            return [{**targets[0], "gpu": "0", "pid": "4242", **PROCESS}]
        if "gputop_stuck_processes" in promql:
            return [{**t, "state": "holder"} for t in by_host]
        if promql.startswith("group by") or "gputop_info" in promql:
            return by_host
        if promql in ("up", "timestamp(up)"):
            return targets
        if "modelName" in promql:
            return gpus
        if promql.startswith("max by (UUID)"):
            return [{"UUID": g["UUID"]} for g in gpus]
        return []

    def respond(self, handler: Any) -> None:
        url = urllib.parse.urlparse(handler.path)
        promql = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        now = time.time()
        if self.failing:
            reply = {"status": "error", "errorType": "bad_data", "error": ERROR}
            send(handler, 400, json.dumps(reply).encode(), "application/json")
            return
        if url.path.endswith("query_range"):
            data: dict[str, Any] = {
                "resultType": "matrix",
                "result": [
                    {"metric": {"Hostname": h}, "values": [[now - 30, "40"], [now, "50"]]}
                    for h in HOSTS
                ],
            }
        else:
            value = "1" if "timestamp" not in promql else str(now)
            data = {
                "resultType": "vector",
                "result": [{"metric": m, "value": [now, value]} for m in self.series(promql)],
            }
        send(
            handler,
            200,
            json.dumps({"status": "success", "data": data}).encode(),
            "application/json",
        )


def run_fleet(body: Callable[[FleetApp, Pilot[Any], FakePrometheus], Awaitable[None]]) -> None:
    prometheus = FakePrometheus()
    with static_server(prometheus.respond) as server:
        client = PrometheusClient(server.url, timeout_s=5.0)
        app = FleetApp(
            FleetReader(client),
            interval_s=60,
            source=client.base_url,
            read_processes=lambda host: read_processes(client, host),
        )

        async def main() -> None:
            async with app.run_test(size=(200, 50), notifications=True) as pilot:
                await body(app, pilot, prometheus)
                app.poller.stop()

        asyncio.run(main())


def test_the_fleet_shows_hostile_labels_and_errors_as_written() -> None:
    hosts = [clean(h) for h in HOSTS]

    async def body(app: FleetApp, pilot: Pilot[Any], prometheus: FakePrometheus) -> None:
        quits = quit_sentinel(app)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        await until(pilot, lambda: len(table.row_names) == 2)
        await pilot.pause()
        text = assert_clean_stream(app)
        # The stuck report names both hosts (a "[/]" in one blanked it for all).
        report = text[text.index("Stuck processes across the fleet:") :]
        assert all(f"  {h}: 1 holder  (gputop doctor on the host)" in report for h in hosts)
        for host in hosts:
            await click_on(pilot, app, f"  {host}: ")

        await pilot.press("enter")  # the first host: "[/]alpha"
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.host_name == hosts[0]
        await until(pilot, lambda: screen.processes_read)
        await pilot.pause()
        text = assert_clean_stream(app)
        model = clean(MODEL)[:24]  # then cut to the card's width
        assert f"GPU 0 · {model}" in text and f"GPU 1 · {model}" in text
        assert f"ssh {hosts[0]} gputop" in text
        row = next(line for line in text.splitlines() if "4242" in line)
        assert all(clean(v) in row for v in PROCESS.values())
        for needle in (model, f"ssh {hosts[0]}", *(clean(v) for v in PROCESS.values())):
            await click_on(pilot, app, needle)
        await pilot.press("escape")

        prometheus.failing = True
        await pilot.press("f5")
        error = app.screen.query_one("#fleet-error")
        await until(pilot, lambda: app.poller.state.error is not None and error.display)
        await pilot.pause()
        text = assert_clean_stream(app)
        line = next(line for line in text.splitlines() if "HTTP 400" in line)
        assert clean(ERROR) in line
        await click_on(pilot, app, clean(ERROR))
        assert quits == [] and app.is_running

    run_fleet(body)


# -- the helper ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text", [*ARGS, "a\nb[/]\x1b[2J\nc"])
def test_plain_is_never_markup_and_keeps_its_lines(text: str) -> None:
    shown = plain(text)
    assert shown.plain == "\n".join(clean(line) for line in text.split("\n"))
    assert shown.spans == []


def test_these_checks_see_markup_that_was_parsed() -> None:
    # The checks above must be able to fail: markup parsed on purpose is caught by each.
    class Parsed(App[None]):
        def compose(self) -> Iterator[Static]:
            yield Static("[@click=app.quit]gt[/] [link='http://x']root[/link]")

    app = Parsed()

    async def main() -> None:
        async with app.run_test(size=(40, 3)) as pilot:
            quits = quit_sentinel(app)
            stream, text = terminal(app)
            assert "gt root" in text and "[link=" not in text
            assert FORBIDDEN.findall(stream) != []  # the OSC 8 link
            await click_on(pilot, app, "gt", cells=1)
            assert quits == ["quit"]

    asyncio.run(main())
