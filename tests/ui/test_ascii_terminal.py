"""A terminal that cannot carry Unicode (ASCII, ISO-8859-1) gets ASCII stand-ins, never an error.

The one-shot views choose ASCII glyphs ('->', '...', '61C'); the dashboard's driver turns every
character Textual writes that the terminal cannot encode into a one-cell stand-in.
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gputop import glyphs
from gputop.commands.once import OnceOptions, render_once
from gputop.engine.model import ProcInfo
from gputop.ui import text
from gputop.ui.app import make_app
from gputop.ui.paint.driver import CalmLinuxDriver
from tests.commands.helpers import enriched_snapshot
from tests.pty_terminal import ROOT, on_terminal

SHOW_ALL = ["-c", "-p", "-u", "-F", "-P"]
# ISO-8859-1 through the locale: where that locale is not installed, Python writes UTF-8 to what
# the user said is a Latin-1 terminal, and gputop must still keep to ASCII.
LATIN1_LOCALE = {"LANG": "en_US.ISO-8859-1", "LC_ALL": "en_US.ISO-8859-1"}
NOT_UNICODE = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "latin-1-locale": LATIN1_LOCALE,
}
ESCAPED = re.compile(rb"\\u[0-9a-f]{4}|\\x[89a-f][0-9a-f]")  # stderr's backslashreplace


def environ(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GPUTOP", "TEXTUAL", "LC_", "PYTHONIOENCODING"))
    }
    return {**env, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", **extra}


def gputop(argv: list[str], extra: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        env=environ(**extra),
        timeout=60,
    )


@pytest.mark.parametrize("setting", sorted(NOT_UNICODE))
def test_once_with_every_column_prints_ascii(setting: str) -> None:
    result = gputop(["--once", "--demo", *SHOW_ALL], NOT_UNICODE[setting])
    assert b"Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode("ascii")  # raises on anything else
    lines = out.splitlines()
    assert "DEMO" in lines[0] and len(lines) == 5
    assert re.search(r"\[\d->\d\]", out)  # the demo's CUDA order differs from NVML's
    assert re.search(r"\| +\d+C, ", out)  # 61C, not 61°C
    assert not ESCAPED.search(result.stdout)


def test_once_cut_to_a_narrow_terminal_ends_in_three_dots() -> None:
    result = gputop(["--once", "--demo", *SHOW_ALL], {"PYTHONIOENCODING": "ascii", "COLUMNS": "80"})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode("ascii").splitlines()
    assert all(len(line) <= 80 for line in lines)
    # the names cut short (GPU 3's health verdict, [degraded], keeps its room), as one width
    assert re.match(r"\[0->1\] N[A-Z ]*\.\.\. \|", lines[1]), lines[1]
    assert lines[1].endswith("...")  # its processes cut short (or a "| ...+N" for those left out)
    assert "[degraded]" in lines[4]


@pytest.mark.parametrize("setting", sorted(NOT_UNICODE))
@pytest.mark.parametrize(("demo", "code"), [("dgx", 0), ("demo", 1)])
def test_doctor_prints_ascii(setting: str, demo: str, code: int) -> None:
    result = gputop(["doctor", "--demo", demo], NOT_UNICODE[setting])
    assert b"Traceback" not in result.stderr
    assert result.returncode == code, result.stderr  # 1: the demo has stuck processes
    assert "gputop doctor" in result.stdout.decode("ascii")


@pytest.mark.parametrize("setting", sorted(NOT_UNICODE))
@pytest.mark.parametrize("command", [["doctor"], ["--once", *SHOW_ALL]], ids=["doctor", "once"])
def test_names_the_terminal_cannot_show_become_stand_ins(
    tmp_path: Path, setting: str, command: list[str]
) -> None:
    scenario = tmp_path / "box.toml"
    scenario.write_text('[[gpu]]\nname = "Tésla Ω→X 训练"\n', encoding="utf-8")
    result = gputop(["--scenario", str(scenario), *command], NOT_UNICODE[setting])
    assert b"Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    if setting == "latin-1":  # keeps what Latin-1 has
        assert "Tésla ?>X ????" in result.stdout.decode("latin-1")
    else:  # 'é' -> 'e'; one cell for each cell
        assert "Tesla ?>X ????" in result.stdout.decode("ascii")


def test_once_turns_any_name_into_what_the_encoding_carries() -> None:
    snap = enriched_snapshot()
    odd = ProcInfo(pid=1001, user="jürgen", name="训练→run", cmdline=("x",), create_time=1.0)
    rows = (snap.processes[0].__class__(**{**_fields(snap.processes[0]), "info": odd}),)
    snap = snap.__class__(**{**_fields(snap), "processes": rows + snap.processes[1:]})
    options = OnceOptions(show_cmd=True, show_user=True, width=400, encoding="ascii")
    out = render_once(snap, options)
    assert out.isascii()
    assert "jurgen:????>run" in out  # one cell for one: the line was laid out with '→'
    latin = render_once(snap, OnceOptions(show_cmd=True, width=400, encoding="latin-1"))
    assert " ????>run(" in latin  # laid out with '→', made safe cell for cell
    latin.encode("latin-1")
    assert "训练→run" in render_once(snap, OnceOptions(show_cmd=True, width=400, encoding="utf-8"))


def _fields(obj: object) -> dict[str, object]:
    return {name: getattr(obj, name) for name in obj.__dataclass_fields__}  # type: ignore[attr-defined]


def test_bars_and_sparklines_in_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text, "GLYPHS", glyphs.ASCII)
    assert text.bar(0.5, 10) == "#####     "
    assert text.bar(0.46, 10) == "#####     "  # whole cells: no partial block
    assert text.bar(1.0, 4) == "####"
    assert text.bar(None, 3) == "..."
    assert text.sparkline([0, 1, 2, 4, 8, None], 6, top=8) == "__.-# "
    monkeypatch.setattr(text, "GLYPHS", glyphs.UNICODE)
    assert text.bar(0.5, 3) == "█▌ "


class Written:
    """Stands in for Textual's writer thread: keeps what the driver writes."""

    def __init__(self) -> None:
        self.data: list[str] = []

    def write(self, data: str) -> None:
        self.data.append(data)


def driver_writing_to(
    monkeypatch: pytest.MonkeyPatch, encoding: str
) -> tuple[CalmLinuxDriver, Written]:
    monkeypatch.setattr(sys, "__stderr__", io.TextIOWrapper(io.BytesIO(), encoding=encoding))
    monkeypatch.setenv("PYTHONIOENCODING", encoding)  # as Python would have made stderr
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_CTYPE", raising=False)

    async def build() -> CalmLinuxDriver:  # Textual's App wants a running event loop
        return CalmLinuxDriver(make_app(None, start_sampler=False))

    driver = asyncio.run(build())
    written = Written()
    driver._writer_thread = written  # type: ignore[assignment]
    return driver, written


FRAME = "\x1b[2;1H╭─ GPU 0 · A100 ─╮\x1b[3;1H│ ████▌ ▁▃▅█ 68°C │"


def test_the_driver_writes_ascii_to_an_ascii_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    driver, written = driver_writing_to(monkeypatch, "ascii")
    driver.write(FRAME)
    assert written.data == ["\x1b[2;1H+- GPU 0 . A100 -+\x1b[3;1H| ##### _:=# 68 C |"]


def test_the_driver_keeps_what_latin1_carries(monkeypatch: pytest.MonkeyPatch) -> None:
    driver, written = driver_writing_to(monkeypatch, "latin-1")
    driver.write(FRAME)
    assert written.data == ["\x1b[2;1H+- GPU 0 · A100 -+\x1b[3;1H| ##### _:=# 68°C |"]


def test_the_driver_leaves_unicode_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    driver, written = driver_writing_to(monkeypatch, "utf-8")
    assert driver._to_terminal is None  # no translation on the way at all
    driver.write(FRAME)
    assert written.data == [FRAME]


def run_dashboard_on_a_pty(extra: dict[str, str]) -> bytes:
    """The demo dashboard on a 100x30 pseudo-terminal for a few seconds, then 'q': all it wrote."""
    with on_terminal("--demo", env=environ(TERM="xterm-256color", **extra)) as term:
        term.wait_for(b"Processes")
        term.read_for(2.5)  # a couple of ticks: bars and sparklines filled in
        term.type(b"q")
        assert term.read_to_end() == 0, bytes(term.output[-2000:])
    return bytes(term.output)


@pytest.mark.parametrize("setting", ["ascii", "latin-1-locale"])
def test_the_dashboard_on_a_terminal_without_unicode_writes_ascii(setting: str) -> None:
    screen = run_dashboard_on_a_pty(NOT_UNICODE[setting])
    screen.decode("ascii")  # raises on any byte above 127
    assert not ESCAPED.search(screen), ESCAPED.search(screen)
    assert b"Processes" in screen and b"DEMO" in screen
    plain = re.sub(rb"\x1b\[[0-9;]*m", b"", screen)  # without colours
    assert b"+- GPU 0 (CUDA 1) . A100" in plain  # the panel border and title, in ASCII
    assert re.search(rb"UTIL #+ ", plain)  # a bar
    assert b"Traceback" not in screen
