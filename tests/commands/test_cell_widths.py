"""The one-shot views count terminal cells: a CJK user or GPU name, a command of combining marks
and a zero-width name, on real processes, never push a column, wrap a line or hide a character.

The real CLI runs in a subprocess on tests/wide.py's box (a user added for the test, real PIDs);
widths are measured with Rich's rules, which are the dashboard's and wcwidth's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from rich.cells import cell_len

from gputop.fleet.model import FREE_MARK, QUERIES
from tests.fleet.conftest import send, static_server
from tests.wide import CJK_GPU, WideBox, wide_box

CLI = (sys.executable, "-m", "gputop")


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WideBox]:
    with wide_box(tmp_path_factory.mktemp("wide")) as started:
        yield started


def gputop(*argv: str, columns: int, codes: tuple[int, ...] = (0,)) -> str:
    """The real CLI's stdout at a terminal ``columns`` wide (UTF-8); it must exit with ``codes``."""
    env = {**os.environ, "COLUMNS": str(columns), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode in codes, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def at_cell(line: str, marker: str, after: int = 0) -> int:
    """The terminal column (in cells) where ``marker`` starts on ``line`` (from character
    ``after`` on)."""
    return cell_len(line[: line.index(marker, after)])


@pytest.mark.parametrize("columns", [75, 60, 100, 44])
def test_once_lines_fit_the_terminal_in_cells(wide: WideBox, columns: int) -> None:
    out = gputop("--once", "-c", "-p", "-u", "--scenario", str(wide.scenario), columns=columns)
    lines = out.splitlines()
    assert len(lines) == 3  # the header and a line per GPU: nothing wrapped onto a line of its own
    assert all(cell_len(line) <= columns for line in lines), lines
    # The GPU names share one width in cells: the readings start in the same column.
    gpus = lines[1:]
    assert len({at_cell(line, " | ") for line in gpus}) == 1, gpus
    assert len({at_cell(line, "°C") for line in gpus}) == 1, gpus


def test_once_shows_the_wide_names_whole_and_the_invisible_one_escaped(wide: WideBox) -> None:
    out = gputop("--once", "-c", "-p", "-u", "--scenario", str(wide.scenario), columns=400)
    cjk_line, other = out.splitlines()[1:]
    assert CJK_GPU in cjk_line
    assert f"{wide.user}:sleep/{wide.cjk}(20480M)" in cjk_line  # the CJK user, whole
    assert f"Z\u0334\u0322\u031balgo/{wide.marks}(4096M)" in cjk_line  # comm, marks and all
    assert f"root:s\\u200bsh/{wide.zw}(2048M)" in other  # not "ssh"
    assert "\u200b" not in out


def test_once_demo_at_75_columns_never_wraps() -> None:
    for argv in (("--once",), ("--once", "-c", "-p", "-u", "-F", "-P")):
        out = gputop(*argv, "--demo", columns=75)
        assert all(cell_len(line) <= 75 for line in out.splitlines()), out


def test_doctor_names_the_stuck_zombie_escaped_with_its_cjk_part(wide: WideBox) -> None:
    out = gputop("doctor", "--scenario", str(wide.scenario), columns=75, codes=(1,))
    (line,) = [ln for ln in out.splitlines() if f"PID {wide.zombie} " in ln]
    assert line.endswith("  s\\u200bsh僵尸")  # the name it gave itself, the ZWSP made visible
    assert "\u200b" not in out
    assert "NVIDIA 计算卡 A100: used" in out


# -- the fleet's table ------------------------------------------------------------------------
HOSTS = {"gpu-node-01": "GPU-aaaa", "計算ノード二号": "GPU-bbbb", "n3": "GPU-cccc"}


def prometheus_answer(handler: BaseHTTPRequestHandler) -> None:
    """A Prometheus stand-in: three gputop hosts, one named in CJK, a GPU each."""
    promql = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)["query"][0]
    name = {q: n for n, q in QUERIES.items()}.get(promql, "")
    targets = [{"job": "gputop", "instance": f"{h}:9400", "hostname": h} for h in HOSTS]
    by_name = {
        "up": [(t, "1") for t in targets],
        "known": [(t, "1") for t in targets],
        "info": [(t, "1") for t in targets],
        "age": [(t, "1.5") for t in targets],
        # free memory comes in the memory query's answer, marked (gputop.fleet.model.FREE_MARK)
        "used": [
            ({**t, "gpu": "0", "UUID": HOSTS[t["hostname"]], "modelName": "A100"}, "1024")
            for t in targets
        ]
        + [({"UUID": uuid, FREE_MARK: "free"}, "1024") for uuid in HOSTS.values()],  # MiB
        "util": [({"UUID": uuid}, "50") for uuid in HOSTS.values()],
    }
    now = 1_700_000_000.0
    result = [{"metric": labels, "value": [now, value]} for labels, value in by_name.get(name, [])]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    send(handler, 200, json.dumps(body).encode(), "application/json")


def test_fleet_table_columns_line_up_under_a_cjk_host_name() -> None:
    with static_server(prometheus_answer) as server:
        out = gputop("fleet", "--once", "--prometheus", server.url, columns=120)
    lines = out.splitlines()
    header, rows = lines[0], {ln.split(" ")[0]: ln for ln in lines[1:] if ln.split(" ")[0] in HOSTS}
    assert rows.keys() == HOSTS.keys(), out
    # Each right-aligned column ends where its header ends, whatever the host's name is.
    for label, value in (("GPUS", " 1 "), ("UTIL", "50 %"), ("MEMORY", "1.0 / 2.0 GiB")):
        end = at_cell(header, label) + cell_len(label)
        ends = {at_cell(row, value, len(host)) + len(value.rstrip()) for host, row in rows.items()}
        assert ends == {end}, (label, out)
