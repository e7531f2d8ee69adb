"""The quiet input thread: keys and a lone Esc still arrive, it sleeps while idle, quits at once.

Unit tests drive ``read_input`` through a pipe; the end-to-end tests run the real dashboard on a
pseudo-terminal, as a person would, on the calm thread and with ``GPUTOP_PLAIN_TEXTUAL=1`` on
Textual's own.
"""

from __future__ import annotations

import os
import selectors
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

from gputop.ui import paint
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
            args=(self.input_r, self.wake_r, self.stop, calm.XTermParser(), self.events.append),
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
    if calm.XTermParser is None:  # a Textual that moved its private parser: its own thread runs
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
    parser = calm.XTermParser
    for plain, parser_there, expected in (
        (False, parser, "calm" if parser is not None else "textual"),
        (True, parser, "textual"),  # GPUTOP_PLAIN_TEXTUAL=1
        (False, None, "textual"),  # a Textual that moved its private parser
    ):
        monkeypatch.setattr(paint, "PLAIN_TEXTUAL", plain)
        monkeypatch.setattr(calm, "XTermParser", parser_there)
        ran.clear()
        driver.run_input_thread()
        assert ran == [expected], (plain, parser_there)


def test_the_plain_switch_keeps_to_stderr_without_the_private_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    driver = CalmLinuxDriver.__new__(CalmLinuxDriver)
    driver._file = marker = object()  # type: ignore[assignment]
    assert driver._output() is marker
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", True)
    assert driver._output() is sys.__stderr__
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", False)
    del driver._file  # a Textual that renamed it
    assert driver._output() is sys.__stderr__
