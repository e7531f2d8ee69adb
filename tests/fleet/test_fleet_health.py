"""`gputop fleet` against a real Prometheus, for what issue 38 added: a MIG GPU as dcgm-exporter
shapes it (instances only) and as `gputop export --demo=mig` serves it, a host exporting only
DCGM 4.7 names, a host exporting neither name, and a gputop host with a lost GPU and an Xid.

The dcgm-exporter hosts are the recorded 3.3.5 answer (tests/fleet/data), reshaped: its GPU 0
split into two GPU instances the way dcgm-exporter's MIG code labels them (the parent's gpu and
UUID, plus GPU_I_PROFILE and GPU_I_ID: internal/pkg/collector/gpu_collector.go, toMetric), or its
names renamed to DCGM 4.7's (gputop.dcgm's table).
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop import dcgm
from gputop.fleet.model import MIB, Fleet
from tests.export.conftest import REPO, http_get, prometheus_binary, samples, stop_process
from tests.fleet.conftest import (
    DCGM_RECORDING,
    run_prometheus,
    send,
    start_exporter,
    static_server,
    wait_for,
)
from tests.fleet.test_fleet_prometheus import fleet_cli

GPU0 = 'gpu="0"'
MIG_LABELS = ('GPU_I_PROFILE="3g.20gb",GPU_I_ID="1"', 'GPU_I_PROFILE="3g.20gb",GPU_I_ID="2"')
# GPU 0's memory split between its two instances (38012 used, 2524 free in the recording)
MIG_SPLIT = {"DCGM_FI_DEV_FB_USED": ("30000", "8012"), "DCGM_FI_DEV_FB_FREE": ("1262", "1262")}


def mig_shaped(text: str, host: str) -> str:
    """The recording with GPU 0 in MIG mode as dcgm-exporter serves it: each field once per GPU
    instance, none for the GPU; memory the instance's own, the rest the GPU's; no GPU_UTIL (NVML
    has none for a MIG GPU); its last Xid 79."""
    lines = []
    for line in text.replace('Hostname="dcgm-node-7"', f'Hostname="{host}"').splitlines():
        if GPU0 not in line or line.startswith("#"):
            lines.append(line)
            continue
        name, rest = line.split("{", 1)
        labels, value = rest.rsplit("} ", 1)
        if name == "DCGM_FI_DEV_GPU_UTIL":
            continue
        if name == "DCGM_FI_DEV_XID_ERRORS":
            value = "79"
        for n, mig in enumerate(MIG_LABELS):
            own = MIG_SPLIT[name][n] if name in MIG_SPLIT else value
            at = labels.index(",Hostname=")
            lines.append(f"{name}{{{labels[:at]},{mig}{labels[at:]}}} {own}")
    return "\n".join(lines) + "\n"


def new_names_only(text: str, host: str) -> str:
    """The recording as an exporter of DCGM 4.7 names alone would serve it: each field under its
    new name in its new unit; a field without one is left out (FB_USED and FB_FREE have none
    that NVIDIA's documentation confirms: their GPUs must still be shown)."""
    lines = []
    # its own UUIDs: a GPU is known by its UUID across the fleet, and the MIG host has these
    text = text.replace('UUID="GPU-', 'UUID="GPU-new-')
    for line in text.replace('Hostname="dcgm-node-7"', f'hostname="{host}"').splitlines():
        match = re.match(r"(# (?:HELP|TYPE) )?(DCGM_FI_\w+)", line)
        field = dcgm.BY_LEGACY.get(match.group(2)) if match else None
        if field is None or field.new is None:
            continue
        if line.startswith("#"):
            lines.append(line.replace(field.legacy, field.new))
            continue
        name_labels, value = line.rsplit(" ", 1)
        lines.append(
            f"{field.new}{name_labels[len(field.legacy) :]} {field.to_new(float(value))!r}"
        )
    # the GPU's memory under its new name, in bytes (the recording has no FB_TOTAL)
    for index, uuid in enumerate(re.findall(r'UUID="([^"]+)"', text)[:2]):
        lines.append(
            f'DCGM_FI_DEV_FB_CAPACITY_BYTES{{gpu="{index}",UUID="{uuid}",hostname="{host}"}} '
            f"{40960 * MIB}"
        )
    return "\n".join(lines) + "\n"


def sick_scenario(tmp: Path) -> Path:
    """The faults scenario (GPU 1 falls off the bus after 5 s) with an Xid 79 on GPU 0 at 1 s."""
    text = (REPO / "gputop" / "sim" / "scenarios" / "faults.toml").read_text()
    first = text.index("ecc_uncorrected = 4\n") + len("ecc_uncorrected = 4\n")
    path = tmp / "sick.toml"
    path.write_text(text[:first] + "xids = [{ at_s = 1, xid = 79 }]\n" + text[first:])
    return path


@dataclass
class Health:
    url: str
    targets: dict[str, str]
    fleet: Fleet


def _ready(fleet: Fleet) -> bool:
    hosts = {h.name: h for h in fleet.hosts}
    sick, mig = hosts.get("sick-box"), hosts.get("mig-box")
    return (
        {"dcgm-mig", "dcgm-new"} <= set(hosts)
        and sick is not None
        and bool(sick.lost)
        and bool(sick.xid)
        and mig is not None
        and len(mig.gpus) > 0
        and any(h.no_gpu_series for h in fleet.hosts)
    )


@pytest.fixture(scope="module")
def health(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Health]:
    binary = prometheus_binary("the fleet health tests without it")
    tmp = tmp_path_factory.mktemp("health")
    recording = DCGM_RECORDING.read_text()
    mig_body = mig_shaped(recording, "dcgm-mig").encode()
    new_body = new_names_only(recording, "dcgm-new").encode()
    neither = b"# TYPE node_load1 gauge\nnode_load1 0.5\n"
    procs: list[subprocess.Popen[str]] = []
    with contextlib.ExitStack() as stack:
        dcgm_mig = stack.enter_context(static_server(lambda h: send(h, 200, mig_body)))
        dcgm_new = stack.enter_context(static_server(lambda h: send(h, 200, new_body)))
        other = stack.enter_context(static_server(lambda h: send(h, 200, neither)))
        try:
            sick, sick_addr = start_exporter(str(sick_scenario(tmp)), "sick-box")
            procs.append(sick)
            mig, mig_addr = start_exporter("mig", "mig-box")
            procs.append(mig)
            jobs = {
                "gputop": [sick_addr, mig_addr],
                "dcgm": [dcgm_mig.address, dcgm_new.address, other.address],
            }
            url, prometheus = stack.enter_context(run_prometheus(binary, tmp, jobs))
            fleet = wait_for(url, prometheus, tmp, _ready)
            targets = {"sick-box": sick_addr, "mig-box": mig_addr, "neither": other.address}
            yield Health(url=url, targets=targets, fleet=fleet)
        finally:
            for proc in reversed(procs):
                stop_process(proc)


def test_a_dcgm_exporter_mig_gpu_is_one_gpu_with_its_instances_memory(health: Health) -> None:
    host = next(h for h in health.fleet.hosts if h.name == "dcgm-mig")
    assert [g.gpu for g in host.gpus] == ["0", "1"]  # GPU 0 was only instances: still there
    gpu0, gpu1 = host.gpus
    assert gpu0.memory_used_bytes == 38012 * MIB and gpu0.memory_free_bytes == 2524 * MIB
    assert gpu0.util_percent is None  # no instance has one: not made up
    assert (gpu0.power_w, gpu0.temperature_c) == (312.456, 71.0)  # copied per instance: once
    assert gpu1.util_percent == 12 and gpu1.memory_used_bytes == 2048 * MIB
    assert [(x.gpu, x.last) for x in host.xid] == [("0", 79)]


def test_a_host_with_only_dcgm_47_names_shows_its_gpus(health: Health) -> None:
    host = next(h for h in health.fleet.hosts if h.name == "dcgm-new")
    assert len(host.gpus) == 2 and not host.no_gpu_series
    assert sorted(g.util_percent for g in host.gpus) == pytest.approx([12.0, 87.0])  # ratio → %
    assert sorted(g.temperature_c for g in host.gpus) == [44.0, 71.0]
    assert host.power_w == pytest.approx(312.456 + 88.125)
    assert host.xid == ()  # DCGM_FI_DEV_XID_ERROR 0: none


def test_mig_box_counts_each_gpu_once_with_its_real_memory(health: Health) -> None:
    # gputop export --demo=mig: what it serves for each GPU (a MIG GPU's instances, or the
    # GPU's own series) is the truth; the fleet must count each GPU once and sum its instances.
    served = samples(http_get(f"http://{health.targets['mig-box']}/metrics"), "DCGM_FI_DEV_FB_USED")
    uuids = {labels["UUID"] for labels, _ in served}
    assert any(labels.get("GPU_I_ID") for labels, _ in served)  # it has a MIG GPU
    host = next(h for h in health.fleet.hosts if h.name == "mig-box")
    assert sorted(g.uuid for g in host.gpus) == sorted(uuids)
    assert all(g.memory_used_bytes is not None for g in host.gpus)


def test_lost_gpu_xid_and_no_gpu_series_in_once_json_and_the_exit_code(health: Health) -> None:
    done = fleet_cli("--once", "--prometheus", health.url)
    assert done.returncode == 6, done.stderr  # Xid (4) + a lost GPU, a host without series (5)
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.strip()}
    assert "1 lost" in rows["sick-box"] and "Xid 79" in rows["sick-box"]
    assert "no GPU series" in rows[health.targets["neither"]]
    report = done.stdout.split("GPU health across the fleet:\n")[1]
    assert "sick-box: GPU 1 lost (fell off the bus)" in report
    assert "Xid 79 on GPU 0 (1 since the exporter started)" in report
    assert "dcgm-mig: Xid 79 on GPU 0" in report
    assert "GPUs lost on sick-box" in done.stderr and "Xid errors on" in done.stderr
    assert "no GPU series the fleet can read" in done.stderr
    as_json = fleet_cli("--json", "--prometheus", health.url)
    assert as_json.returncode == 6
    hosts = {h["name"]: h for h in json.loads(as_json.stdout)["hosts"]}
    sick = hosts["sick-box"]
    assert sick["lost_gpus"] == ["1"] and sick["driver_up"] is True
    assert sick["xid"] == [{"gpu": "0", "uuid": sick["xid"][0]["uuid"], "last": 79, "count": 1}]
    assert hosts[health.targets["neither"]]["no_gpu_series"] is True
    assert hosts["mig-box"]["lost_gpus"] == [] and hosts["mig-box"]["xid"] == []
    # gputop's health verdict: Xid 79 asks for a reboot (gputop.engine.gpu_health)
    assert {"gpu": "0", "verdict": "reboot needed"} in sick["gpus_needing_action"]
    assert hosts["mig-box"]["gpus_needing_action"] == []
    assert "need action" in rows["sick-box"]
    assert "sick-box: " in report and "GPU 0: reboot needed" in report
    assert "GPUs needing a reset, a reboot or replacing on sick-box" in done.stderr
