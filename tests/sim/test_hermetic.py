"""A simulated box never reads, lists or offers to signal a process of the real box (issue 35).

A real process holds /dev/nvidia0 open (the real file on a GPU box, a stand-in made there
elsewhere: ``host_gpu_holder``) while every simulated view runs as a user would run it. Each view
looks for holders in its own box's device folder, never in /dev: the holder's PID appears nowhere.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from gputop.engine.holders import scan_holders
from gputop.sim import devices
from gputop.sources import open_source
from gputop.ui.app import make_app
from tests.conftest import HostHolder
from tests.processes import gone_within
from tests.ui.data import visible_pids

ROOT = Path(__file__).resolve().parents[2]
PID_MAX_LIMIT = 4_194_304  # the kernel's largest pid_max: the shipped stand-ins are above it

# A box a user might write: one GPU, one busy training process that holds nothing stuck.
USER_SCENARIO = """
name = "mine"
[[gpu]]
name = "NVIDIA A100-SXM4-80GB"
memory_total_mib = 81920
util_gpu = 80
[[gpu.processes]]
pid = 5300001
name = "python"
used_memory_mib = 30000
sm_util = 70
"""


def gputop(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUTOP_DEMO", "NO_COLOR")}
    return subprocess.run(
        [sys.executable, "-m", "gputop", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**env, "COLUMNS": "200"},
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def user_scenario(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("scenario") / "mine.toml"
    path.write_text(USER_SCENARIO)
    return str(path)


@pytest.mark.parametrize(
    "argv",
    [
        ("--once", "--demo=dgx"),
        ("doctor", "--demo=dgx"),
        ("--once", "--demo=mig"),
        ("doctor", "--demo=mig"),
        ("--once", "--demo=faults"),
        ("doctor", "--demo=faults"),
        ("--once", "--demo=flaky"),
    ],
    ids=" ".join,
)
def test_shipped_scenarios_never_show_the_host_holder(
    host_gpu_holder: HostHolder, argv: tuple[str, ...]
) -> None:
    result = gputop(*argv)
    assert result.stdout, result.stderr
    assert not host_gpu_holder.named_in(result.stdout + result.stderr)
    assert f"PID {host_gpu_holder.pid} " not in result.stdout  # doctor's rows
    assert "[holder]" not in result.stdout  # --once shows no PID: none of these has a holder
    if argv[0] == "doctor":
        assert "kill" not in result.stdout  # no advice to signal anything (faults: memory only)
    if argv == ("doctor", "--demo=dgx"):
        assert result.returncode == 0, result.stdout  # nothing stuck: the host's job is not ours


@pytest.mark.parametrize("demo", ["dgx", "mig", "faults"])
def test_json_and_query_list_only_the_scenarios_processes(
    host_gpu_holder: HostHolder, demo: str
) -> None:
    listed = gputop("--json", f"--demo={demo}")
    pids = {p["pid"] for p in json.loads(listed.stdout)["processes"]}
    assert pids and all(pid > PID_MAX_LIMIT for pid in pids)  # stand-ins: never a real PID
    assert not host_gpu_holder.named_in(listed.stdout)
    query = gputop("query", f"--demo={demo}", "--query-compute-apps=pid,process_name")
    assert query.returncode == 0, query.stderr
    rows = [line.split(",") for line in query.stdout.splitlines()[1:]]
    assert rows and all(int(row[0]) > PID_MAX_LIMIT for row in rows)
    assert not host_gpu_holder.named_in(query.stdout)


@pytest.mark.parametrize("command", ["--once", "--json", "doctor"])
def test_a_user_written_scenario_never_shows_the_host_holder(
    host_gpu_holder: HostHolder, user_scenario: str, command: str
) -> None:
    result = gputop(command, "--scenario", user_scenario)
    assert result.returncode == 0, result.stdout + result.stderr  # doctor: nothing stuck
    own = "30000M" if command == "--once" else "5300001"  # gpustat's line shows no PID
    assert own in result.stdout  # the scenario's own process is there
    assert not host_gpu_holder.named_in(result.stdout + result.stderr)
    assert "kill" not in result.stdout and "[holder]" not in result.stdout
    if command == "--json":
        assert [p["pid"] for p in json.loads(result.stdout)["processes"]] == [5300001]


def test_the_api_demo_never_lists_the_host_holder(host_gpu_holder: HostHolder) -> None:
    code = "import json, gputop\ngputop.use_demo('dgx')\nprint(json.dumps(gputop.processes()))\n"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    pids = [p["pid"] for p in json.loads(result.stdout)]
    assert len(pids) == 40 and host_gpu_holder.pid not in pids
    assert not host_gpu_holder.named_in(result.stdout)


def test_the_exporter_on_a_sim_never_counts_the_host_holder(host_gpu_holder: HostHolder) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gputop", "export", "--demo=dgx", "--listen", "127.0.0.1:0"],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"serving (http://\S+/metrics)", proc.stdout.readline())
        assert found, "the exporter did not say where it serves"
        deadline = time.monotonic() + 30
        while True:
            with urllib.request.urlopen(found.group(1), timeout=10) as response:
                body = response.read().decode()
            if "gputop_process_gpu_memory_bytes{" in body or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
    stuck = [line for line in body.splitlines() if line.startswith("gputop_stuck_processes")]
    assert stuck and all(line.split()[-1] in ("0", "0.0") for line in stuck), stuck
    assert f'pid="{host_gpu_holder.pid}"' not in body
    assert not host_gpu_holder.named_in(body)


def test_the_dashboard_on_dgx_never_shows_the_host_holder(host_gpu_holder: HostHolder) -> None:
    source = open_source(demo="dgx", isolated=True)
    app = make_app(source, interval_s=0.2)
    seen: list[int] = []

    async def body(pilot: Pilot[Any]) -> None:
        deadline = time.monotonic() + 30
        # Two readings after the first with processes: the holder scan has run on each.
        ticks = 0
        while time.monotonic() < deadline:
            await pilot.pause(0.2)
            snap = app.snapshot
            if snap is not None and snap.processes:
                ticks += 1
                seen.extend(r.pid for r in snap.processes)
                if ticks >= 3:
                    break
        assert ticks >= 3, "the dashboard never showed the scenario's processes"
        seen.extend(visible_pids(app))

    async def main() -> None:
        async with app.run_test(size=(200, 60)) as pilot:
            await body(pilot)

    try:
        asyncio.run(main())
    finally:
        source.close()
    assert seen and host_gpu_holder.pid not in seen
    assert not app.main_screen.dev_dir().startswith("/dev/")
    assert os.path.realpath(app.main_screen.dev_dir()) != "/dev"


def test_a_folder_left_by_a_dead_maker_is_swept(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(done.stdout)  # exited and reaped
    left = tmp_path / f"{devices.PREFIX}{dead}-abc"
    (left / "dev").mkdir(parents=True)
    live = tmp_path / f"{devices.PREFIX}{os.getpid()}-def"
    live.mkdir()
    target = tmp_path / "not-ours"
    target.mkdir()
    link = tmp_path / f"{devices.PREFIX}{dead}-link"
    link.symlink_to(target)
    devices.sweep(str(tmp_path))
    assert not left.exists()
    assert live.is_dir()
    assert link.is_symlink() and target.is_dir()  # a link under our name is never followed


def test_the_isolated_sim_says_its_own_folder(host_gpu_holder: HostHolder) -> None:
    source = open_source(demo="dgx", isolated=True)
    try:
        source.snapshot()  # the driver process has said where its folder is
        dev = source.dev_dir
        child = source.pid
        assert os.path.isdir(dev) and Path(dev).parent.name.startswith(devices.PREFIX)
        assert sorted(os.listdir(dev))[:2] == ["nvidia-uvm", "nvidia0"]
        assert host_gpu_holder.pid not in scan_holders(dev).holders
    finally:
        source.close()
    assert child is not None and gone_within(child, 5)
    assert not Path(dev).parent.exists()  # its driver process removed it before it left


def test_a_sim_that_crashes_before_it_answers_never_falls_back_to_dev(
    host_gpu_holder: HostHolder, tmp_path: Path
) -> None:
    from gputop.engine.isolated import DriverConfig, IsolatedSource

    path = tmp_path / "crashes.toml"
    path.write_text(
        'name = "crashes at start"\n'
        '[[gpu]]\nname = "NVIDIA A100-SXM4-80GB"\nmemory_total_mib = 81920\n'
        '[[fault]]\ncall = "nvmlInitWithFlags"\nkind = "crash"\n'
    )
    source = IsolatedSource(DriverConfig(scenario=str(path)))
    try:
        dev = source.dev_dir  # its driver process died before saying where its folder is
    finally:
        source.close()
    assert os.path.realpath(dev) != "/dev" and not dev.startswith("/dev/nvidia")
    assert host_gpu_holder.pid not in scan_holders(dev).holders
