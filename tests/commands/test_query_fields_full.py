"""Every nvidia-smi 580 field: accepted, nvidia-smi's headers, values, and texts chosen by error.

golden/nvidia_smi_580_header.csv is the header line nvidia-smi 580.173.02 printed for a query of
every field of its --help-query-gpu (on an H200): the names, order and units to match.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest

from gputop import sim
from gputop.commands.query_fields import APP_FIELDS, parse_gpu_fields
from gputop.commands.query_table import SPECS
from tests.commands.conftest import GOLDEN, Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]


def field_list(section: str) -> list[list[str]]:
    """[name, alias, ...] per line of one section of the packaged field list, read as text."""
    text = resources.files("gputop.commands").joinpath("nvidia_smi_fields.txt").read_text()
    out: list[list[str]] = []
    current = None
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
        elif line and not line.startswith("#") and current == section:
            out.append(line.split("|"))
    return out


GPU_LIST = field_list("query-gpu")
EVERY_NAME = [name for entry in GPU_LIST for name in entry]


def cells(line: str) -> list[str]:
    return line.split(", ")


def table(result: Result) -> list[dict[str, str]]:
    lines = result.out.splitlines()
    return [dict(zip(cells(lines[0]), cells(line), strict=True)) for line in lines[1:]]


def test_field_list_is_nvidia_smis() -> None:
    header = (GOLDEN / "nvidia_smi_580_header.csv").read_text().strip()
    names = [h.split(" [")[0] for h in cells(header)]
    assert [entry[0] for entry in GPU_LIST] == names
    assert len(names) == 214
    assert [e[0] for e in field_list("query-compute-apps")] == [f.name for f in APP_FIELDS]


def test_table_covers_exactly_the_field_list() -> None:
    assert set(SPECS) == {entry[0] for entry in GPU_LIST}


@pytest.mark.parametrize("name", EVERY_NAME)
def test_every_name_and_alias_is_accepted(name: str) -> None:
    (field,) = parse_gpu_fields(name)
    assert name in (field.name, *field.aliases)


def test_every_name_and_alias_gives_one_cell_per_gpu(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "query", f"--query-gpu={','.join(EVERY_NAME)}")
    assert result.rc == 0 and result.err == ""
    lines = result.out.splitlines()
    assert len(lines) == 1 + 4
    assert all(len(cells(line)) == len(EVERY_NAME) for line in lines)


def test_headers_and_units_are_nvidia_smis(box: Box, run_cli: Cli) -> None:
    every = ",".join(entry[0] for entry in GPU_LIST)
    result = run_cli(box("demo"), "query", f"--query-gpu={every}", "-i", "0")
    golden = (GOLDEN / "nvidia_smi_580_header.csv").read_text()
    assert result.out.splitlines()[0] + "\n" == golden
    aliases = "gpu.power.draw.instant,clocks.video,gpu.power.default_limit,retired_pages.sbe"
    header = run_cli(box("demo"), "query", f"--query-gpu={aliases}", "-i", "0").out
    assert header.splitlines()[0] == (
        "power.draw.instant [W], clocks.current.video [MHz], power.default_limit [W], "
        "retired_pages.single_bit_ecc.count"
    )


def help_names(text: str) -> list[list[str]]:
    """The quoted names of each field line of a --help-query-* text."""
    return [
        [part.strip('"') for part in line.split(" or ")]
        for line in text.splitlines()
        if line.startswith('"')
    ]


def test_help_query_gpu_lists_exactly_the_field_list(run_cli: Cli) -> None:
    text = run_cli(None, "query", "--help-query-gpu").out
    assert text.startswith('List of valid properties to query for the switch "--query-gpu":\n\n')
    # "clocks.max.sm" or "clocks.max.sm": nvidia-smi's own duplicate is listed once.
    assert help_names(text) == [list(dict.fromkeys(entry)) for entry in GPU_LIST]
    apps = run_cli(None, "query", "--help-query-compute-apps").out
    assert help_names(apps) == field_list("query-compute-apps")


VALUES_BOX: dict[str, Any] = {
    "name": "values",
    "driver_version": "580.173.02",
    "gpu": [
        {
            "name": "NVIDIA H200",
            "power_w": 123.4,
            "power_instant_w": 130.25,
            "power_limit_w": 600,
            "power_default_limit_w": 700,
            "power_min_limit_w": 200,
            "power_max_limit_w": 700,
            "clock_video_mhz": 1755,
            "clock_app_graphics_mhz": 1830,
            "clock_default_app_memory_mhz": 3201,
            "ecc_mode": 0,
            "ecc_mode_pending": 1,
            "vbios_version": "96.00.A5.00.03",
            "inforom_power": "3.1",
            "slowdown_c": 87,
            "temperature_c": 50,
            "gom": 1,
            "retired_pages_dbe": 2,
            "remapped_rows_pending": 1,
            "pci_sub_device_id": 0x18BE10DE,
            "pci_bus_id": "00000000:83:00.0",
            "throttle_reasons": ["sw_power_cap"],
            "recovery_action": 4,
        }
    ],
}


def test_new_fields_read_the_scenario(box: Box, run_cli: Cli) -> None:
    fields = (
        "power.draw,power.draw.average,power.draw.instant,power.limit,enforced.power.limit,"
        "power.default_limit,power.min_limit,power.max_limit,power.management,clocks.video,"
        "clocks.applications.graphics,clocks.default_applications.memory,ecc.mode.current,"
        "ecc.mode.pending,vbios_version,inforom.pwr,temperature.gpu.tlimit,gom.current,"
        "retired_pages.dbe,retired_pages.sbe,remapped_rows.pending,pci.bus,pci.sub_device_id,"
        "clocks_event_reasons_counters.sw_power_cap,gpu_recovery_action"
    )
    (row,) = table(run_cli(box(VALUES_BOX, 2.0), "query", f"--query-gpu={fields}"))
    assert row == {
        "power.draw [W]": "123.40 W",
        "power.draw.average [W]": "123.40 W",  # defaults to the power reading
        "power.draw.instant [W]": "130.25 W",
        "power.limit [W]": "600.00 W",
        "enforced.power.limit [W]": "600.00 W",
        "power.default_limit [W]": "700.00 W",
        "power.min_limit [W]": "200.00 W",
        "power.max_limit [W]": "700.00 W",
        "power.management": "Enabled",
        "clocks.current.video [MHz]": "1755 MHz",
        "clocks.applications.graphics [MHz]": "1830 MHz",
        "clocks.default_applications.memory [MHz]": "3201 MHz",
        "ecc.mode.current": "Disabled",
        "ecc.mode.pending": "Enabled",
        "vbios_version": "96.00.A5.00.03",
        "inforom.pwr": "3.1",
        "temperature.gpu.tlimit": "37",  # 87 C slowdown - 50 C now
        "gom.current": "Compute",
        "retired_pages.double_bit.count": "2",
        "retired_pages.single_bit_ecc.count": "0",
        "remapped_rows.pending": "Yes",
        "pci.bus": "0x83",
        "pci.sub_device_id": "0x18BE10DE",
        "clocks_event_reasons_counters.sw_power_cap [us]": "2000000 us",  # capped for 2 s
        "gpu_recovery_action": "Drain and Reset",
    }


def test_new_fields_as_json_are_typed(box: Box, run_cli: Cli) -> None:
    fields = "power.draw.instant,power.default_limit,clocks.video,ecc.mode.current,hostname"
    result = run_cli(box(VALUES_BOX), "query", f"--query-gpu={fields}", "--format=json")
    assert json.loads(result.out) == {
        "power.draw.instant": 130.25,
        "power.default_limit": 700.0,
        "clocks.current.video": 1755,
        "ecc.mode.current": "Disabled",
        "hostname": None,
    }


def faulty_box(driver: str) -> dict[str, Any]:
    """GPU 0 answers a few calls with errors; GPU 1 is lost after 5 s."""
    return {
        "name": "faulty",
        "driver_version": driver,
        "gpu": [
            {
                "util_gpu": "unsupported",
                "unsupported": ["nvmlDeviceGetAccountingMode"],
                "call_errors": {
                    "nvmlDeviceGetPowerManagementDefaultLimit": "no_permission",
                    "nvmlDeviceGetPowerUsage": "no_permission",
                    "nvmlDeviceGetVbiosVersion": "unknown",
                    "nvmlDeviceGetEccMode": "deprecated",
                },
            },
            {"lost_after_s": 5},
        ],
    }


SPELLED = (
    "index,power.default_limit,power.draw,vbios_version,ecc.mode.current,accounting.mode,"
    "utilization.gpu,hostname,power.min_limit"
)


def test_unavailable_text_is_chosen_by_the_drivers_error(box: Box, run_cli: Cli) -> None:
    gpu0, lost = table(
        run_cli(box(faulty_box("580.173.02"), 6.0), "query", f"--query-gpu={SPELLED}")
    )
    assert gpu0 == {
        "index": "0",
        "power.default_limit [W]": "[Insufficient Permissions]",  # NO_PERMISSION
        "power.draw [W]": "[Insufficient Permissions]",  # a reading the dashboard has too
        "vbios_version": "[Unknown Error]",  # UNKNOWN
        "ecc.mode.current": "[Requested functionality has been deprecated]",  # DEPRECATED
        "accounting.mode": "[N/A]",  # NOT_SUPPORTED, as nvidia-smi 580 prints it
        "utilization.gpu [%]": "[N/A]",  # NOT_SUPPORTED, a reading the dashboard has too
        "hostname": "[N/A]",  # a call this driver does not have
        "power.min_limit [W]": "100.00 W",  # the next call still answers (the default)
    }
    assert lost["index"] == "1"
    assert set(lost.values()) == {"1", "[GPU is lost]"}  # GPU_IS_LOST


def test_old_drivers_spell_not_supported(box: Box, run_cli: Cli) -> None:
    """Before about R440 nvidia-smi printed [Not Supported] for NOT_SUPPORTED."""
    gpu0, _ = table(run_cli(box(faulty_box("418.87.01"), 6.0), "query", f"--query-gpu={SPELLED}"))
    assert gpu0["accounting.mode"] == "[Not Supported]"
    assert gpu0["utilization.gpu [%]"] == "[Not Supported]"
    assert gpu0["hostname"] == "[N/A]"  # not NOT_SUPPORTED: the call is missing
    assert gpu0["power.default_limit [W]"] == "[Insufficient Permissions]"


def test_the_dashboards_snapshot_reads_no_extra_field(sim_source: Any) -> None:
    source, lib = sim_source("demo")
    snap = source.snapshot()
    assert all(g.extra == () and g.unavailable == () for g in snap.gpus)
    extra_calls = ("nvmlDeviceGetVbiosVersion", "nvmlDeviceGetPowerManagementDefaultLimit")
    assert not any(lib.calls[name] for name in extra_calls)
    before = lib.calls["nvmlDeviceGetPowerUsage"]
    source.request_probes(
        [f.probe for f in parse_gpu_fields("vbios_version") if f.probe], ["power_draw_mw"]
    )
    snap = source.snapshot()
    assert lib.calls["nvmlDeviceGetVbiosVersion"] == 4
    # power.draw came back on every GPU: nothing to explain, so no second call.
    assert lib.calls["nvmlDeviceGetPowerUsage"] - before == 4
    assert all(g.unavailable == () for g in snap.gpus)
    assert snap.gpus[0].extra == (("nvmlDeviceGetVbiosVersion()", "92.00.45.00.06"),)


def test_a_query_reads_only_the_fields_it_shows(box: Box, run_cli: Cli) -> None:
    source = box("demo")
    lib = sim.active()
    assert lib is not None
    run_cli(source, "query", "--query-gpu=index,power.draw.instant")
    assert lib.calls["nvmlDeviceGetFieldValues"] > 0
    assert lib.calls["nvmlDeviceGetVbiosVersion"] == 0
    assert lib.calls["nvmlDeviceGetPowerManagementDefaultLimit"] == 0
