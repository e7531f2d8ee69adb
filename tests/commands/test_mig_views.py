"""MIG in the one-shot views, on the ``mig`` scenario through the real pynvml: --once, --json,
query and dmon.

GPU 0 is an H100 in MIG mode split 3g.40gb (GI 1) + 2g.20gb (GI 5) + 1g.10gb (GI 13) +
1g.10gb (GI 14); GPU 1 a whole H100. At scenario time 0 every memory wave is at its base.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gputop import sim
from gputop.commands.once import OnceOptions, render_once
from gputop.engine.model import GpuState
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource, snapshot_of

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]
SimSource = Callable[..., tuple[Any, sim.SimLibrary]]

GPU0 = "[0] NVIDIA H100 80GB HBM3 | 41°C,   N/A | 50435 / 81559 MiB"
MIG_LINES = [
    " ├ 0/1  3g.40gb |   N/A | 30086 / 40448 MiB | python(28000M)[other-namespace] "
    "jupyter-lab(2048M)[other-namespace]",
    " ├ 0/5  2g.20gb |   N/A | 14125 / 20096 MiB | tritonserver(14100M)[other-namespace]",
    " ├ 0/13 1g.10gb |   N/A |  6212 /  9984 MiB | python(6200M)[other-namespace]",
    " └ 0/14 1g.10gb |   N/A |    12 /  9984 MiB",
]
GPU1 = (
    "[1] NVIDIA H100 80GB HBM3 | 62°C,  92 % | 61000 / 81559 MiB | python(61000M)[other-namespace]"
)


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


# -- --once ---------------------------------------------------------------------------------------
def test_once_shows_each_mig_device_under_its_gpu(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("mig"), "--once", "-c")
    assert result.rc == 0, result.err
    lines = result.out.splitlines()
    assert "DEMO" in lines[0]
    assert lines[1:] == [GPU0, *MIG_LINES, GPU1]


def test_once_puts_processes_on_their_mig_devices_line_only(box: Box, run_cli: Cli) -> None:
    lines = run_cli(box("mig"), "--once", "-cp").out.splitlines()
    gpu_line = lines[1]
    assert "5300101" not in gpu_line and "|" not in gpu_line.split("MiB", 1)[1]
    assert "python/5300101(28000M)" in lines[2] and "jupyter-lab/5300102(2048M)" in lines[2]
    assert "tritonserver/5300201" in lines[3] and "python/5300301" in lines[4]


def test_once_on_ascii_and_narrow_terminals(box: Box) -> None:
    snap = snapshot_of(box)
    text = render_once(snap, OnceOptions(show_cmd=True, width=200, encoding="ascii"))
    lines = text.splitlines()
    assert lines[2].startswith(" |- 0/1  3g.40gb |   N/A | 30086 / 40448 MiB |")
    assert lines[5] == " `- 0/14 1g.10gb |   N/A |    12 /  9984 MiB"
    for width in (30, 50, 80):
        narrow = render_once(snap, OnceOptions(show_cmd=True, width=width, encoding="utf-8"))
        assert all(len(line) <= width for line in narrow.splitlines())
        assert len(narrow.splitlines()) == 7  # the MIG lines are cut, never dropped


def test_once_labels_compute_instances_when_a_gpu_instance_has_several(box: Box) -> None:
    gpu = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "mig": True,
        "gpu_instances": [
            {"profile": "3g.40gb", "id": 2, "compute_instances": [0, {"id": 1, "slices": 2}]},
            {"profile": "1g.10gb", "id": 9},
        ],
        "processes": [{"pid": 5300999, "gpu_instance": 2, "compute_instance": 1}],
    }
    snap = snapshot_of(box, {"name": "m", "gpu": [gpu]})
    lines = render_once(snap, OnceOptions(width=200, encoding="utf-8")).splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        " ├ 0/2/0 1c.3g.40gb",
        " ├ 0/2/1 2c.3g.40gb",
        " └ 0/9   1g.10gb   ",
    ]
    assert "(1024M)" in lines[3] and "(1024M)" not in lines[2]


def test_once_shows_the_cuda_index_of_the_mig_device_named(
    sim_source: SimSource, run_cli: Cli
) -> None:
    uuid = sim.load_scenario("mig").gpus[0].mig_devices[1].uuid
    source, _ = sim_source("mig", CUDA_VISIBLE_DEVICES=uuid)
    lines = run_cli(FixedTimeSource(source), "--once").out.splitlines()
    assert lines[1].startswith("[0→0] ")
    assert [line.split(" ")[2] for line in lines[2:6]] == ["0/1→-", "0/5→0", "0/13→-", "0/14→-"]
    assert lines[6].startswith("[1→-] ")


def test_once_a_lost_mig_gpu_has_no_device_lines(box: Box) -> None:
    snap = snapshot_of(box)
    gpu0 = replace(snap.gpus[0], state=GpuState.LOST, error="GPU is lost")
    text = render_once(replace(snap, gpus=(gpu0, snap.gpus[1])), OnceOptions(width=200))
    assert len(text.splitlines()) == 3
    assert "0/1" not in text


def test_once_keeps_a_process_on_the_gpu_line_when_its_device_is_unknown(box: Box) -> None:
    snap = snapshot_of(box)
    gpu0 = replace(snap.gpus[0], mig_devices=())  # say the MIG devices could not be read
    text = render_once(replace(snap, gpus=(gpu0, snap.gpus[1])), OnceOptions(width=300))
    lines = text.splitlines()
    assert len(lines) == 3
    assert "(28000M)" in lines[1] and "(6200M)" in lines[1]


# -- --json ---------------------------------------------------------------------------------------
def test_json_has_mig_devices_and_instance_ids(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("mig"), "--json")
    assert result.rc == 0, result.err
    gpu0, gpu1 = json.loads(result.out)["gpus"]
    assert gpu0["mig_mode"] is True and gpu0["utilization_gpu_percent"] is None
    devices = gpu0["mig_devices"]
    assert [(d["gpu_instance_id"], d["compute_instance_id"], d["profile"]) for d in devices] == [
        (1, 0, "3g.40gb"),
        (5, 0, "2g.20gb"),
        (13, 0, "1g.10gb"),
        (14, 0, "1g.10gb"),
    ]
    first = devices[0]
    assert first["memory_used_bytes"] == 30086 * 1024**2
    assert first["memory_total_bytes"] == 40448 * 1024**2
    assert first["uuid"].startswith("MIG-") and first["utilization_gpu_percent"] is None
    assert first["gpu_index"] == 0 and first["index"] == 0
    ids = {p["pid"]: (p["gpu_instance_id"], p["compute_instance_id"]) for p in gpu0["processes"]}
    assert ids == {5300101: (1, 0), 5300102: (1, 0), 5300201: (5, 0), 5300301: (13, 0)}
    assert all(p["sm_util_percent"] is None for p in gpu0["processes"])
    assert gpu1["mig_mode"] is False and gpu1["mig_devices"] == []
    assert gpu1["processes"][0]["gpu_instance_id"] is None


# -- query ----------------------------------------------------------------------------------------
def table(result: Result) -> list[dict[str, str]]:
    lines = result.out.splitlines()
    header = lines[0].split(", ")
    return [dict(zip(header, line.split(", "), strict=True)) for line in lines[1:]]


def test_query_mig_fields_as_nvidia_smi(box: Box, run_cli: Cli) -> None:
    fields = (
        "index,mig.mode.current,mig.mode.pending,utilization.gpu,utilization.memory,memory.used"
    )
    rows = table(run_cli(box("mig"), "query", f"--query-gpu={fields}"))
    assert rows == [
        {
            "index": "0",
            "mig.mode.current": "Enabled",
            "mig.mode.pending": "Enabled",
            "utilization.gpu [%]": "[N/A]",
            "utilization.memory [%]": "[N/A]",
            "memory.used [MiB]": "50435 MiB",
        },
        {
            "index": "1",
            "mig.mode.current": "Disabled",
            "mig.mode.pending": "Disabled",
            "utilization.gpu [%]": "92 %",
            "utilization.memory [%]": "48 %",
            "memory.used [MiB]": "61000 MiB",
        },
    ]


def test_query_pending_mig_mode_and_json(box: Box, run_cli: Cli) -> None:
    scenario = sim.load_scenario("mig")
    gpu0 = replace(scenario.gpus[0], mig_pending=False)
    source = box(replace(scenario, gpus=(gpu0, *scenario.gpus[1:])))
    result = run_cli(
        source, "query", "--query-gpu=mig.mode.current,mig.mode.pending", "--format=json"
    )
    first = json.loads(result.out.splitlines()[0])
    assert first == {"mig.mode.current": "Enabled", "mig.mode.pending": "Disabled"}


def test_query_compute_apps_lists_every_mig_process_on_its_gpu(box: Box, run_cli: Cli) -> None:
    rows = table(run_cli(box("mig"), "query", "--query-compute-apps=gpu_uuid,pid,used_memory"))
    uuid0 = sim.load_scenario("mig").gpus[0].uuid
    assert [(r["gpu_uuid"] == uuid0, r["pid"]) for r in rows] == [
        (True, "5300101"),
        (True, "5300102"),
        (True, "5300201"),
        (True, "5300301"),
        (False, "5300401"),
    ]


# -- dmon -----------------------------------------------------------------------------------------
def test_dmon_has_a_row_per_gpu_and_no_utilisation_in_mig_mode(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("mig"), "dmon", "-c", "1", "-s", "um")
    assert result.rc == 0, result.err
    rows = [line.split() for line in result.out.splitlines() if not line.startswith("#")]
    assert rows == [
        ["0", "-", "-", "-", "-", "-", "-", "50435", "8", "-"],
        ["1", "92", "48", "0", "0", "0", "0", "61000", "8", "-"],
    ]
