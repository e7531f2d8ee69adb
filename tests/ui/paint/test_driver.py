"""The quiet input thread: keys and a lone Esc still arrive, it sleeps while idle, quits at once.

Unit tests drive ``read_input`` through a pipe; the end-to-end tests run the real dashboard on a
pseudo-terminal, as a person would, on the calm thread and with ``GPUTOP_PLAIN_TEXTUAL=1`` on
Textual's own.
"""

from __future__ import annotations

import asyncio
import os
import selectors
import signal
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.drivers import linux_driver
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from gputop.ui import paint, textual_private
from gputop.ui.app import make_app
from gputop.ui.paint import driver as calm
from gputop.ui.paint.driver import CalmLinuxDriver, WakingEvent, read_input
from tests.pty_terminal import clean_env, on_terminal


class Reader:
    """read_input() on its own thread, reading a pipe; counts its select() calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[Message] = []
        self.selects = 0
        original = selectors.SelectSelector.select

        def counting(selector: selectors.SelectSelector, timeout: float | None = None) -> list:
            self.selects += 1
            return original(selector, timeout)

        monkeypatch.setattr(selectors.SelectSelector, "select", counting)
        self.input_r, self.input_w = os.pipe()
        self.wake_r, wake_w = os.pipe()
        self.stop = WakingEvent()
        self.stop.attach(wake_w)
        self.thread = threading.Thread(
            target=read_input,
            args=(
                self.input_r,
                self.wake_r,
                self.stop,
                textual_private.xterm_parser(False),
                self.events.append,
            ),
            daemon=True,
        )
        self.thread.start()

    def type(self, data: bytes) -> None:
        os.write(self.input_w, data)

    def keys(self) -> list[str]:
        return [e.key for e in self.events if isinstance(e, events.Key)]

    def wait_for_keys(self, count: int, timeout_s: float = 2.0) -> list[str]:
        deadline = time.monotonic() + timeout_s
        while len(self.keys()) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.keys()


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[Reader]:
    if not textual_private.CALM_INPUT:  # a Textual that moved its private parser: its own thread
        pytest.skip("no textual._xterm_parser")
    r = Reader(monkeypatch)
    yield r
    r.stop.set()
    r.thread.join(2)
    for fd in (r.input_r, r.input_w, r.wake_r):
        os.close(fd)


def test_keys_arrive(reader: Reader) -> None:
    reader.type(b"q")
    reader.type(b"\x1b[A")  # up arrow: an escape sequence completed at once
    assert reader.wait_for_keys(2) == ["q", "up"]


def test_a_lone_escape_becomes_a_key_after_the_escape_delay(reader: Reader) -> None:
    reader.type(b"\x1b")
    assert reader.wait_for_keys(1) == ["escape"]


def test_the_thread_sleeps_while_nobody_types(reader: Reader) -> None:
    reader.type(b"x")
    assert reader.wait_for_keys(1) == ["x"]
    time.sleep(0.05)
    before = reader.selects
    time.sleep(0.6)  # Textual's own loop would have woken six times
    assert reader.selects - before <= 1
    assert reader.thread.is_alive()


def test_setting_the_stop_event_ends_the_thread_at_once(reader: Reader) -> None:
    time.sleep(0.05)  # asleep in select() with no timeout
    started = time.monotonic()
    reader.stop.set()
    reader.thread.join(2)
    assert not reader.thread.is_alive()
    assert time.monotonic() - started < 0.5


def test_the_end_of_input_ends_the_thread_without_a_stop(reader: Reader) -> None:
    # A hung-up terminal (closed window, dropped SSH session) may never bring the stop; this
    # thread is not a daemon, so waiting for it kept a gputop alive after its app had ended.
    reader.type(b"q")
    assert reader.wait_for_keys(1) == ["q"]
    os.close(reader.input_w)
    reader.input_w = os.open(os.devnull, os.O_WRONLY)  # the fixture closes whatever is here
    reader.thread.join(2)
    assert not reader.thread.is_alive()  # ended: it neither waits nor spins on the EOF
    assert not reader.stop.is_set()


def test_the_dashboard_uses_the_calm_driver_on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEXTUAL_DRIVER", raising=False)
    driver = make_app(None, start_sampler=False).get_driver_class()
    assert driver is CalmLinuxDriver and issubclass(driver, LinuxDriver)


def _tasks(pid: int) -> dict[str, tuple[str, int]]:
    """Each thread's kernel wait channel and voluntary context switches."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            wchan = (task / "wchan").read_text()
            status = (task / "status").read_text()
        except OSError:
            continue
        switches = next(
            int(line.split()[1])
            for line in status.splitlines()
            if line.startswith("voluntary_ctxt_switches")
        )
        out[task.name] = (wchan, switches)
    return out


def test_the_real_dashboard_on_a_terminal_idles_quietly_and_quits_at_once() -> None:
    with on_terminal("--demo") as term:
        term.wait_for(b"DEMO")
        before = _tasks(term.proc.pid)
        term.read_for(1.5)
        after = _tasks(term.proc.pid)
        # The input thread is the one asleep in select(); "0" where the kernel hides wchan.
        selecting = [t for t, (wchan, _) in after.items() if "poll" in wchan or "select" in wchan]
        if selecting:
            assert any(after[t][1] - before.get(t, ("", 0))[1] <= 2 for t in selecting)
        term.type(b"q")
        started = time.monotonic()
        assert term.read_to_end() == 0
        assert time.monotonic() - started < 3


def _wakeful_selecting_threads(pid: int, seconds: float, read: Any) -> list[int] | None:
    """Voluntary context switches, over ``seconds``, of each thread asleep in select()/poll().

    Not epoll (the event loop's). None where the kernel hides the wait channel.
    """
    before = _tasks(pid)
    read(seconds)
    after = _tasks(pid)
    selecting = [
        t
        for t, (wchan, _) in after.items()
        if ("poll" in wchan or "select" in wchan) and "epoll" not in wchan
    ]
    if not selecting:
        return None
    return [after[t][1] - before.get(t, ("", 0))[1] for t in selecting]


def test_textuals_own_input_thread_still_drives_the_dashboard() -> None:
    """GPUTOP_PLAIN_TEXTUAL=1: Textual's own thread (wakes ten times a second) reads the keys."""
    with on_terminal("--demo", env={**clean_env(), paint.PLAIN_TEXTUAL_ENV: "1"}) as term:
        term.wait_for(b"DEMO")
        term.read_for(0.5)
        switches = _wakeful_selecting_threads(term.proc.pid, 1.5, term.read_for)
        if switches is not None:  # the switch reached the child: its input thread polls
            assert max(switches) >= 8, switches  # ten times a second (the calm one: 0)
        term.type(b"?")
        term.wait_for(b"holder")  # the help screen's states table: the key arrived
        term.type(b"\x1b")
        term.read_for(0.5)
        term.type(b"q")
        assert term.read_to_end() == 0


def test_the_plain_switch_runs_textuals_input_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    monkeypatch.setattr(LinuxDriver, "run_input_thread", lambda self: ran.append("textual"))
    monkeypatch.setattr(calm, "read_input", lambda *a, **k: ran.append("calm"))
    driver = CalmLinuxDriver.__new__(CalmLinuxDriver)
    driver.exit_event = WakingEvent()
    driver.fileno = 0  # never read: read_input is a stand-in
    driver._calm_debug = False
    fits = textual_private.CALM_INPUT
    for plain, parser_fits, expected in (
        (False, fits, "calm" if fits else "textual"),
        (True, fits, "textual"),  # GPUTOP_PLAIN_TEXTUAL=1
        (False, False, "textual"),  # a Textual whose private parser failed the feature test
    ):
        monkeypatch.setattr(paint, "PLAIN_TEXTUAL", plain)
        monkeypatch.setattr(textual_private, "CALM_INPUT", parser_fits)
        ran.clear()
        driver.run_input_thread()
        assert ran == [expected], (plain, parser_fits)


def test_the_parser_feature_test_sees_a_lone_escape_wait() -> None:
    parser = textual_private.xterm_parser(False)
    assert not textual_private.parser_pending(parser)
    assert list(parser.feed("\x1b")) == []
    assert textual_private.parser_pending(parser)  # the calm thread polls until it resolves
    time.sleep(0.2)
    assert [e.key for e in parser.tick() if isinstance(e, events.Key)] == ["escape"]
    assert not textual_private.parser_pending(parser)


@pytest.fixture
def calm_driver() -> Iterator[tuple[CalmLinuxDriver, asyncio.AbstractEventLoop]]:
    """A CalmLinuxDriver made on a running loop; the test process's signal handlers restored."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTSTP, signal.SIGCONT)}
    loop = asyncio.new_event_loop()

    async def make() -> CalmLinuxDriver:
        return CalmLinuxDriver(make_app(None, start_sampler=False), mouse=False)

    try:
        yield loop.run_until_complete(make()), loop
    finally:
        loop.close()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def test_a_start_textual_refuses_in_the_background_leaves_application_mode_off(
    calm_driver: tuple[CalmLinuxDriver, asyncio.AbstractEventLoop],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Textual's start returns before writing anything when a background job may not set the
    terminal (tcsetattr fails): then SIGCONT must not take a terminal that is not ours."""
    driver, loop = calm_driver
    monkeypatch.setattr(linux_driver.os, "isatty", lambda fd: True)

    def refused(*args: Any) -> None:
        raise termios.error(5, "Input/output error")

    monkeypatch.setattr(linux_driver.termios, "tcsetattr", refused)
    monkeypatch.setattr(linux_driver.termios, "tcgetattr", lambda fd: [0] * 7)

    async def start() -> None:
        driver.start_application_mode()

    loop.run_until_complete(start())
    assert not driver._mode_on


def test_a_tstp_inside_textuals_no_automatic_restart_only_stops(
    calm_driver: tuple[CalmLinuxDriver, asyncio.AbstractEventLoop],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """App.suspend() runs a program inside no_automatic_restart(): a SIGTSTP then stops the
    process without leaving the terminal (Textual's own rule), and afterwards leaves it again."""
    driver, _ = calm_driver
    done: list[str] = []
    monkeypatch.setattr(
        calm.os, "kill", lambda pid, signum: done.append(signal.Signals(signum).name)
    )
    monkeypatch.setattr(driver, "suspend_application_mode", lambda: done.append("suspend"))
    driver._mode_on = True
    with driver.no_automatic_restart():
        driver._suspend_and_stop()
    assert done == ["SIGSTOP"]
    done.clear()
    driver._suspend_and_stop()
    assert done == ["suspend", "SIGSTOP"]
