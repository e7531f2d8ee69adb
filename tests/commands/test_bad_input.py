"""Bad input ends in one line naming the problem and exit 2, never a traceback.

Scenario files that are not files, not readable, not text or not TOML; and --demo/--scenario
given before or after a subcommand's name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def gputop(
    *argv: str, cwd: Path | None = None, user: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m gputop ARGV``, as ``user`` (via setpriv) when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP", "TEXTUAL"))}
    env["PYTHONPATH"] = str(ROOT)
    prefix: list[str] = []
    if user is not None:
        prefix = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--clear-groups"]
        # setpriv starts the interpreter from root's own folder, which that user could not
        # start again for a driver process: the scenario is read in gputop's process instead.
        env["GPUTOP_IN_PROCESS"] = "1"
    return subprocess.run(
        [*prefix, sys.executable, "-m", "gputop", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def _binary(path: Path) -> None:
    path.write_bytes(b"\x88\x00\xfe" + bytes(range(256)) * 2)


def _utf16(path: Path) -> None:
    path.write_bytes("[[gpu]]\n".encode("utf-16"))


def _directory(path: Path) -> None:
    path.mkdir()


def _missing(path: Path) -> None:
    pass


def _not_toml(path: Path) -> None:
    path.write_text("[[gpu]\n")


def _wrong_type(path: Path) -> None:
    path.write_text('[[gpu]]\ncount = "two"\n')


BAD_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "binary": (_binary, "not UTF-8 text (byte 0x88 at offset 0)"),
    "utf16": (_utf16, "not UTF-8 text (byte 0xff at offset 0"),
    "directory": (_directory, "is a directory"),
    "missing": (_missing, "no such file (shipped: demo, dgx, faults, flaky, mig, sick)"),
    "not-toml": (_not_toml, "not valid TOML: Expected ']]' at the end of an array declaration"),
    "wrong-type": (_wrong_type, "a value has the wrong type"),
}


def assert_one_clear_line(result: subprocess.CompletedProcess[str], name: str, reason: str) -> None:
    """Exit 2, nothing on stdout, one stderr line naming the file and the reason."""
    assert "Traceback" not in result.stderr
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    prefix = (
        f"gputop: no scenario {name!r}: "
        if "no such file" in reason
        else f"gputop: scenario {name}: "
    )
    assert lines[0].startswith(prefix), lines[0]
    assert reason in lines[0]


@pytest.mark.parametrize("command", [["--once"], ["doctor"]], ids=["once", "doctor"])
@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_a_bad_scenario_file_is_one_line_and_exit_2(
    tmp_path: Path, kind: str, command: list[str]
) -> None:
    make, reason = BAD_FILES[kind]
    make(tmp_path / "f.toml")
    result = gputop("--scenario", "f.toml", *command, cwd=tmp_path)
    assert_one_clear_line(result, "f.toml", reason)


def test_a_non_utf8_file_names_the_first_bad_byte(tmp_path: Path) -> None:
    (tmp_path / "f.toml").write_bytes(b'name = "caf\xe9"\n')
    result = gputop("--scenario", "f.toml", "--once", cwd=tmp_path)
    assert_one_clear_line(result, "f.toml", "not UTF-8 text (byte 0xe9 at offset 11)")


def test_a_json_scenario_that_is_not_json(tmp_path: Path) -> None:
    (tmp_path / "f.json").write_text("{gpu")
    result = gputop("--scenario", "f.json", "--once", cwd=tmp_path)
    assert_one_clear_line(result, "f.json", "not valid JSON: ")


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    (tmp_path / "f.toml").write_bytes(b"\xef\xbb\xbf[[gpu]]\nname = 'BOM GPU'\n")
    result = gputop("--scenario", "f.toml", "--once", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "BOM GPU" in result.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="needs setpriv (util-linux)")
def test_an_unreadable_file_says_permission_denied(tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # nobody must reach the file to be refused it
    path = tmp_path / "f.toml"
    path.write_text("[[gpu]]\n")
    path.chmod(0o000)
    for command in (["--once"], ["doctor"]):
        result = gputop("--scenario", str(path), *command, user="nobody")
        assert_one_clear_line(result, str(path), "permission denied")


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "box.toml"
    path.write_text('name = "box"\n[[gpu]]\nname = "Scenario GPU"\ncount = 3\n')
    return path


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_doctor_uses_the_scenario_given_before_or_after_its_name(
    scenario: Path, before: bool
) -> None:
    argv = (
        ["--scenario", str(scenario), "doctor"]
        if before
        else ["doctor", "--scenario", str(scenario)]
    )
    result = gputop(*argv)
    assert result.returncode == 0, result.stderr
    assert "(SIMULATED)" in result.stdout
    assert result.stdout.count("Scenario GPU") == 3


@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_doctor_uses_the_demo_given_before_or_after_its_name(before: bool) -> None:
    argv = ["--demo", "dgx", "doctor"] if before else ["doctor", "--demo", "dgx"]
    result = gputop(*argv)
    assert "Traceback" not in result.stderr
    assert "(SIMULATED)" in result.stdout
    assert "GPU 7" in result.stdout  # the dgx scenario's eight GPUs


def test_a_bad_scenario_before_the_subcommand_is_not_ignored(tmp_path: Path) -> None:
    (tmp_path / "f.toml").mkdir()
    result = gputop("--scenario", "f.toml", "doctor", cwd=tmp_path)
    assert_one_clear_line(result, "f.toml", "is a directory")
