"""Issue 14 as the user sees it: every view on the same box tells the same, right numbers.

The box (tests/engine/test_truth.py): GPU 0 runs a C+G app of 6100 MiB in another PID namespace
beside 3 GiB that no process owns; GPU 1 was lost before gputop started. And one rounding rule,
nvidia-smi's, for a value that is not a whole MiB.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.cli import main
from gputop.commands import dmon
from gputop.commands.doctor import diagnose
from gputop.commands.once import OnceOptions, render_once
from gputop.commands.query import OutputFormat, gpu_lines
from gputop.commands.query_fields import parse_gpu_fields
from gputop.engine.enrich import enrich
from gputop.engine.model import GpuProcess, ProcessType
from gputop.export.metrics import dcgm_families, snapshot_families, stuck_family
from tests.engine.test_truth import FOREIGN_PID, box
from tests.fakes import make_gpu, make_snapshot

MiB = 1024**2


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(box(lost_after_s=0.0)), encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def query(capsys: pytest.CaptureFixture[str], scenario: str, fields: str) -> str:
    """``gputop --scenario FILE query FIELDS --format=csv,noheader``'s output."""
    return run(capsys, "--scenario", scenario, "query", fields, "--format=csv,noheader")


def test_once_counts_the_cg_process_once_and_shows_the_rest(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(capsys, "--scenario", scenario, "--once", "-c")
    gpu0, gpu1 = out.splitlines()[1:3]
    assert "blender(6100M)" in gpu0
    assert "12200M" not in gpu0
    assert "(+3072M unattributed)" in gpu0
    assert gpu1.startswith("[1]") and "LOST (GPU is lost" in gpu1


def test_json_says_lost_and_counts_once(scenario: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(run(capsys, "--scenario", scenario, "--json"))
    assert data["gpus"][1]["state"] == "lost"
    (row,) = data["processes"]
    assert row["pid"] == FOREIGN_PID
    assert row["type"] == "compute+graphics"
    assert row["used_memory_bytes"] == 6100 * MiB
    assert row["info"]["name"] == "blender"
    assert data["unattributed_memory_bytes"] == [[0, 3072 * MiB]]


def test_query_gpu_says_gpu_is_lost_in_every_column_but_the_index(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(
        capsys,
        scenario,
        "--query-gpu=index,name,uuid,pci.bus_id,memory.used,temperature.gpu,power.draw",
    )
    lost = out.splitlines()[1].split(", ")
    assert lost == ["1"] + ["[GPU is lost]"] * 6


def test_query_compute_apps_lists_the_cg_process_once_by_the_drivers_name(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = query(capsys, scenario, "--query-compute-apps=pid,process_name,used_memory")
    assert out.splitlines() == [f"{FOREIGN_PID}, blender, 6100 MiB"]


def test_doctor_attributes_once_and_reports_the_unowned_memory(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--scenario", scenario, "doctor"]) == 1  # 3 GiB no process owns: stuck
    out = capsys.readouterr().out
    assert "used 9,172 MiB, attributed 6,100 MiB to 1 process" in out
    assert "UNATTRIBUTED 3,072 MiB" in out
    assert "GPU 1" in out and "LOST (GPU is lost" in out
    assert f"{FOREIGN_PID} (blender)" in out  # another namespace's PID, named by the driver


def test_exporter_counts_once_and_marks_the_lost_gpu(
    scenario: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.sources import open_source

    source = open_source(scenario=scenario)
    try:
        snap = enrich(source.snapshot())
    finally:
        source.close()
    families = {f.name: f for f in snapshot_families(snap, age_s=0, sampler_errors=0, version="t")}
    (proc,) = families["gputop_process_gpu_memory_bytes"].samples
    assert proc.value == 6100 * MiB
    assert [s.value for s in families["gputop_gpu_lost"].samples] == [0.0, 1.0]
    assert [s.value for s in families["gputop_unattributed_memory_bytes"].samples] == [3072 * MiB]


# -- one rounding rule -------------------------------------------------------------------------

FRACTIONAL = 4466 * MiB + 3 * MiB // 4  # 4466.75 MiB: every view says 4466, as nvidia-smi


def test_every_view_drops_the_fraction_of_a_mib_as_nvidia_smi_does() -> None:
    proc = GpuProcess(pid=77, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=FRACTIONAL)
    gpu = make_gpu(0, memory_used_bytes=FRACTIONAL, processes=(proc,))
    snap = enrich(make_snapshot(gpus=(gpu,)))

    once = render_once(snap, OnceOptions(width=400))
    assert " 4466 / 81920 MiB" in once and "(4466M)" in once
    doctor = diagnose(snap).text
    assert "used 4,466 MiB, attributed 4,466 MiB" in doctor
    (query,) = gpu_lines(snap, parse_gpu_fields("memory.used"), (0,), OutputFormat())
    assert query == "4466 MiB"
    fb = next(c for c in dmon.columns_for("m") if c.name == "fb")
    assert fb.get(snap, gpu) == 4466
    used = next(f for f in dcgm_families(snap) if f.name == "DCGM_FI_DEV_FB_USED")
    assert used.samples[0].value == 4466.0
    assert "4467" not in once + doctor + query


def test_holders_of_a_lost_gpu_are_not_counted_as_stuck() -> None:
    from dataclasses import replace

    from gputop.engine.model import ProcState
    from tests.commands.helpers import row

    lost_user = replace(row(9, (1,), memory=None), states=(ProcState.ON_LOST_GPU,))
    snap = replace(make_snapshot(), processes=(lost_user,))
    counts = {s.labels[0]: s.value for s in stuck_family(snap).samples}
    assert sum(counts.values()) == 0
    diagnosis = diagnose(snap)
    assert not diagnosis.stuck_processes
    assert "On a lost GPU (not counted as stuck" in diagnosis.text
    assert "PID 9  [lost-gpu]" in diagnosis.text
    assert diagnosis.text.rstrip().endswith("OK: nothing stuck.")
