"""Fixtures for the command tests: the CLI on a simulated box (tests/conftest.py), golden files."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.engine.source import Source

GOLDEN = Path(__file__).parent / "golden"
UPDATE_ENV = "GPUTOP_UPDATE_GOLDEN"  # set to 1 to rewrite the golden files (then review them)

# Stand-in PIDs of the shipped scenarios -> the process names a golden run shows.
FAKE_NAMES = {5048213: "python", 5048214: "python", 5051377: "/usr/bin/python3", 5061001: "python"}


@dataclass
class Result:
    """What one CLI run printed."""

    rc: int
    out: str
    err: str


@pytest.fixture
def run_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[..., Result]:
    """run_cli(source, "query", "--query-gpu=index"): gputop.cli.main on that source.

    Every command gets ``source``: query and dmon look source_from_args up in their modules,
    --once, --json and doctor import it from gputop.sources when they run.
    """
    import gputop.commands.dmon
    import gputop.commands.query
    import gputop.sources

    monkeypatch.setattr(gputop.commands.query, "process_name", FAKE_NAMES.get)

    def run(source: Source | None, *argv: str) -> Result:
        def opened(args: object, **_options: object) -> Source:
            if source is None:
                raise AssertionError("the source must not be opened")
            return source

        monkeypatch.setattr(gputop.commands.query, "source_from_args", opened)
        monkeypatch.setattr(gputop.commands.dmon, "source_from_args", opened)
        monkeypatch.setattr(gputop.sources, "source_from_args", opened)
        rc = main(list(argv))
        captured = capsys.readouterr()
        return Result(rc, captured.out, captured.err)

    return run


def check_golden(name: str, text: str) -> None:
    """Compare with tests/commands/golden/<name> (rewrite it when GPUTOP_UPDATE_GOLDEN=1)."""
    path = GOLDEN / name
    if os.environ.get(UPDATE_ENV) == "1" or not path.exists():
        path.write_text(text, encoding="utf-8")
        if os.environ.get(UPDATE_ENV) != "1":
            pytest.fail(f"golden file {name} was missing: written, review it and run again")
    assert text == path.read_text(encoding="utf-8"), f"differs from golden/{name}"
