"""`gputop fleet` against a real Prometheus scraping two gputop exporters (the demo and dgx
boxes under their own hostnames), a recorded dcgm-exporter (``Hostname`` label) and a target that
never answers. The exporters' own /metrics are the truth the fleet is checked against."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Any

from textual.widgets import DataTable

from gputop.fleet.client import Answer, PrometheusClient, RangeAnswer
from gputop.fleet.model import (
    HISTORY_POINTS,
    HISTORY_QUERIES,
    MIB,
    QUERIES,
    USED_BY_UUID,
    Fleet,
    FleetReader,
    host_label,
    processes_query,
    read_fleet,
    read_processes,
)
from gputop.ui.fleet.gpu_card import GpuCard
from gputop.ui.fleet.host_table import HostTable
from tests.export.conftest import REPO, http_get, samples
from tests.fleet.conftest import Lab


def fleet_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "fleet", *args],
        cwd=REPO,
        env=env or {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP_PROM")},
        capture_output=True,
        text=True,
        timeout=60,
    )


def scraped(lab: Lab, host: str, name: str) -> list[tuple[dict[str, str], float]]:
    return samples(http_get(f"http://{lab.targets[host]}/metrics"), name)


def rows_of(table: str) -> dict[str, list[str]]:
    """HOST -> the other cells of its line (split on runs of two spaces)."""
    lines = table.splitlines()
    assert lines[0].split() == [
        "HOST", "GPUS", "HEALTH", "UTIL", "MEMORY", "POWER", "TEMP", "STUCK", "UNATTR", "AGE"
    ]  # fmt: skip
    block = lines[: lines.index("")] if "" in lines else lines
    rows = {}
    for line in block[1:-1]:  # the last line sums up
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        rows[cells[0]] = cells[1:]
    return rows


def test_once_has_one_line_per_host_and_the_stuck_report(lab: Lab) -> None:
    done = fleet_cli("--once", "--prometheus", lab.url)
    assert done.returncode == 6, done.stderr  # box-a's stuck processes, the dead target
    rows = rows_of(done.stdout)
    dead = lab.targets["dead"]
    assert set(rows) == {"box-a", "box-b", "dcgm-node-7", "dcgm-node-8", dead}
    # the recorded dcgm-exporter: exact numbers (2 GPUs, util 87/12, 38012+2048 of 2x40536 MiB),
    # under its released label (Hostname) and its newer one (hostname)
    for node in ("dcgm-node-7", "dcgm-node-8"):
        assert rows[node][:8] == ["2", "ok", "50 %", "39.1 / 79.2 GiB", "401 W", "71°C", "-", "-"]
    assert rows[dead] == ["-", "-", "-", "-", "-", "-", "-", "-", "DOWN"]
    a, b = rows["box-a"], rows["box-b"]
    assert (a[0], b[0]) == ("4", "8")
    stuck_a = sum(v for _, v in scraped(lab, "box-a", "gputop_stuck_processes"))
    assert stuck_a > 0 and a[6] == str(int(stuck_a))
    assert b[6] == str(int(sum(v for _, v in scraped(lab, "box-b", "gputop_stuck_processes"))))
    for cells in (a, b, rows["dcgm-node-7"]):
        assert cells[-1].endswith(" s") and float(cells[-1][:-2]) < 10
    assert "5 hosts (1 down), 16 GPUs" in done.stdout
    report = done.stdout.split("Stuck processes across the fleet:\n")[1].splitlines()
    box_a = next(line for line in report if line.strip().startswith("box-a:"))
    for labels, value in scraped(lab, "box-a", "gputop_stuck_processes"):
        if value:
            assert f"{int(value)} {labels['state']}" in box_a
    for labels, value in scraped(lab, "box-a", "gputop_unattributed_memory_bytes"):
        assert f"{value / 1024**3:.1f} GiB unattributed on GPU {labels['gpu']}" in box_a
    assert not any(line.strip().startswith(("box-b:", "dcgm-node-")) for line in report)
    assert "not known (dcgm-exporter only, no gputop export): dcgm-node-7, dcgm-node-8" in (
        done.stdout
    )
    assert f"not known (target down): {dead}" in done.stdout


def test_json_matches_what_each_exporter_serves(lab: Lab) -> None:
    done = fleet_cli("--json", "--prometheus", lab.url)
    assert done.returncode == 6, done.stderr
    fleet = json.loads(done.stdout)
    hosts: dict[str, dict[str, Any]] = {h["name"]: h for h in fleet["hosts"]}
    assert fleet["schema"] == 1 and fleet["prometheus"] == lab.url
    assert fleet["host_count"] == 5 and fleet["gpu_count"] == 16
    for name in ("box-a", "box-b"):
        host = hosts[name]
        assert host["exporter"] == "gputop" and not host["down"]
        assert host["targets"] == [{"job": "gputop", "instance": lab.targets[name], "up": True}]
        fb = scraped(lab, name, "DCGM_FI_DEV_FB_FREE") + scraped(lab, name, "DCGM_FI_DEV_FB_USED")
        assert {g["uuid"] for g in host["gpus"]} == {labels["UUID"] for labels, _ in fb}
        assert all(host_label(labels) == name for labels, _ in fb)
        totals: dict[str, int] = {}
        for labels, value in fb:
            totals[labels["UUID"]] = totals.get(labels["UUID"], 0) + int(value) * MIB
        # used + free, each a whole MiB (floored): within 2 MiB of the exporter's own sum
        ours = {g["uuid"]: g["memory_total_bytes"] for g in host["gpus"]}
        assert all(abs(ours[uuid] - total) <= 2 * MIB for uuid, total in totals.items())
        assert host["memory_total_bytes"] == sum(ours.values())
        stuck = {
            labels["state"]: int(v) for labels, v in scraped(lab, name, "gputop_stuck_processes")
        }
        assert host["stuck_processes"] == stuck
        unattributed = scraped(lab, name, "gputop_unattributed_memory_bytes")
        assert host["unattributed"] == [
            {"gpu": labels["gpu"], "uuid": labels["UUID"], "bytes": int(v)}
            for labels, v in unattributed
        ]
        assert 0 <= host["age_s"] < 10
    assert hosts["box-a"]["unattributed_memory_bytes"] > 0
    assert hosts["dcgm-node-8"]["targets"] == [
        {"job": "dcgm", "instance": lab.targets["dcgm-main"], "up": True}
    ]
    assert hosts["dcgm-node-8"]["gpus"] == hosts["dcgm-node-7"]["gpus"]
    dcgm = hosts["dcgm-node-7"]
    assert dcgm["exporter"] == "dcgm-exporter"
    assert dcgm["targets"] == [{"job": "dcgm", "instance": lab.targets["dcgm"], "up": True}]
    assert [g["gpu"] for g in dcgm["gpus"]] == ["0", "1"]
    assert dcgm["gpus"][0] == {
        "gpu": "0",
        "uuid": "GPU-6c1a2b7e-31d4-5d0e-8f0a-1b2c3d4e5f60",
        "model": "NVIDIA A100-SXM4-40GB",
        "util_percent": 87.0,
        "memory_used_bytes": 38012 * MIB,
        "memory_free_bytes": 2524 * MIB,
        "memory_total_bytes": 40536 * MIB,
        "power_w": 312.456,
        "temperature_c": 71.0,
    }
    assert dcgm["util_percent_mean"] == 49.5
    assert dcgm["memory_used_bytes"] == (38012 + 2048) * MIB
    assert dcgm["power_w"] == 312.456 + 88.125
    assert dcgm["temperature_max_c"] == 71.0
    assert dcgm["stuck_processes"] is None and dcgm["unattributed_memory_bytes"] is None
    dead = hosts[lab.targets["dead"]]
    assert dead["down"] and dead["gpus"] == [] and dead["age_s"] is None
    assert fleet["stuck"] == [{"host": "box-a", "summary": fleet["stuck"][0]["summary"]}]


def test_the_url_can_come_from_the_environment(lab: Lab) -> None:
    env = {**os.environ, "GPUTOP_PROMETHEUS": lab.url}
    done = fleet_cli("--json", env=env)
    assert done.returncode == 6, done.stderr
    assert json.loads(done.stdout)["gpu_count"] == 16


def test_the_overview_shows_the_same_hosts(lab: Lab) -> None:
    from gputop.ui.fleet.app import FleetApp
    from tests.fleet.test_overview import header, run, table_hosts, until

    app = FleetApp(lab.fleet, interval_s=1.0, source=lab.url)

    async def body(app: FleetApp, pilot: Any) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 5, timeout_s=15)
        names = ["box-a", "box-b", "dcgm-node-7", "dcgm-node-8", lab.targets["dead"]]
        assert table_hosts(app) == sorted(names)
        assert "5 hosts (1 down)  16 GPUs" in header(app)

    run(app, body)


def test_the_overview_on_a_terminal_quits_on_q_and_on_sigterm(lab: Lab) -> None:
    from tests.pty_terminal import on_terminal

    with on_terminal("fleet", "--prometheus", lab.url, "--interval", "1") as term:
        term.wait_for(b"dcgm-node-8")
        term.wait_for(b"box-a")
        term.type(b"q")
        assert term.read_to_end() == 0
    with on_terminal("fleet", "--prometheus", lab.url) as term:
        term.wait_for(b"dcgm-node-8")
        term.proc.send_signal(signal.SIGTERM)
        assert term.read_to_end() == 128 + signal.SIGTERM
        assert b"\x1b[?1049l" in term.output  # the alternate screen was left


class CountingClient(PrometheusClient):
    def __init__(self, url: str) -> None:
        super().__init__(url, timeout_s=5.0)
        self.calls: list[str] = []
        self.promql: list[str] = []
        self.times: list[float | None] = []

    def query(
        self, promql: str, *, at: float | None = None, timeout_s: float | None = None
    ) -> Answer:
        self.calls.append("query")
        self.promql.append(promql)
        self.times.append(at)
        return super().query(promql, at=at, timeout_s=timeout_s)

    def query_range(self, promql: str, **kwargs: Any) -> RangeAnswer:
        self.calls.append("range")
        return super().query_range(promql, **kwargs)


def test_the_history_is_two_range_queries_for_the_whole_fleet_every_n_reads(lab: Lab) -> None:
    client = CountingClient(lab.url)
    reader = FleetReader(client, history_every=3)
    fleets = [reader() for _ in range(4)]
    ranges = [i for i, call in enumerate(client.calls) if call == "range"]
    assert len(ranges) == 2 * len(HISTORY_QUERIES) == 4  # on the first read and the fourth
    assert client.calls.count("query") == 4 * len(QUERIES)
    history = fleets[-1].history
    assert set(history) == {"box-a", "box-b", "dcgm-node-7", "dcgm-node-8"}
    # the recorded dcgm-exporter never changes: every point Prometheus has is its mean
    dcgm = history["dcgm-node-7"]
    assert len(dcgm.util_percent) == len(dcgm.memory_percent) == HISTORY_POINTS
    assert dcgm.util_percent[-1] == 49.5
    assert {v for v in dcgm.util_percent if v is not None} == {49.5}
    memory = 100 * (38012 + 2048) / (2 * 40536)
    assert all(abs(v - memory) < 1e-9 for v in dcgm.memory_percent if v is not None)
    # a gputop exporter's: the mean of what it serves now, within the demo's drift
    util = [v for _, v in scraped(lab, "box-b", "DCGM_FI_DEV_GPU_UTIL")]
    last = history["box-b"].util_percent[-1]
    assert last is not None and abs(last - sum(util) / len(util)) < 15
    assert all(0 <= v <= 100 for v in history["box-b"].memory_percent if v is not None)


def test_between_placements_the_overview_reads_memory_by_uuid_and_places_it_as_before(
    lab: Lab,
) -> None:
    client = CountingClient(lab.url)
    reader = FleetReader(client, history_every=100, place_every=5)
    fleets = [reader() for _ in range(3)]
    used = [q for q in client.promql if q in (QUERIES["used"], USED_BY_UUID)]
    assert used == [QUERIES["used"], USED_BY_UUID, USED_BY_UUID]

    def placed(fleet: Fleet) -> dict[str, list[tuple[str, str, str, bool]]]:
        return {
            h.name: [(g.gpu, g.uuid, g.model, g.memory_used_bytes is not None) for g in h.gpus]
            for h in fleet.hosts
        }

    assert placed(fleets[2]) == placed(fleets[0]) == placed(lab.fleet())
    assert all(g.memory_used_bytes for h in fleets[2].hosts for g in h.gpus)
    # A GPU the placement does not know (new since): its memory query is asked again in full.
    gone = next(iter(reader.placement))
    del reader.placement[gone]
    client.promql.clear()
    again = reader()
    assert [q for q in client.promql if q in (QUERIES["used"], USED_BY_UUID)] == [
        USED_BY_UUID,
        QUERIES["used"],
    ]
    assert gone in reader.placement
    assert placed(again) == placed(fleets[0])


def test_a_hosts_processes_are_what_its_exporter_serves(lab: Lab) -> None:
    client = PrometheusClient(lab.url, timeout_s=5.0)
    hosts = {h.name: h for h in lab.fleet().hosts}
    assert processes_query(hosts["box-b"]) == (
        f'gputop_process_gpu_memory_bytes{{job="gputop",instance="{lab.targets["box-b"]}"}}'
    )
    found = read_processes(client, hosts["box-b"])
    served = scraped(lab, "box-b", "gputop_process_gpu_memory_bytes")
    assert found is not None and len(found) == len(served) > 8
    # the demo's processes keep their PIDs, users and commands between scrapes
    assert {(p.gpu, p.pid, p.user, p.command) for p in found} == {
        (labels["gpu"], labels["pid"], labels["user"], labels["command"]) for labels, _ in served
    }
    assert [p.memory_bytes for p in found] == sorted((p.memory_bytes for p in found), reverse=True)
    assert read_processes(client, hosts["dcgm-node-7"]) is None  # dcgm-exporter: none known


def test_the_drill_down_on_the_real_fleet(lab: Lab) -> None:
    from gputop.ui.fleet.app import FleetApp
    from gputop.ui.fleet.host import HostScreen
    from tests.fleet.test_overview import run, table_hosts, until

    client = PrometheusClient(lab.url, timeout_s=5.0)
    app = FleetApp(
        lab.fleet,
        interval_s=1.0,
        source=lab.url,
        read_processes=lambda host: read_processes(client, host),
    )

    async def body(app: FleetApp, pilot: Any) -> None:
        await until(pilot, lambda: len(table_hosts(app)) == 5, timeout_s=15)
        table = app.screen.query_one("#fleet-hosts", HostTable)
        table.move_cursor(table_hosts(app).index("box-b"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, HostScreen))
        screen = app.screen
        assert isinstance(screen, HostScreen) and screen.host_name == "box-b"
        procs = screen.query_one("#host-processes", DataTable)
        await until(pilot, lambda: procs.row_count > 8, timeout_s=10)
        assert len(screen.query(GpuCard)) == 8
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HostScreen))

    run(app, body)


def test_a_stopped_exporter_is_down_under_its_own_hostname(lab: Lab) -> None:
    """Last in this module: it stops box-b's exporter."""
    proc = lab.exporters["box-b"]
    proc.terminate()
    proc.wait(10)
    deadline = time.monotonic() + 30
    while True:
        hosts = {h.name: h for h in lab.fleet().hosts}
        if hosts["box-b"].down:
            break
        assert time.monotonic() < deadline, "box-b never went down"
        time.sleep(0.5)
    assert lab.targets["box-b"] not in hosts  # named by what it served, not by its address
    done = fleet_cli("--once", "--prometheus", lab.url)
    assert done.returncode == 6, done.stderr
    rows = rows_of(done.stdout)
    assert rows["box-b"][-1] == "DOWN"
    assert rows["box-a"][0] == "4"
    assert "5 hosts (2 down), 8 GPUs" in done.stdout
    assert "not known (target down): " in done.stdout and "box-b" in done.stdout


def test_one_evaluation_time_per_read_so_used_plus_free_is_the_total_every_time(
    lab: Lab,
) -> None:
    # The exporters resample every second; each query at its own "now" read used memory from
    # one scrape and free from the next (issue 38: off the total in 23 of 50 reads).
    client = CountingClient(lab.url)
    totals: dict[str, set[int]] = {}
    for _ in range(40):
        client.times.clear()
        fleet = read_fleet(client)
        assert len(set(client.times)) == 1 and client.times[0] is not None
        for host in fleet.hosts:
            if host.gputop and not host.down:  # box-a; box-b too unless a test stopped it
                for g in host.gpus:
                    assert g.memory_total_bytes is not None
                    totals.setdefault(g.uuid, set()).add(g.memory_total_bytes)
        time.sleep(0.1)
    assert len(totals) >= 4
    # used and free are each floored to a whole MiB by the exporter, as DCGM does: 1 MiB apart
    assert all(max(seen) - min(seen) <= MIB for seen in totals.values()), totals
