"""parse_args builds only the subcommand the command line names (issue 18: the dashboard starts
sooner without the commands' modules) and parses exactly as the whole parser does."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.cli import build_parser, parse_args
from tests.fresh import modules_after

ROOT = Path(__file__).resolve().parents[2]

SAME_AS_THE_WHOLE_PARSER = [
    [],
    ["--demo"],
    ["--demo=dgx", "--interval", "2", "--theme", "nord", "--readonly"],
    ["--once", "-c", "-p", "--demo"],
    ["--json", "--scenario", "f.toml"],
    ["--demo", "query"],
    ["--demo", "dgx", "doctor", "--dev-dir", "/tmp"],
    ["query", "--query-gpu", "index,name", "--demo"],
    ["dmon", "-c", "1", "-s", "pu", "--demo=dgx"],
    ["export", "--interval", "5", "--demo"],
    ["--theme", "query", "--once"],  # "query" is the theme here, not the command
    ["--interval", "0.5", "dmon", "-d", "2"],
]


@pytest.mark.parametrize("argv", SAME_AS_THE_WHOLE_PARSER)
def test_parse_args_is_the_whole_parser(argv: list[str]) -> None:
    assert parse_args(argv) == build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--interval", "0"],
        ["bogus"],
        ["--bogus"],
        ["query", "--bogus"],
        ["--interval", "0", "query"],
        ["dmon", "-c", "0"],
        ["--help"],
        ["query", "--help"],
        ["-h", "doctor"],
        ["--version"],
    ],
)
def test_parse_args_ends_as_the_whole_parser_does(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as whole:
        build_parser().parse_args(argv)
    expected = capsys.readouterr()
    with pytest.raises(SystemExit) as lazy:
        parse_args(argv)
    assert lazy.value.code == whole.value.code
    assert capsys.readouterr() == expected


def commands_loaded_by(argv: list[str]) -> set[str]:
    loaded = modules_after(f"from gputop.cli import parse_args\nparse_args({argv!r})")
    return {m for m in loaded if m.startswith("gputop.commands.")}


def test_the_dashboard_loads_no_command_module() -> None:
    assert commands_loaded_by(["--demo=dgx", "--interval", "1"]) == set()


def test_a_command_loads_its_own_module() -> None:
    loaded = commands_loaded_by(["doctor", "--demo"])
    assert "gputop.commands.doctor" in loaded
    assert not loaded & {"gputop.commands.dmon", "gputop.commands.export"}
