"""--help: every command shows real examples and its exit status, all from gputop.cli.HELP_EXTRAS,
and every exit status it documents is one the command returns: each is produced here (the
simulator's boxes, a scenario whose driver hangs, a full disk, signals, a fake Prometheus)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gputop import exits
from gputop.argtypes import (
    INTERVAL_BOUNDS_HELP,
    TIMEOUT_BOUNDS_HELP,
    interval_milliseconds,
    interval_seconds,
    positive_int,
    timeout_seconds,
)
from gputop.cli import HELP_EXTRAS, NO_DRIVER, SUBCOMMANDS, build_parser, epilog, main
from gputop.errors import DriverTimeout, GputopError
from gputop.fleet import model as fleet_model
from gputop.fleet.client import PrometheusError
from tests.fleet.hostile_prometheus import FakeSeries, drip, fleet_answers, hostile_prometheus
from tests.pty_terminal import ROOT, clean_env

# What an option of each bounded type must say in its help.
RANGE_TEXT: dict[object, str] = {
    interval_seconds: INTERVAL_BOUNDS_HELP,
    timeout_seconds: TIMEOUT_BOUNDS_HELP,
    interval_milliseconds: "100 to 86400000",
    positive_int: "1 or more",
}


def parsers() -> dict[str, argparse.ArgumentParser]:
    """Every parser by command name ("" for gputop itself)."""
    parser = build_parser()
    (subs,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **subs.choices}


def help_of(name: str, columns: int = 100) -> str:
    """``gputop NAME --help`` on a terminal ``columns`` wide (argparse reads COLUMNS)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", str(columns))
        return parsers()[name].format_help()


def shown_options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if action.option_strings and action.help is not argparse.SUPPRESS:
            yield action


COMMANDS = list(HELP_EXTRAS)


def test_every_command_has_examples_and_exit_codes() -> None:
    assert ["", *SUBCOMMANDS] == COMMANDS
    for extras in HELP_EXTRAS.values():
        assert extras.examples and extras.exit_codes
        codes = [code for code, _ in extras.exit_codes]
        assert codes == sorted(set(codes))


@pytest.mark.parametrize("name", COMMANDS)
def test_help_ends_with_the_examples_and_the_exit_status(name: str) -> None:
    text = help_of(name)
    assert text.endswith(epilog(name) + "\n")
    assert "\nexamples:\n" in text and "\nexit status:\n" in text
    for command, _ in HELP_EXTRAS[name].examples:
        assert f"\n  {command}\n" in text
    for code, meaning in HELP_EXTRAS[name].exit_codes:
        assert f"\n  {code:<5}{meaning.split()[0]}" in text


@pytest.mark.parametrize("name", COMMANDS)
def test_the_epilog_keeps_its_layout_at_any_width(name: str) -> None:
    narrow, wide = help_of(name, 50), help_of(name, 200)
    assert narrow.endswith(epilog(name) + "\n") and wide.endswith(epilog(name) + "\n")
    assert str(parsers()[name].description) in narrow
    assert all(len(line) <= 79 for line in epilog(name).splitlines())


def example_argv(command: str) -> list[str]:
    """The gputop arguments of an example: without VAR=value before it, nor a pipe or a
    redirection after it."""
    words = shlex.split(command)
    while "=" in words[0]:
        words.pop(0)
    assert words[0] == "gputop", command
    argv = words[1:]
    for i, word in enumerate(argv):
        if word in ("|", "||", "&&", ">", ";"):
            return argv[:i]
    return argv


@pytest.mark.parametrize(
    ("name", "command"),
    [(name, command) for name in COMMANDS for command, _ in HELP_EXTRAS[name].examples],
)
def test_every_example_is_a_valid_command_line(name: str, command: str) -> None:
    args = build_parser().parse_args(example_argv(command))
    assert args.command == (name or None)


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_states_its_range_and_default(name: str) -> None:
    for action in shown_options(parsers()[name]):
        text = " ".join(str(action.help).split())
        wanted = RANGE_TEXT.get(action.type)
        assert wanted is None or wanted in text, (action.option_strings, text)
        stored = action.default not in (None, False, argparse.SUPPRESS, "")
        if stored or action.const not in (None, True):
            assert "default" in text, (action.option_strings, text)


def test_fleet_help_does_not_offer_what_fleet_refuses() -> None:
    assert {"fleet"} == NO_DRIVER
    text = help_of("fleet")
    assert "[--demo" not in text and "--demo [NAME]" not in text and "--scenario" not in text
    assert "data source" not in text
    assert "--timeout SEC" in text and TIMEOUT_BOUNDS_HELP in " ".join(text.split())
    assert "--demo [NAME]" in help_of("export")  # the others still list them


@pytest.mark.parametrize(
    "argv",
    [("fleet", "--demo", "--once"), ("fleet", "--scenario", "x.toml"), ("--demo", "fleet")],
)
def test_fleet_still_refuses_demo_in_one_line(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(list(argv)) == exits.EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gputop: fleet reads Prometheus, not a driver: ")
    assert captured.err.count("\n") == 1


def test_export_help_says_how_to_install_prometheus_client() -> None:
    text = help_of("export")
    assert "prometheus-client" in text
    assert "  pipx inject gputop-nv prometheus-client\n" in text
    assert "  pip install '.[export]'\n" in text
    assert "gputop[export]" not in text  # the PyPI "gputop" is another project
    assert "PORT 0 to 65535" in " ".join(text.split())  # --listen: a range, though no type


def test_the_exit_statuses_are_the_ones_the_code_uses() -> None:
    """The code that returns them outside exits.py (errors, fleet model) agrees with the table."""
    assert GputopError.exit_code == exits.EXIT_USAGE
    assert DriverTimeout.exit_code == exits.EXIT_TIMEOUT
    assert PrometheusError.exit_code == exits.EXIT_FAILURE
    assert (fleet_model.EXIT_OK, fleet_model.EXIT_STUCK, fleet_model.EXIT_BLIND) == (
        exits.EXIT_OK,
        exits.EXIT_FLEET_STUCK,
        exits.EXIT_FLEET_BLIND,
    )
    assert fleet_model.EXIT_STUCK_AND_BLIND == exits.EXIT_FLEET_STUCK_AND_BLIND


# -- every documented exit status, produced ------------------------------------------------------

HUNG = (
    'name = "hung"\n[[gpu]]\nname = "Hung GPU"\ncount = 2\n'
    '[[fault]]\ncall = "nvmlDeviceGetPowerUsage"\nkind = "hang"\ngpu = 1\n'
)
CRASH = HUNG.replace('"hang"', '"crash"')  # its driver process dies in that call, every time
# The driver hangs from the start: a one-shot waits its whole --timeout (a signal ends it).
QUICK, LONG = ("--timeout", "1"), ("--timeout", "60")
TERM, HUP, INT = signal.SIGTERM, signal.SIGHUP, signal.SIGINT

# (command, status, gputop's arguments, signal to send once it runs or None, stdout /dev/full)
RUNS: list[tuple[str, int, tuple[str, ...], int | None, bool]] = [
    ("", 0, ("--demo", "--once"), None, False),
    ("", 1, ("--demo", "--once"), None, True),
    ("", 2, ("--scenario", "/nonexistent.toml", "--once"), None, False),
    ("", 3, ("--scenario", "HUNG", "--json", *QUICK), None, False),
    ("", 3, ("--scenario", "CRASH", "--once", *QUICK), None, False),
    ("", 129, ("--scenario", "HUNG", "--once", *LONG), HUP, False),
    ("", 130, ("--scenario", "HUNG", "--once", *LONG), INT, False),
    ("", 143, ("--scenario", "HUNG", "--once", *LONG), TERM, False),
    ("doctor", 0, ("doctor", "--demo=dgx"), None, False),
    ("doctor", 1, ("doctor", "--demo=faults"), None, False),
    ("doctor", 2, ("doctor", "--demo", "--dev-dir", "/nonexistent"), None, False),
    ("doctor", 3, ("doctor", "--scenario", "HUNG", *QUICK), None, False),
    ("doctor", 143, ("doctor", "--scenario", "HUNG", *LONG), TERM, False),
    ("query", 0, ("query", "--demo", "--query-gpu=index,name"), None, False),
    ("query", 1, ("query", "--demo", "--query-gpu=index"), None, True),
    ("query", 2, ("query", "--demo", "--query-gpu=index", "-f", "/nonexistent/x"), None, False),
    (
        "query",
        3,
        ("query", "--scenario", "HUNG", "--query-gpu=index,power.draw", *QUICK),
        None,
        False,
    ),
    ("query", 130, ("query", "--demo", "--query-gpu=index", "-l", "1"), INT, False),
    ("dmon", 0, ("dmon", "--demo", "-c", "1"), None, False),
    ("dmon", 1, ("dmon", "--demo", "-c", "1"), None, True),
    ("dmon", 2, ("dmon", "--demo", "-s", "z"), None, False),
    ("dmon", 3, ("dmon", "--scenario", "HUNG", "-c", "1", *QUICK), None, False),
    ("dmon", 129, ("dmon", "--demo"), HUP, False),
    ("export", 0, ("export", "--demo", "--listen", "127.0.0.1:0"), TERM, False),
    ("export", 2, ("export", "--demo", "--listen", "127.0.0.1:99999"), None, False),
    ("export", 129, ("export", "--demo", "--listen", "127.0.0.1:0"), HUP, False),
    ("export", 130, ("export", "--demo", "--listen", "127.0.0.1:0"), INT, False),
    ("web", 2, ("web", "--demo", "--listen", "127.0.0.1:99999"), None, False),
]
# fleet reads no driver: its statuses come from a fake Prometheus (test_fleet_exit_status).
FLEET_RUNS = [0, 1, 2, 4, 5, 6, 143]
# web starts no process of its own until a browser connects: tests/web/test_web_server.py
# ends it with each signal once it serves (SIGTERM: 0, as export).
WEB_RUNS = [0, 129, 130]
# A signal's status is main()'s for every command but export and web (their own): gputop itself
# shows all three, each other command at least one.
SIGNAL_CODES = {exits.signal_exit(s) for s in (TERM, HUP, INT)}


def produced() -> set[tuple[str, int]]:
    pairs = {(name, code) for name, code, *_ in RUNS} | {("fleet", c) for c in FLEET_RUNS}
    pairs |= {("web", c) for c in WEB_RUNS}
    for name in COMMANDS:
        if name not in ("export", "web") and any(n == name and c in SIGNAL_CODES for n, c in pairs):
            pairs |= {(name, c) for c in SIGNAL_CODES}
    return pairs


def test_every_documented_exit_status_is_produced_below() -> None:
    documented = {(name, code) for name in COMMANDS for code, _ in HELP_EXTRAS[name].exit_codes}
    assert documented == produced()


def gputop(argv: tuple[str, ...], *, send: int | None, full: bool) -> tuple[int, str]:
    """``python -m gputop ARGV``: its exit status and stderr. With ``send``, the signal once it
    runs (it has started a process of its own: its handlers are in place by then)."""
    with contextlib.ExitStack() as stack:
        stdout = stack.enter_context(open("/dev/full" if full else os.devnull, "w"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "gputop", *argv],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            env={**clean_env(), "COLUMNS": "200"},
            cwd=ROOT,
        )
        if send is not None:
            wait_for_a_child(proc)
            proc.send_signal(send)
        _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def wait_for_a_child(proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not psutil.Process(proc.pid).children():
        assert proc.poll() is None and time.monotonic() < deadline, "no child started"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("name", "status", "argv", "send", "full"),
    RUNS,
    ids=[f"{n or 'gputop'}-{s}{'-crash' if 'CRASH' in a else ''}" for n, s, a, *_ in RUNS],
)
def test_exit_status(
    name: str,
    status: int,
    argv: tuple[str, ...],
    send: int | None,
    full: bool,
    tmp_path: Path,
) -> None:
    assert status in {code for code, _ in HELP_EXTRAS[name].exit_codes}
    scenarios = {"HUNG": tmp_path / "hung.toml", "CRASH": tmp_path / "crash.toml"}
    scenarios["HUNG"].write_text(HUNG)
    scenarios["CRASH"].write_text(CRASH)
    argv = tuple(str(scenarios[a]) if a in scenarios else a for a in argv)
    code, err = gputop(argv, send=send, full=full)
    assert code == status, err
    assert "Traceback" not in err and err.count("\n") <= 1, err


def fleet_series(*, stuck: bool, stale: bool) -> dict[str, list[FakeSeries]]:
    """One gputop host, "a": with a stuck process or not, its readings fresh or minutes old."""
    now = time.time()
    target = {"job": "gputop", "instance": "a:9400"}
    host = {**target, "hostname": "a"}
    uuid = {"UUID": "GPU-a-0"}
    return {
        "up": [(target, "1")],
        "scraped": [(target, str(now - (600 if stale else 1)))],
        "known": [(host, "1")],
        "used": [({**host, "gpu": "0", **uuid, "modelName": "H100"}, "1024")],
        "used_by_uuid": [(uuid, "1024")],
        "free": [(uuid, "3072")],
        "info": [(host, "1")],
        "stuck": [({**target, "state": "holder"}, "1")] if stuck else [],
        "age": [(target, "0.5")],
    }


@pytest.mark.parametrize(
    ("stuck", "stale", "status"),
    [(False, False, 0), (True, False, 4), (False, True, 5), (True, True, 6)],
)
def test_fleet_exit_status(
    stuck: bool, stale: bool, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    with hostile_prometheus(fleet_answers(fleet_series(stuck=stuck, stale=stale))) as fake:
        code = main(["fleet", "--once", "--prometheus", fake.url])
    err = capsys.readouterr().err
    assert code == status, err
    assert status in {c for c, _ in HELP_EXTRAS["fleet"].exit_codes}


@pytest.mark.parametrize(
    ("argv", "status"),
    [
        (("--prometheus", "ftp://prometheus"), exits.EXIT_USAGE),
        (("--prometheus", "http://127.0.0.1:1"), exits.EXIT_FAILURE),  # refused
    ],
)
def test_fleet_cannot_ask(
    argv: tuple[str, ...], status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", "--once", *argv]) == status
    assert capsys.readouterr().err.count("\n") == 1


def test_fleet_ended_by_a_signal() -> None:
    with hostile_prometheus(drip(b"{}", whole_head=False)) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gputop", "fleet", "--once", "--prometheus", fake.url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**clean_env(), "COLUMNS": "200"},
            cwd=ROOT,
        )
        deadline = time.monotonic() + 30
        while not fake.asked:  # it waits for the answer: its handlers are in place
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
