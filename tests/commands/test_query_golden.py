"""Every supported --query-gpu field on the shipped scenarios, against reviewed golden files.

The golden files were generated once and checked by hand against nvidia-smi's format; the tests
below them assert values taken straight from the scenario definitions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from gputop.commands.query_fields import ALL_GPU_FIELDS, APP_FIELDS
from tests.commands.conftest import Result, check_golden
from tests.conftest import FixedTimeSource

ALL = ",".join(f.name for f in ALL_GPU_FIELDS)
ALL_APPS = ",".join(f.name for f in APP_FIELDS)
SCENARIOS = {"demo": 0.0, "dgx": 0.0, "faults": 6.0}  # faults: GPU 1 is lost after 5 s

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]


def table(result: Result) -> list[dict[str, str]]:
    """CSV output as dicts keyed by header (nvidia-smi separates with ', ')."""
    lines = result.out.splitlines()
    header = lines[0].split(", ")
    return [dict(zip(header, line.split(", "), strict=True)) for line in lines[1:]]


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize(
    ("fmt", "suffix"),
    [("csv", "gpu.csv"), ("csv,nounits", "gpu_nounits.csv"), ("json", "gpu.jsonl")],
)
def test_every_gpu_field_matches_golden(
    box: Box, run_cli: Cli, scenario: str, fmt: str, suffix: str
) -> None:
    result = run_cli(
        box(scenario, SCENARIOS[scenario]), "query", f"--query-gpu={ALL}", f"--format={fmt}"
    )
    assert result.rc == 0 and result.err == ""
    check_golden(f"{scenario}_{suffix}", result.out)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_compute_apps_match_golden(box: Box, run_cli: Cli, scenario: str) -> None:
    result = run_cli(
        box(scenario, SCENARIOS[scenario]), "query", f"--query-compute-apps={ALL_APPS}"
    )
    assert result.rc == 0
    check_golden(f"{scenario}_apps.csv", result.out)


@pytest.mark.parametrize("units", ["csv", "csv,nounits"])
def test_noheader_drops_only_the_header(box: Box, run_cli: Cli, units: str) -> None:
    with_header = run_cli(box("demo"), "query", f"--query-gpu={ALL}", f"--format={units}")
    without = run_cli(box("demo"), "query", f"--query-gpu={ALL}", f"--format={units},noheader")
    assert without.out.splitlines() == with_header.out.splitlines()[1:]


def test_demo_values_come_from_the_scenario(box: Box, run_cli: Cli) -> None:
    rows = table(run_cli(box("demo"), "query", f"--query-gpu={ALL}"))
    assert len(rows) == 4
    gpu0, gpu2, gpu3 = rows[0], rows[2], rows[3]
    assert gpu0["timestamp"] == "2024/01/31 12:34:56.789"
    assert gpu0["count"] == "4" and gpu0["driver_version"] == "550.54.15"
    assert gpu0["memory.total [MiB]"] == "81920 MiB"
    assert gpu0["power.limit [W]"] == gpu0["enforced.power.limit [W]"] == "400.00 W"
    assert gpu0["clocks.max.sm [MHz]"] == "1410 MHz"
    assert gpu0["clocks.current.memory [MHz]"] == "1593 MHz"
    assert gpu0["clocks_event_reasons.active"] == "0x0000000000000004"  # sw_power_cap
    assert gpu0["clocks_event_reasons.sw_power_cap"] == "Active"
    assert gpu0["clocks_event_reasons.gpu_idle"] == "Not Active"
    assert gpu0["fan.speed [%]"] == "[N/A]"  # a fanless SXM board
    assert gpu0["pstate"] == "P0" and gpu0["compute_cap"] == "8.0"
    assert gpu0["persistence_mode"] == "Enabled" and gpu0["mig.mode.current"] == "Disabled"
    assert gpu0["temperature.memory"] == "52"  # HBM sensor, wave base at t=0
    assert gpu2["name"] == "NVIDIA L40S" and gpu2["pci.bus_id"] == "00000000:87:00.0"
    assert gpu2["temperature.memory"] == "N/A"  # GDDR6 board: no memory sensor
    assert gpu2["fan.speed [%]"] == "41 %"  # base 41, sin(0) = 0
    assert gpu2["memory.total [MiB]"] == "46068 MiB"
    # GPU 3: an idle board whose used memory is the zombie's 6144 MiB + 23552 MiB unlisted.
    assert gpu3["clocks_event_reasons.active"] == "0x0000000000000001"  # gpu_idle
    assert gpu3["utilization.gpu [%]"] == "0 %"
    assert gpu3["memory.used [MiB]"] == f"{6144 + 23552} MiB"
    assert gpu3["memory.free [MiB]"] == f"{81920 - 6144 - 23552 - 512} MiB"
    assert gpu3["memory.reserved [MiB]"] == "512 MiB"
    assert gpu3["ecc.errors.uncorrected.volatile.total"] == "2"
    assert gpu3["power.draw [W]"] == "63.00 W"  # base 63, sin(0) = 0, no noise


def test_faults_show_lost_not_supported_and_na(box: Box, run_cli: Cli) -> None:
    rows = table(run_cli(box("faults", 6.0), "query", f"--query-gpu={ALL}"))
    v100, lost, gtx, t4 = rows
    assert v100["ecc.errors.uncorrected.volatile.total"] == "4"
    assert v100["power.draw [W]"] == "240.00 W" and t4["power.draw [W]"] == "28.00 W"
    assert t4["power.limit [W]"] == "70.00 W"
    # A lost GPU keeps its identity; every reading says so, as nvidia-smi does.
    assert lost["name"] == "Tesla V100-SXM2-32GB" and lost["pci.bus_id"] == "00000000:1B:00.0"
    assert lost["index"] == "1" and lost["timestamp"] == "2024/01/31 12:34:56.789"
    for key in ("memory.used [MiB]", "utilization.gpu [%]", "temperature.gpu", "pstate"):
        assert lost[key] == "[GPU is lost]"
    # The GeForce supports almost nothing: on driver 470, as since about R440, nvidia-smi prints
    # [N/A] for what the driver answers NOT_SUPPORTED (tests/commands/test_query_fields_full.py
    # has the older drivers' [Not Supported]).
    for key in (
        "utilization.gpu [%]",
        "power.draw [W]",
        "clocks.current.sm [MHz]",
        "pstate",
        "pcie.link.gen.current",
        "clocks_event_reasons.active",
        "memory.reserved [MiB]",
        "mig.mode.current",
        "compute_cap",
        "fan.speed [%]",
    ):
        assert gtx[key] == "[N/A]", key
    assert gtx["compute_mode"] == "Prohibited" and gtx["persistence_mode"] == "Disabled"
    assert gtx["temperature.gpu"] == "45"
    assert gtx["memory.total [MiB]"] == "8192 MiB"


def test_nounits_keeps_header_units_and_strips_values(box: Box, run_cli: Cli) -> None:
    fields = "memory.used,utilization.gpu,power.draw,clocks.sm,fan.speed,temperature.gpu"
    result = run_cli(box("faults", 6.0), "query", f"--query-gpu={fields}", "--format=csv,nounits")
    lines = result.out.splitlines()
    assert lines[0] == (
        "memory.used [MiB], utilization.gpu [%], power.draw [W], "
        "clocks.current.sm [MHz], fan.speed [%], temperature.gpu"
    )
    util = round(70 + 20 * math.sin(2 * math.pi * 6.0 / 10))  # the scenario's wave at t = 6 s
    assert lines[1] == f"20000, {util}, 240.00, 210, [N/A], 71"
    assert lines[2] == ", ".join(["[GPU is lost]"] * 6)


def test_json_lines_are_typed(box: Box, run_cli: Cli) -> None:
    fields = "index,name,memory.used,power.draw,pstate,utilization.gpu,persistence_mode"
    result = run_cli(box("faults", 6.0), "query", f"--query-gpu={fields}", "--format=json")
    records = [json.loads(line) for line in result.out.splitlines()]
    assert records[0] == {
        "index": 0,
        "name": "Tesla V100-SXM2-32GB",
        "memory.used": 20000,
        "power.draw": 240.0,
        "pstate": "P0",
        "utilization.gpu": round(70 + 20 * math.sin(2 * math.pi * 6.0 / 10)),
        "persistence_mode": "Enabled",
    }
    assert records[1]["index"] == 1 and records[1]["memory.used"] is None  # lost
    assert records[2]["utilization.gpu"] is None  # not supported


def test_aliases_print_nvidia_smi_canonical_headers(box: Box, run_cli: Cli) -> None:
    aliases = "gpu_name,gpu_uuid,gpu_bus_id,clocks.gr,clocks.mem,clocks.max.gr,clocks.max.mem"
    result = run_cli(box("demo"), "query", f"--query-gpu={aliases}", "-i", "0")
    header, row = result.out.splitlines()
    assert header == (
        "name, uuid, pci.bus_id, clocks.current.graphics [MHz], clocks.current.memory [MHz], "
        "clocks.max.graphics [MHz], clocks.max.memory [MHz]"
    )
    assert row.startswith("NVIDIA A100-SXM4-80GB, GPU-") and row.endswith("1410 MHz, 1593 MHz")


def test_compute_apps_values(box: Box, run_cli: Cli) -> None:
    fields = "pid,process_name,used_memory,gpu_bus_id,gpu_name"
    rows = table(run_cli(box("demo"), "query", f"--query-compute-apps={fields}"))
    by_pid = {int(r["pid"]): r for r in rows}
    assert sorted(by_pid) == [5048213, 5048214, 5049001, 5051377, 5051502]
    assert by_pid[5048213]["used_gpu_memory [MiB]"] == "61000 MiB"  # base, sin(0) = 0
    assert by_pid[5051502]["used_gpu_memory [MiB]"] == "3900 MiB"
    assert by_pid[5051377]["gpu_bus_id"] == "00000000:87:00.0"
    assert by_pid[5051377]["gpu_name"] == "NVIDIA L40S"
    assert by_pid[5051377]["process_name"] == "/usr/bin/python3"
    # Not visible to the OS (another PID namespace, say): the driver names it, as for nvidia-smi.
    assert by_pid[5049001]["process_name"] == "python"


def test_old_throttle_names_print_current_event_headers(box: Box, run_cli: Cli) -> None:
    """nvidia-smi 580 answers clocks_throttle_reasons.* under clocks_event_reasons.* headers."""
    fields = "clocks_throttle_reasons.active,clocks_throttle_reasons.sw_power_cap"
    result = run_cli(box("demo"), "query", f"--query-gpu={fields}", "-i", "0")
    assert result.out.splitlines() == [
        "clocks_event_reasons.active, clocks_event_reasons.sw_power_cap",
        "0x0000000000000004, Active",
    ]
