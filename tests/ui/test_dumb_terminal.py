"""A terminal that cannot draw a dashboard (TERM=dumb, unset, unknown): one line, exit 2, no escape.

Each test runs the real command on a pty whose TERM says so and reads every byte written there.
The one-shots still work on such a terminal, without colour.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path

import pytest

from tests.pty_terminal import clean_env, on_terminal

ESC = b"\x1b"
REFUSED_WITHIN_S = 20.0  # a loaded 2-core box; the refusal itself comes before Textual is loaded


def env_with(term: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in clean_env().items() if k not in ("TERM", "TERMINFO", "TERMINFO_DIRS")}
    if term is not None:
        env["TERM"] = term
    return {**env, **extra}


def refused(*argv: str, env: dict[str, str]) -> str:
    """Run ``gputop ARGV`` on a pty; it must exit 2 having written one line and no escape."""
    started = time.monotonic()
    with on_terminal(*argv, env=env) as term:
        assert term.read_to_end(REFUSED_WITHIN_S) == 2
    assert time.monotonic() - started < REFUSED_WITHIN_S
    written = bytes(term.output)
    assert ESC not in written, written
    assert b"\x9b" not in written and b"Traceback" not in written
    lines = written.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("gputop: ") and "--once" in lines[0]
    return lines[0]


def glass_terminfo(folder: Path) -> Path:
    """A terminfo folder describing 'glasstest', a terminal with no cursor addressing (no cup).

    Written by hand in terminfo's compiled format (no tic needed): the header's magic and four
    empty sections after the names.
    """
    names = b"glasstest|a glass tty that cannot move its cursor\0"
    entry = folder / "g" / "glasstest"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(struct.pack("<6h", 0o432, len(names), 0, 0, 0, 0) + names)
    return folder


def test_term_dumb_refuses_the_dashboard() -> None:
    line = refused("--demo", env=env_with("dumb"))
    assert line == (
        "gputop: this terminal (TERM=dumb) cannot show the dashboard; use --once, --json or query"
    )


def test_term_unset_refuses_the_dashboard() -> None:
    line = refused("--demo", env=env_with(None))
    assert line.startswith("gputop: TERM is not set")


def test_a_term_without_terminfo_entry_refuses_the_dashboard(tmp_path: Path) -> None:
    line = refused("--demo", env=env_with("nosuchterm-zz", TERMINFO=str(tmp_path)))
    assert "unknown terminal type TERM=nosuchterm-zz" in line


def test_a_terminfo_entry_without_cursor_addressing_refuses(tmp_path: Path) -> None:
    env = env_with("glasstest", TERMINFO=str(glass_terminfo(tmp_path)))
    assert "(TERM=glasstest) cannot show" in refused("--demo", env=env)


def test_a_term_with_escapes_is_refused_and_never_echoed() -> None:
    line = refused("--demo", env=env_with("x\x1b]0;OWNED\x07\x1b[2J"))
    assert "is not a terminal name" in line


def test_the_fleet_overview_refuses_too_and_names_its_own_one_shots() -> None:
    line = refused("fleet", "--prometheus", "http://127.0.0.1:9", env=env_with("dumb"))
    assert line == (
        "gputop: this terminal (TERM=dumb) cannot show the dashboard; "
        "use fleet --once or fleet --json"
    )


@pytest.mark.parametrize(
    "term",
    [
        "ansi",  # not an xterm family: terminfo's entry has cursor addressing
        "xterm-kitty",  # an xterm family without an entry here (an SSH session to a server)
    ],
)
def test_a_capable_terminal_gets_the_dashboard(term: str, tmp_path: Path) -> None:
    with on_terminal("--demo", env=env_with(term, TERMINFO=str(tmp_path))) as term_:
        term_.wait_for(b"Processes")
        term_.type(b"q")
        assert term_.read_to_end() == 0


@pytest.mark.parametrize(
    "argv", [("--once",), ("--json",), ("query", "--query-gpu=name,memory.used"), ("doctor",)]
)
def test_the_one_shots_work_on_a_dumb_terminal(argv: tuple[str, ...]) -> None:
    with on_terminal("--demo", *argv, env=env_with("dumb")) as term:
        status = term.read_to_end(60)
    written = bytes(term.output)
    assert status in (0, 1), written  # doctor: 1 when the demo shows a stuck holder
    assert ESC not in written, written  # --once leaves its colours off, as git and Rich do
    assert b"Traceback" not in written and b"cannot show" not in written
    assert written.strip(), "it printed something"
