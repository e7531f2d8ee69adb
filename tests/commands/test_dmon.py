"""`gputop dmon`: nvidia-smi dmon's columns per -s group, values, header repeats, -o DT, -i."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gputop.commands import dmon
from gputop.errors import UsageError
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]

# nvidia-smi dmon's columns from driver 535 on (the demo's driver is 550)
GROUP_COLUMNS = {
    "p": ["pwr", "gtemp", "mtemp"],
    "u": ["sm", "mem", "enc", "dec", "jpg", "ofa"],
    "c": ["mclk", "pclk"],
    "v": ["pviol", "tviol"],
    "m": ["fb", "bar1", "ccpm"],
    "e": ["sbecc", "dbecc", "pci"],
    "t": ["rxpci", "txpci"],
}


def rows(result: Result) -> tuple[list[str], list[dict[str, str]]]:
    """(header names, data rows as dicts) of dmon output."""
    lines = result.out.splitlines()
    names = lines[0].lstrip("#").split()
    data = [dict(zip(names, line.split(), strict=True)) for line in lines if line[0] != "#"]
    return names, data


def test_default_header_is_nvidia_smis(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "dmon", "-c", "1")
    lines = result.out.splitlines()
    assert lines[0] == "# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec   jpg   ofa  mclk  pclk"
    assert lines[1] == "# Idx     W      C      C     %     %     %     %     %     %   MHz   MHz"
    assert len(lines) == 2 + 4
    # Every row lines up under the header.
    assert all(len(line) == len(lines[0]) for line in lines)


@pytest.mark.parametrize("group", list(GROUP_COLUMNS))
def test_each_group_selects_its_columns(box: Box, run_cli: Cli, group: str) -> None:
    names, data = rows(run_cli(box("demo"), "dmon", "-c", "1", "-s", group))
    assert names == ["gpu", *GROUP_COLUMNS[group]]
    assert [r["gpu"] for r in data] == ["0", "1", "2", "3"]


def test_groups_come_in_the_order_given_as_nvidia_smis(box: Box, run_cli: Cli) -> None:
    names, _ = rows(run_cli(box("demo"), "dmon", "-c", "1", "-s", "tmu"))
    assert names == ["gpu", *GROUP_COLUMNS["t"], *GROUP_COLUMNS["m"], *GROUP_COLUMNS["u"]]


def test_values_come_from_the_scenario(box: Box, run_cli: Cli) -> None:
    _, data = rows(run_cli(box("demo"), "dmon", "-c", "1", "-s", "pucvmet"))
    gpu0, gpu3 = data[0], data[3]
    assert (
        gpu3["pwr"] == "63" and gpu3["gtemp"] == "38" and gpu3["mtemp"] == "52"
    )  # base of the HBM wave at t=0
    assert gpu3["sm"] == "0" and gpu3["mclk"] == "1593" and gpu3["pclk"] == "210"
    assert gpu3["fb"] == str(6144 + 23552) and gpu3["bar1"] == "8"
    assert gpu3["dbecc"] == "2" and gpu3["sbecc"] == "0" and gpu3["pci"] == "0"
    assert gpu3["jpg"] == gpu3["ofa"] == "0" and gpu3["ccpm"] == "-"  # no confidential computing
    assert gpu0["rxpci"] == str(180000 // 1024) and gpu0["txpci"] == str(40000 // 1024)
    assert gpu0["pviol"] == "100" and gpu3["pviol"] == "0"  # GPU 0 is power-capped
    assert gpu0["tviol"] == "0"


def test_unsupported_and_lost_show_a_dash(box: Box, run_cli: Cli) -> None:
    _, data = rows(run_cli(box("faults", 6.0), "dmon", "-c", "1", "-s", "puc"))
    lost, gtx = data[1], data[2]
    assert [lost[c] for c in ("pwr", "gtemp", "sm", "mclk")] == ["-"] * 4
    assert gtx["pwr"] == "-" and gtx["sm"] == "-" and gtx["gtemp"] == "45"


def test_header_repeats_every_screenful(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "dmon", "-c", "6", "-d", "0.1")  # the shortest -d
    lines = result.out.splitlines()
    headers = [i for i, line in enumerate(lines) if line.startswith("# gpu")]
    # 20 rows a page when not a terminal: 5 samples of 4 GPUs, then the header again.
    assert headers == [0, 2 + 20]
    assert len([line for line in lines if not line.startswith("#")]) == 24


def test_date_and_time_columns(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "dmon", "-c", "1", "-o", "DT", "-s", "u", "-i", "2")
    lines = result.out.splitlines()
    assert lines[0].split() == ["#Date", "Time", "gpu", "sm", "mem", "enc", "dec", "jpg", "ofa"]
    assert lines[1].split() == ["#YYYYMMDD", "HH:MM:SS", "Idx", *["%"] * 6]
    assert lines[2].split()[:3] == ["20240131", "12:34:56", "2"]
    assert len(lines) == 3 and len(lines[2]) == len(lines[0])


def test_bad_group_or_option_is_a_usage_error(run_cli: Cli) -> None:
    for argv in (("-s", "pux"), ("-o", "DX")):
        result = run_cli(None, "dmon", *argv)
        assert result.rc == 2 and result.out == "" and result.err.count("\n") == 1
    with pytest.raises(UsageError):
        dmon.columns_for("")


def test_unknown_gpu_id(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "dmon", "-c", "1", "-i", "7")
    assert result.rc == 2 and result.out == ""
