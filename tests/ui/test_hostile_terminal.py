"""The bytes the real dashboard writes to its terminal carry no hostile byte from a process.

The dashboard runs in a pty, as a person would run it, on a scenario listing a real process whose
argv, environment and zombie child's name hold terminal escapes, C1, bidi and newlines; the test
opens that process's detail and environment, quits, and reads everything written to the terminal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile import HostileBox, hostile_box
from tests.pty_terminal import on_terminal


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[HostileBox]:
    with hostile_box(tmp_path) as box:
        yield box


def test_dashboard_writes_no_hostile_byte_to_the_terminal(
    hostile: HostileBox,
) -> None:
    scenario, pid = hostile.scenario, hostile.pid
    with on_terminal("--scenario", str(scenario), size=(200, 50)) as term:
        term.wait_for(str(pid).encode())  # the process table shows the hostile process
        term.read_for(1.5)
        term.type(b"/" + str(pid).encode() + b"\r")  # filter to it, then open its detail
        term.read_for(0.4)
        # Its zombie child matches too ("parent PID is not reaping it") and, stuck, comes first.
        term.type(b"\x1b[B\r")
        term.wait_for(b"Parent chain")
        term.type(b"e")  # its environment
        term.wait_for(b"GPUTOP_EVIL")
        term.read_for(0.5)
        term.type(b"q")  # back to the table
        term.read_for(0.4)
        term.type(b"\x1b")  # clear the filter
        term.read_for(1.0)
        term.type(b"q")
        assert term.read_to_end() == 0
    out = bytes(term.output)
    # The hostile text is there, written out as visible escapes...
    assert b"\\x1b]0;OWNED\\x07" in out
    assert b"=\\x1b]0;ENV\\x07\\u202e" in out  # GPUTOP_EVIL, after its bold name
    assert b"\\x1b]0;PWN\\x07" in out  # the zombie's name
    assert b"A100\\x1b]0;GPU\\x07" in out
    # ...and never as the bytes themselves: no title change, no C1 CSI, no bidi override.
    assert b"]0;OWNED" not in out.replace(b"\\x1b]0;OWNED", b"")
    assert b"]0;ENV" not in out.replace(b"\\x1b]0;ENV", b"")
    assert b"]0;PWN" not in out.replace(b"\\x1b]0;PWN", b"")
    assert b"\x07" not in re.sub(rb"\x1b\]22;[a-z-]*\x07", b"", out)  # but Textual's pointer shape
    assert b"\xc2\x9b" not in out
    assert b"\xe2\x80\xae" not in out
