"""The GPU health verdict in ``--once`` (a tag per GPU that is not ok) and ``--json`` (per GPU
``health: {verdict, reasons}``), on the simulated ``sick`` box: one GPU per verdict."""

from __future__ import annotations

import json
from typing import Any

from gputop import sim
from gputop.commands.json_out import render_json
from gputop.commands.once import OnceOptions, render_once
from tests.commands.test_cli import gputop

TAGS = {
    0: None,
    1: "[degraded: 2 uncorrected ECC]",
    2: "[reset needed: recovery: GPU reset +1]",
    3: "[reboot needed: recovery: node reboot]",
    4: "[replace: unrepairable memory +1]",
    5: None,  # unknown: nothing read, nothing claimed
    6: None,
}


def gpu_lines(text: str) -> dict[int, str]:
    return {int(line[1 : line.index("]")]): line for line in text.splitlines()[1:]}


def test_once_tags_every_gpu_that_is_not_ok(sim_source: Any) -> None:
    source, _ = sim_source("sick")
    lines = gpu_lines(render_once(source.snapshot(), OnceOptions(width=200)))
    for index, tag in TAGS.items():
        if tag is None:
            assert "[" not in lines[index][3:], lines[index]
        else:
            assert tag in lines[index], lines[index]


def test_once_tags_xids_and_a_lost_gpu(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source("sick")
    sim_clock.set(29.5)
    lines = gpu_lines(render_once(source.snapshot(), OnceOptions(width=200)))
    assert "[reboot needed: Xid 79]" in lines[6]
    assert "[reset needed: recovery: GPU reset +3]" in lines[2]  # + row remap, Xid 48, Xid 63
    assert "[" not in lines[0][3:]  # Xid 13 is the application's: a note in --json only
    sim_clock.set(31.0)
    lost = gpu_lines(render_once(source.snapshot(), OnceOptions(width=200)))[6]
    assert "LOST" in lost and lost.endswith("[reboot needed: GPU lost]")


def test_once_keeps_the_verdict_when_narrow(sim_source: Any) -> None:
    source, _ = sim_source("sick")
    text = render_once(source.snapshot(), OnceOptions(width=60))
    lines = gpu_lines(text)
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "[reset needed]" in lines[2] and "[replace]" in lines[4]


def test_json_has_health_with_its_reasons(sim_source: Any, sim_clock: sim.ManualClock) -> None:
    source, _ = sim_source("sick")
    sim_clock.set(29.5)
    gpus = json.loads(render_json(source.snapshot()))["gpus"]
    verdicts = [g["health"]["verdict"] for g in gpus]
    assert verdicts == [
        "ok",
        "degraded",
        "reset needed",
        "reboot needed",
        "replace",
        "unknown",
        "reboot needed",
    ]
    assert gpus[5]["health"]["reasons"] == []
    (note,) = gpus[0]["health"]["reasons"]
    assert note["verdict"] == "ok" and note["evidence"] == "Xid 13"
    assert "application" in note["meaning"] and note["advice"]
    first = gpus[2]["health"]["reasons"][0]
    assert set(first) == {"verdict", "evidence", "source", "meaning", "advice"}
    assert first["source"] == "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"
    assert "nvidia-smi --gpu-reset -i 2" in first["advice"]
    assert gpus[2]["recovery_action"] == 1 and gpus[2]["remapped_rows_pending"] is True
    assert [x["xid"] for x in gpus[2]["recent_xids"]] == [48, 63]
    assert gpus[5]["recent_xids"] is None  # the driver gives it no Xid events


def test_the_command_line_shows_them() -> None:
    once = gputop("--demo=sick", "--once")
    assert once.returncode == 0, once.stderr
    assert "[replace: unrepairable memory +1]" in once.stdout
    result = gputop("--demo=sick", "--json")
    assert result.returncode == 0, result.stderr
    health = [g["health"]["verdict"] for g in json.loads(result.stdout)["gpus"]]
    assert health[:6] == ["ok", "degraded", "reset needed", "reboot needed", "replace", "unknown"]
