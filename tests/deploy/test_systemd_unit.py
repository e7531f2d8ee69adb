"""docs/gputop-export.service: its ExecStart (and the alternatives it offers in comments) is a
`gputop export` command line our parser accepts, listening where a remote Prometheus reaches it;
`systemd-analyze verify` accepts the unit when systemd is there."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.cli import build_parser
from gputop.commands.export import parse_listen
from tests.export.conftest import REPO

UNIT = REPO / "docs" / "gputop-export.service"


def _exec_starts() -> list[list[str]]:
    """Every ExecStart=, commented alternatives included, as argv."""
    found = []
    for line in UNIT.read_text().splitlines():
        text = line.removeprefix("#").strip()
        if text.startswith("ExecStart="):
            found.append(shlex.split(text.removeprefix("ExecStart=")))
    return found


def test_every_exec_start_is_a_gputop_export_command_line_we_accept() -> None:
    starts = _exec_starts()
    assert len(starts) == 2
    for argv in starts:
        assert Path(argv[0]).name == "gputop"
        args = build_parser().parse_args(argv[1:])
        assert args.command == "export"


def test_the_service_listens_for_a_remote_prometheus() -> None:
    [active] = [
        shlex.split(line.removeprefix("ExecStart="))
        for line in UNIT.read_text().splitlines()
        if line.startswith("ExecStart=")
    ]
    args = build_parser().parse_args(active[1:])
    listen = parse_listen(args.listen)
    assert not listen.loopback and listen.port == 9400
    text = UNIT.read_text()
    assert "IPAddressAllow=" in text and "--web-config-file" in text  # how to close it again


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (the parser checks above still ran)")
    # verify wants ExecStart's program to exist: point it at this environment's gputop
    gputop = Path(sys.executable).with_name("gputop")
    if not gputop.exists():
        pytest.skip(f"no gputop script beside {sys.executable}")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace("/usr/local/bin/gputop", str(gputop)))
    done = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    complaints = [line for line in (done.stdout + done.stderr).splitlines() if UNIT.name in line]
    assert done.returncode == 0 and complaints == [], done.stdout + done.stderr
