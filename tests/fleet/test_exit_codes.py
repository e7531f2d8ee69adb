"""`gputop fleet --once/--json` exit codes, for cron and CI: 0 all well, 4 stuck processes or
unattributed memory, 5 a host down or stale, 6 both; each from a real Prometheus of its own
scraping part of the lab (the lab's own Prometheus sees everything: stuck and down, 6)."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Iterator

import pytest

from gputop.fleet.model import STALE_AFTER_S, Fleet
from tests.export.conftest import free_port, http_get
from tests.fleet.conftest import (
    DCGM_RECORDING,
    Lab,
    run_prometheus,
    send,
    static_server,
    wait_for,
)
from tests.fleet.test_fleet_prometheus import fleet_cli


@contextlib.contextmanager
def prometheus_of(
    lab: Lab, name: str, jobs: dict[str, list[str]], ready: Callable[[Fleet], bool]
) -> Iterator[str]:
    """A Prometheus of its own scraping ``jobs``, once its fleet is ``ready``: its URL."""
    tmp = lab.tmp.parent / f"{lab.tmp.name}-{name}"
    with run_prometheus(lab.binary, tmp, jobs) as (url, proc):
        wait_for(url, proc, tmp, ready)
        yield url


def names(fleet: Fleet) -> set[str]:
    return {h.name for h in fleet.hosts}


@pytest.mark.parametrize("mode", ["--once", "--json"])
def test_stuck_and_down_is_6(lab: Lab, mode: str) -> None:
    done = fleet_cli(mode, "--prometheus", lab.url)
    assert done.returncode == 6
    assert done.stdout  # the fleet is printed all the same
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("gputop: fleet: stuck processes")
    assert "box-a" in line and f"down: {lab.targets['dead']}" in line and "(exit 6)" in line
    if mode == "--json":
        assert json.loads(done.stdout)["exit_code"] == 6


def test_all_well_is_0_and_silent(lab: Lab) -> None:
    recording = DCGM_RECORDING.read_bytes()
    with (
        static_server(lambda h: send(h, 200, recording)) as dcgm,
        prometheus_of(
            lab, "ok", {"dcgm": [dcgm.address]}, lambda f: "dcgm-node-7" in names(f)
        ) as url,
    ):
        for mode in ("--once", "--json"):
            done = fleet_cli(mode, "--prometheus", url)
            assert (done.returncode, done.stderr) == (0, ""), done.stderr
        assert json.loads(done.stdout)["exit_code"] == 0


def test_stuck_alone_is_4(lab: Lab) -> None:
    def ready(fleet: Fleet) -> bool:
        return any(h.name == "box-a" and h.stuck_total for h in fleet.hosts)

    with prometheus_of(lab, "stuck", {"gputop": [lab.targets["box-a"]]}, ready) as url:
        for mode in ("--once", "--json"):
            done = fleet_cli(mode, "--prometheus", url)
            assert done.returncode == 4, done.stderr
            assert re.fullmatch(
                r"gputop: fleet: stuck processes or unattributed memory on box-a \(exit 4\)\n",
                done.stderr,
            )


def test_a_down_target_alone_is_5(lab: Lab) -> None:
    recording = DCGM_RECORDING.read_bytes()
    dead = f"127.0.0.1:{free_port()}"

    def ready(fleet: Fleet) -> bool:
        return {"dcgm-node-7", dead} <= names(fleet)

    with (
        static_server(lambda h: send(h, 200, recording)) as dcgm,
        prometheus_of(lab, "down", {"dcgm": [dcgm.address, dead]}, ready) as url,
    ):
        for mode in ("--once", "--json"):
            done = fleet_cli(mode, "--prometheus", url)
            assert done.returncode == 5, done.stderr
            assert done.stderr == f"gputop: fleet: down: {dead} (exit 5)\n"


def test_a_stale_exporter_is_5(lab: Lab) -> None:
    """An exporter that answers, but whose sampler has not read the GPUs for ten minutes
    (a hung driver call): box-b's own exposition with its sample age set so."""
    text = http_get(f"http://{lab.targets['box-b']}/metrics")
    old = re.sub(r"(?m)^gputop_sample_age_seconds .*$", "gputop_sample_age_seconds 600", text)
    assert old != text
    body = old.replace('ostname="box-b"', 'ostname="box-old"').encode()

    def ready(fleet: Fleet) -> bool:
        return any(h.name == "box-old" and h.stale for h in fleet.hosts)

    with (
        static_server(lambda h: send(h, 200, body)) as server,
        prometheus_of(lab, "stale", {"gputop": [server.address]}, ready) as url,
    ):
        done = fleet_cli("--json", "--prometheus", url)
        assert done.returncode == 5, done.stderr
        host = json.loads(done.stdout)["hosts"][0]
        assert host["stale"] and not host["down"] and host["age_s"] > STALE_AFTER_S
        assert done.stderr == (
            f"gputop: fleet: stale (readings over {STALE_AFTER_S:.0f} s old): box-old (exit 5)\n"
        )
        done = fleet_cli("--once", "--prometheus", url)
        assert done.returncode == 5
        assert "stale (readings over 120 s old): box-old" in done.stdout
