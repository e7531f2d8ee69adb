"""`gputop --json` and snapshot_to_dict: stable names, plain JSON types, every field present."""

from __future__ import annotations

import json
from dataclasses import fields, replace

from gputop.commands.json_out import (
    SCHEMA_VERSION,
    gpu_to_dict,
    process_row_to_dict,
    render_json,
    snapshot_to_dict,
)
from gputop.engine.model import GpuProcess, GpuSample, ProcessRow, ProcInfo, Snapshot, SystemInfo
from tests.commands.helpers import enriched_snapshot, row
from tests.fakes import GiB, lost_gpu, make_gpu, make_snapshot


def names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def loads(snapshot: Snapshot) -> dict[str, object]:
    data = json.loads(render_json(snapshot))
    assert isinstance(data, dict)
    return data


def test_top_level_keys_are_the_snapshot_fields_plus_schema() -> None:
    data = loads(enriched_snapshot())
    # Snapshot.changes is the sampler's bookkeeping between two ticks of one process (what
    # changed since the last, gputop.engine.changes), not a reading: never in the JSON.
    assert set(data) == (names(Snapshot) - {"changes"}) | {"schema"}
    assert next(iter(data)) == "schema"
    assert data["schema"] == SCHEMA_VERSION == 1


def test_system() -> None:
    snap = enriched_snapshot(simulated=True)
    system = loads(snap)["system"]
    assert isinstance(system, dict)
    assert set(system) == names(SystemInfo)
    assert system["driver_version"] == "550.54.15"
    assert system["hostname"] == snap.system.hostname
    assert system["simulated"] is True


def test_gpu_fields_values_and_types() -> None:
    gpu = make_gpu(1, throttle_reasons=("sw_power_cap", "hw_slowdown"))
    data = gpu_to_dict(gpu)
    assert set(data) == names(GpuSample) | {"fan_speed_percent", "health"}
    assert json.loads(json.dumps(data)) == data  # plain JSON types only
    assert data["index"] == 1
    assert data["state"] == "ok"
    assert data["compute_capability"] == [8, 0]
    assert data["fan_speeds_percent"] == [40]
    assert data["fan_speed_percent"] == 40
    assert data["memory_used_bytes"] == 20 * GiB
    assert data["power_draw_mw"] == 250_000
    assert data["throttle_reasons"] == ["sw_power_cap", "hw_slowdown"]
    assert data["persistence_mode"] is True
    assert data["processes"] == [
        {
            "pid": 4242,
            "gpu_index": 1,
            "type": "compute",
            "used_memory_bytes": 18 * GiB,
            "sm_util_percent": None,
            "memory_util_percent": None,
            "driver_name": None,
            "gpu_instance_id": None,
            "compute_instance_id": None,
        }
    ]
    assert set(data["processes"][0]) == names(GpuProcess)


def test_all_none_gpu_is_null_not_missing() -> None:
    data = gpu_to_dict(GpuSample(index=3))
    assert set(data) == names(GpuSample) | {"fan_speed_percent", "health"}
    assert data["temperature_c"] is None
    assert data["fan_speed_percent"] is None
    assert data["processes"] == []


def test_lost_gpu_state() -> None:
    data = loads(make_snapshot(gpus=(make_gpu(0), lost_gpu(1))))
    gpus = data["gpus"]
    assert isinstance(gpus, list)
    assert [g["state"] for g in gpus] == ["ok", "lost"]
    assert gpus[1]["error"] == "GPU is lost"


def test_process_rows_with_info() -> None:
    data = loads(enriched_snapshot())
    rows = data["processes"]
    assert isinstance(rows, list)
    assert [r["pid"] for r in rows] == [1001, 2002, 3003]
    first, _, holder = rows
    assert set(first) == names(ProcessRow) | {"state", "stuck"}
    assert set(first["info"]) == names(ProcInfo) | {"command"}
    assert first["info"]["user"] == "alice"
    assert first["info"]["cmdline"] == ["python", "train.py"]
    assert first["info"]["command"] == "python train.py"
    assert first["gpu_indices"] == [0, 1]
    assert first["type"] == "compute"
    assert first["states"] == ["active"]
    assert first["state"] == "active" and first["stuck"] is False
    assert holder["states"] == ["holder"] and holder["stuck"] is True
    assert holder["used_memory_bytes"] is None


def test_process_row_to_dict_is_the_rows_entry() -> None:
    r = row(77, (0,), states=())
    data = process_row_to_dict(r)
    assert data["state"] == "active"  # the model's default when no state is known
    assert data["info"]["create_time"] == 1.5


def test_unattributed_memory_and_stale() -> None:
    snap = replace(enriched_snapshot(), stale_s=12.5, holder_scan_note="not root")
    data = loads(snap)
    assert data["unattributed_memory_bytes"] == [[1, 5 * GiB]]
    assert data["stale_s"] == 12.5
    assert data["holder_scan_note"] == "not root"
    assert loads(make_snapshot())["stale_s"] is None


def test_empty_processes_list_when_not_enriched() -> None:
    data = loads(make_snapshot())
    assert data["processes"] == []
    assert data["unattributed_memory_bytes"] == []


def test_dict_and_text_agree() -> None:
    snap = enriched_snapshot()
    assert json.loads(render_json(snap)) == snapshot_to_dict(snap)


def test_one_line_form_for_json_lines() -> None:
    text = render_json(enriched_snapshot(), indent=None)
    assert "\n" not in text
    assert json.loads(text) == snapshot_to_dict(enriched_snapshot())


def test_non_ascii_is_kept_readable() -> None:
    snap = make_snapshot(gpus=(make_gpu(0, name="GPU ü"),))
    assert "GPU ü" in render_json(snap)
