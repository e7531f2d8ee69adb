"""Where the one-shots' output goes wrong: a stdout that cannot encode a name, a reader that leaves.

- ``--json`` and ``query --format=json`` on a stdout that is not UTF-8 (PYTHONIOENCODING=ascii,
  an ISO-8859-1 terminal, the C locale without coercion) write the same JSON in ASCII, with
  ``\\uXXXX`` escapes, instead of failing on a real process named ``€``.
- ``doctor``, ``--json`` and ``--once`` keep their verdict as their exit code when the pipe they
  write to is closed before they write (``doctor | head -c1``): no line, no exit 0 or 1 instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.engine.spawn import PY
from tests.pty_terminal import ROOT

CLI = (sys.executable, "-m", "gputop")
EURO = "\u20ac"

# A real process whose name (PR_SET_NAME) and last argument are the euro sign.
NAMED = """
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)  # PR_SET_NAME
print("ready", flush=True)
time.sleep(120)
"""

# Each way a stdout ends up unable to write UTF-8.
NOT_UTF8 = {
    "PYTHONIOENCODING=ascii": {"PYTHONIOENCODING": "ascii"},
    "an ISO-8859-1 terminal": {"PYTHONIOENCODING": "latin-1"},
    "the C locale, not coerced": {"LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"},
}


@dataclass(frozen=True)
class EuroBox:
    scenario: Path
    pid: int


@pytest.fixture(scope="module")
def euro_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EuroBox]:
    """A scenario listing the real process named € on GPU 0 (a GPU named with € too)."""
    # argv[0] too (query's process_name): the same interpreter under a name with € in it
    argv = [f"python{EURO}", *PY[1:], NAMED, EURO]
    proc = subprocess.Popen(argv, executable=PY[0], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        gpu = {
            "name": f"NVIDIA A100 {EURO}",
            "memory_total_mib": 81920,
            "processes": [{"pid": proc.pid, "used_memory_mib": 4096}],
        }
        path = tmp_path_factory.mktemp("euro") / "euro.json"
        path.write_text(json.dumps({"name": "euro", "gpu": [gpu]}))
        yield EuroBox(path, proc.pid)
    finally:
        proc.kill()
        proc.wait()


def gputop_env(**extra: str) -> dict[str, str]:
    drop = ("GPUTOP", "TEXTUAL", "LC_", "LANG", "PYTHONIOENCODING", "PYTHONUTF8", "NO_COLOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return {**env, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", **extra}


def gputop(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*CLI, *argv], capture_output=True, env=env, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("setting", NOT_UTF8)
def test_json_on_a_stdout_without_unicode_is_the_same_json_in_ascii(
    euro_box: EuroBox, setting: str
) -> None:
    done = gputop(
        "--scenario", str(euro_box.scenario), "--json", env=gputop_env(**NOT_UTF8[setting])
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == b""
    done.stdout.decode("ascii")  # raises on any byte above 127
    assert b"\\u20ac" in done.stdout
    document = json.loads(done.stdout)
    (row,) = [r for r in document["processes"] if r["pid"] == euro_box.pid]
    assert row["info"]["name"] == EURO
    assert row["info"]["cmdline"][-1] == EURO
    assert document["gpus"][0]["name"] == f"NVIDIA A100 {EURO}"


def test_json_on_a_utf8_stdout_stays_readable(euro_box: EuroBox) -> None:
    done = gputop("--scenario", str(euro_box.scenario), "--json", env=gputop_env())
    assert done.returncode == 0, done.stderr
    assert EURO.encode() in done.stdout and b"\\u20ac" not in done.stdout
    assert json.loads(done.stdout)["gpus"][0]["name"] == f"NVIDIA A100 {EURO}"


@pytest.mark.parametrize("setting", NOT_UTF8)
def test_query_json_lines_on_a_stdout_without_unicode_are_ascii(
    euro_box: EuroBox, setting: str
) -> None:
    scenario = ("--scenario", str(euro_box.scenario))
    for argv in (
        ("query", *scenario, "--query-gpu=index,name", "--format=json"),
        ("query", *scenario, "--query-compute-apps=pid,process_name", "--format=json"),
    ):
        done = gputop(*argv, env=gputop_env(**NOT_UTF8[setting]))
        assert done.returncode == 0, done.stderr
        done.stdout.decode("ascii")
        (line,) = done.stdout.splitlines()
        record = json.loads(line)
        assert EURO in record.get("name", record.get("process_name"))


def test_csv_that_cannot_be_encoded_is_still_one_line_and_exit_1(euro_box: EuroBox) -> None:
    """CSV has no escapes: the refusal stays (JSON is the way out, and the line says how)."""
    done = gputop(
        "query",
        "--scenario",
        str(euro_box.scenario),
        "--query-gpu=name",
        "--format=csv",
        env=gputop_env(PYTHONIOENCODING="ascii"),
    )
    assert done.returncode == 1
    (line,) = done.stderr.decode().splitlines()
    assert line.startswith("gputop: cannot write ") and "encoding (ascii)" in line


def closed_pipe_run(*argv: str) -> tuple[int, bytes]:
    """Run gputop with stdout on a pipe whose reader has already gone; (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before gputop writes anything: its first write meets EPIPE
    try:
        done = subprocess.run(
            [*CLI, *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            env=gputop_env(),
            cwd=ROOT,
            timeout=60,
        )
    finally:
        os.close(write_end)
    return done.returncode, done.stderr


def verdict(*argv: str) -> int:
    """The exit code with a reader that reads everything."""
    return gputop(*argv, env=gputop_env()).returncode


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("doctor", "--demo"), 1),  # the demo has a stuck holder
        (("--demo", "faults", "--json", "--timeout", "1"), 3),  # GPU 3's slow call
        (("--demo", "faults", "--once", "--timeout", "1"), 3),
        (("--demo", "--json"), 0),  # `--json | head -1` on a healthy box: nothing, 0
    ],
    ids=["doctor", "json-timeout", "once-timeout", "json-healthy"],
)
def test_a_closed_pipe_keeps_the_verdict_as_exit_code(argv: tuple[str, ...], expected: int) -> None:
    assert verdict(*argv) == expected
    code, stderr = closed_pipe_run(*argv)
    assert code == expected, stderr
    assert b"Traceback" not in stderr and b"Broken pipe" not in stderr
    assert b"Exception ignored" not in stderr


def test_doctor_into_head_c1_exits_with_its_verdict() -> None:
    """The shell's way: ``gputop doctor --demo | head -c1``; head may leave before or after."""
    doctor = subprocess.Popen(
        [*CLI, "doctor", "--demo"], stdout=subprocess.PIPE, env=gputop_env(), cwd=ROOT
    )
    assert doctor.stdout is not None
    head = subprocess.run(["head", "-c1"], stdin=doctor.stdout, capture_output=True, timeout=60)
    doctor.stdout.close()
    assert doctor.wait(timeout=60) == 1
    assert len(head.stdout) == 1


@pytest.mark.parametrize(
    "value",
    [EURO, "caf\u00e9", "\U0001f600 past the BMP", "\u4e2d\u6587", "\U0010ffff", "plain"],
)
def test_ascii_json_is_what_json_dumps_writes_in_ascii(value: str) -> None:
    from gputop.commands.json_out import ascii_json

    document = {"name": value, "list": [value, 1.5, None]}
    assert ascii_json(json.dumps(document, ensure_ascii=False)) == json.dumps(document)
