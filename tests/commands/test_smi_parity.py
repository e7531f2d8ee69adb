"""nvidia-smi parity: dmon's columns by driver, -s order, units, ECC/replay/violation readings;
query's display_mode by driver and the reset_status fields; one PCIe MB/s rule everywhere."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from gputop import units
from gputop.commands.dmon import Violations, columns_for, probes_of
from gputop.engine.model import GpuSample
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]

# `dmon -s pucvmet`, header and units, as nvidia-smi prints them from driver 535 on, and before.
NEW_HEADER = (
    "# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec   jpg   ofa  mclk  pclk pviol tviol"
    "    fb  bar1  ccpm sbecc dbecc   pci rxpci txpci",
    "# Idx     W      C      C     %     %     %     %     %     %   MHz   MHz     %  bool"
    "    MB    MB    MB  errs  errs  errs  MB/s  MB/s",
)
OLD_HEADER = (
    "# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk pviol tviol"
    "    fb  bar1 sbecc dbecc   pci rxpci txpci",
    "# Idx     W      C      C     %     %     %     %   MHz   MHz     %  bool"
    "    MB    MB  errs  errs  errs  MB/s  MB/s",
)


def one_gpu(driver: str, **gpu: Any) -> dict[str, Any]:
    """A one-GPU box on ``driver``: ECC counts, replays, JPEG/OFA load and a power cap."""
    readings = {
        "ecc_corrected": 7,
        "ecc_uncorrected": 1,
        "pcie_replay_count": 3,
        "jpeg": 12,
        "ofa": 4,
        "pcie_rx_kbps": 2047,
        "pcie_tx_kbps": 1_048_576,
        "throttle_reasons": ["sw_power_cap"],
    }
    return {"name": "parity", "driver_version": driver, "gpu": [{**readings, **gpu}]}


def dmon_lines(run_cli: Cli, source: FixedTimeSource, groups: str) -> list[str]:
    result = run_cli(source, "dmon", "-c", "1", "-s", groups)
    assert result.rc == 0 and result.err == ""
    return result.out.splitlines()


@pytest.mark.parametrize(
    ("driver", "header"), [("550.54.15", NEW_HEADER), ("530.30.02", OLD_HEADER)]
)
def test_dmon_columns_follow_the_driver(box: Box, run_cli: Cli, driver: str, header: Any) -> None:
    lines = dmon_lines(run_cli, box(one_gpu(driver)), "pucvmet")
    assert tuple(lines[:2]) == header
    assert len(lines) == 3 and len(lines[2]) == len(lines[0])  # the row lines up


def test_dmon_new_columns_read_the_driver(box: Box, run_cli: Cli) -> None:
    (row,) = dmon_lines(run_cli, box(one_gpu("550.54.15")), "uem")[2:]
    # gpu sm mem enc dec jpg ofa | sbecc dbecc pci | fb bar1 ccpm
    assert row.split() == ["0", "0", "0", "0", "0", "12", "4", "7", "1", "3", "0", "8", "-"]


def test_dmon_ecc_and_replays_unsupported_are_dashes(box: Box, run_cli: Cli) -> None:
    no_ecc = one_gpu("550.54.15", ecc_uncorrected="unsupported", pcie_replay_count="unsupported")
    (row,) = dmon_lines(run_cli, box(no_ecc), "e")[2:]
    assert row.split() == ["0", "-", "-", "-"]


@pytest.mark.parametrize(
    ("groups", "names"),
    [
        ("tp", ["rxpci", "txpci", "pwr", "gtemp", "mtemp"]),
        ("ec", ["sbecc", "dbecc", "pci", "mclk", "pclk"]),
        ("vu", ["pviol", "tviol", "sm", "mem", "enc", "dec", "jpg", "ofa"]),
        ("ppc", ["pwr", "gtemp", "mtemp", "mclk", "pclk"]),  # a letter twice: once
    ],
)
def test_dmon_groups_in_the_order_of_s(box: Box, run_cli: Cli, groups: str, names: Any) -> None:
    lines = dmon_lines(run_cli, box(one_gpu("550.54.15")), groups)
    assert lines[0].lstrip("#").split() == ["gpu", *names]


def test_violations_are_a_dash_without_the_counters(box: Box, run_cli: Cli) -> None:
    capped = box(one_gpu("550.54.15"))
    (row,) = dmon_lines(run_cli, capped, "v")[2:]
    assert row.split() == ["0", "100", "0"]  # capped now: the first row has no interval
    blind = one_gpu("550.54.15", unsupported=["nvmlDeviceGetViolationStatus"])
    (row,) = dmon_lines(run_cli, box(blind), "v")[2:]
    assert row.split() == ["0", "-", "-"]  # the reasons are read, the counters are not: not 0
    reasons = run_cli(box(blind), "query", "--query-gpu=clocks_event_reasons.sw_power_cap")
    assert reasons.out.splitlines()[1] == "Active"


def sample(ref_us: int, power_ns: int, thermal_ns: int) -> GpuSample:
    name = "nvmlDeviceGetViolationStatus"
    return GpuSample(
        index=0,
        throttle_reasons=(),
        extra=(
            (f"{name}(NVML_PERF_POLICY_POWER).referenceTime", ref_us),
            (f"{name}(NVML_PERF_POLICY_POWER).violationTime", power_ns),
            (f"{name}(NVML_PERF_POLICY_THERMAL).referenceTime", ref_us),
            (f"{name}(NVML_PERF_POLICY_THERMAL).violationTime", thermal_ns),
        ),
    )


def test_pviol_is_the_share_of_the_interval() -> None:
    pviol, tviol = Violations().columns()
    snap: Any = None  # the columns read the sample only
    first = sample(1_000_000, 5_000_000_000, 0)
    assert (pviol.get(snap, first), tviol.get(snap, first)) == (0, 0)  # nothing held down now
    # 2 s later: power held the clocks for 0.5 s of them, heat for 1 ms
    later = sample(3_000_000, 5_500_000_000, 1_000_000)
    assert (pviol.get(snap, later), tviol.get(snap, later)) == (25, 1)
    quiet = sample(4_000_000, 5_500_000_000, 1_000_000)
    assert (pviol.get(snap, quiet), tviol.get(snap, quiet)) == (0, 0)


def test_dmon_as_a_real_process_orders_and_filters_columns() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gputop", "--demo=faults", "dmon", "-c", "1", "-s", "mu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode in (0, 3), result.stderr  # faults has a GPU that hangs
    # driver 470: nvidia-smi's older columns, no ccpm, jpg or ofa
    assert result.stdout.splitlines()[0].lstrip("#").split() == [
        "gpu",
        *["fb", "bar1", "sm", "mem", "enc", "dec"],
    ]


# -- query ----------------------------------------------------------------------------------------


def table(result: Result) -> list[dict[str, str]]:
    lines = result.out.splitlines()
    return [dict(zip(lines[0].split(", "), line.split(", "), strict=True)) for line in lines[1:]]


@pytest.mark.parametrize(
    ("driver", "attached", "expected"),
    [
        ("570.86.15", 1, "Enabled"),
        ("570.86.15", 0, "Disabled"),
        ("580.173.02", 1, "[Requested functionality has been deprecated]"),
    ],
)
def test_display_mode_is_deprecated_only_from_580(
    box: Box, run_cli: Cli, driver: str, attached: int, expected: str
) -> None:
    scenario = {"name": "d", "driver_version": driver, "gpu": [{"display_attached": attached}]}
    (row,) = table(run_cli(box(scenario), "query", "--query-gpu=display_mode,display_attached"))
    assert row == {"display_mode": expected, "display_attached": "Yes" if attached else "No"}


def test_display_mode_unsupported_is_na(box: Box, run_cli: Cli) -> None:
    scenario = {"name": "d", "gpu": [{"unsupported": ["nvmlDeviceGetDisplayMode"]}]}
    (row,) = table(run_cli(box(scenario), "query", "--query-gpu=display_mode"))
    assert row == {"display_mode": "[N/A]"}


@pytest.mark.parametrize(
    ("action", "required", "drain"),
    [(0, "No", "No"), (1, "Yes", "No"), (2, "Yes", "No"), (3, "No", "No"), (4, "No", "Yes")],
)
def test_reset_status_fields_are_answered(
    box: Box, run_cli: Cli, action: int, required: str, drain: str
) -> None:
    scenario = {"name": "r", "gpu": [{"recovery_action": action}]}
    fields = "reset_status.reset_required,reset_status.drain_and_reset_recommended"
    (row,) = table(run_cli(box(scenario), "query", f"--query-gpu={fields}"))
    assert row == {
        "reset_status.reset_required": required,
        "reset_status.drain_and_reset_recommended": drain,
    }


def test_reset_status_unsupported_is_na(box: Box, run_cli: Cli) -> None:
    scenario = {"name": "r", "gpu": [{"recovery_action": "unsupported"}]}
    result = run_cli(box(scenario), "query", "--query-gpu=reset_status.reset_required")
    assert result.rc == 0 and table(result) == [{"reset_status.reset_required": "[N/A]"}]


def test_help_names_the_older_fields(run_cli: Cli) -> None:
    text = run_cli(None, "query", "--help-query-gpu").out
    assert "reset_status.drain_and_reset_recommended" in text.splitlines()[-1]


# -- one PCIe rule ---------------------------------------------------------------------------------


def test_pcie_mb_per_s_is_one_rule_across_views(box: Box, run_cli: Cli) -> None:
    row = dmon_lines(run_cli, box("demo", 3.0), "t")[2]  # GPU 0
    rx_mb, tx_mb = (int(v) for v in row.split()[1:])
    (gpu0, *_) = json.loads(run_cli(box("demo", 3.0), "--json").out)["gpus"]
    assert rx_mb == gpu0["pcie_rx_kbps"] // 1024 and tx_mb == gpu0["pcie_tx_kbps"] // 1024
    assert units.rate_kbps(gpu0["pcie_rx_kbps"]) == f"{rx_mb}MB/s"  # the dashboard's text


def test_pcie_rule_truncates_and_switches_to_gb() -> None:
    assert units.pcie_mb_per_s(2047) == 1  # 1.999 MiB/s: the fraction dropped
    assert units.pcie_mb_per_s(None) is None
    assert units.rate_kbps(1_048_576) == "1.0GB/s"


def test_violation_counters_over_simulated_time(sim_source: Any, sim_clock: Any) -> None:
    """Two rows 2 s apart: the capped GPU's counter grew the whole time, the other's not at all."""
    capped = one_gpu("550.54.15")["gpu"][0]
    source, _ = sim_source({"name": "v", "gpu": [capped, {"throttle_reasons": []}]})
    violations = Violations()
    pviol, tviol = columns_for("v", 550, violations)
    source.request_probes(probes_of((pviol, tviol)))
    sim_clock.set(1.0)
    source.snapshot()
    for gpu in source.snapshot().gpus:
        pviol.get(None, gpu), tviol.get(None, gpu)  # the first row: no interval yet
    sim_clock.set(3.0)
    busy, idle = source.snapshot().gpus
    assert (pviol.get(None, busy), tviol.get(None, busy)) == (100, 0)
    assert (pviol.get(None, idle), tviol.get(None, idle)) == (0, 0)
