"""`gputop query` behaviour: errors before output, -i, -f, loops on schedule, Ctrl-C."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from gputop.commands import query
from gputop.commands.query_fields import ALL_GPU_FIELDS
from gputop.engine.model import Snapshot
from gputop.engine.source import SourceBase
from gputop.errors import UsageError
from tests.commands.conftest import Result
from tests.conftest import FixedTimeSource

Box = Callable[..., FixedTimeSource]
Cli = Callable[..., Result]


def test_unknown_field_is_one_line_exit_2_before_any_output(run_cli: Cli) -> None:
    result = run_cli(None, "query", "--query-gpu=index,memory.used,bogus.field")
    assert result.rc == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and "bogus.field" in result.err
    assert result.err.startswith("gputop: ")


def test_unknown_compute_app_field(run_cli: Cli) -> None:
    result = run_cli(None, "query", "--query-compute-apps=pid,utilization.gpu")
    assert result.rc == 2 and result.out == "" and "utilization.gpu" in result.err


@pytest.mark.parametrize(
    "argv",
    [
        ("query", "--query-gpu=index", "--format=xml"),
        ("query", "--query-gpu=index", "--format=csv,fancy"),
        ("query",),
        ("query", "--query-gpu=index", "--query-compute-apps=pid"),
    ],
)
def test_usage_errors_open_nothing(run_cli: Cli, argv: tuple[str, ...]) -> None:
    result = run_cli(None, *argv)
    assert result.rc == 2 and result.out == "" and result.err.count("\n") == 1


def test_field_names_are_case_insensitive_like_nvidia_smi(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "query", "--query-gpu=Index,MEMORY.total", "-i", "0")
    assert result.out.splitlines() == ["index, memory.total [MiB]", "0, 81920 MiB"]


def test_help_query_gpu_lists_every_field_once(run_cli: Cli) -> None:
    result = run_cli(None, "query", "--help-query-gpu")
    assert result.rc == 0
    lines = result.out.splitlines()
    for field in ALL_GPU_FIELDS:
        matching = [line for line in lines if line.startswith(f'"{field.name}"')]
        assert len(matching) == 1, field.name
    # nvidia-smi's layout: the names (aliases after "or") on one line, the help on the next.
    assert '\n"clocks.current.sm" or "clocks.sm"\nThe SM clock now.\n' in result.out
    apps = run_cli(None, "query", "--help-query-compute-apps").out
    assert '\n"used_gpu_memory" or "used_memory"\n' in apps and "clocks" not in apps


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        ("2", ["2"]),
        ("3,0", ["3", "0"]),
        ("00000000:87:00.0", ["2"]),
        ("87:00.0", ["2"]),
        ("0000:b7:00.0", ["3"]),
    ],
)
def test_id_selects_by_index_or_bus_id(
    box: Box, run_cli: Cli, ids: str, expected: list[str]
) -> None:
    result = run_cli(box("demo"), "query", "--query-gpu=index", "--format=csv,noheader", "-i", ids)
    assert result.out.splitlines() == expected


def test_id_selects_by_uuid(box: Box, run_cli: Cli) -> None:
    source = box("demo")
    uuid = source.snapshot().gpus[1].uuid
    assert uuid is not None
    result = run_cli(source, "query", "--query-gpu=index,uuid", "--format=csv,noheader", "-i", uuid)
    assert result.out == f"1, {uuid}\n"


def test_unknown_id_is_exit_2_with_no_output(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "query", "--query-gpu=index", "-i", "0,9")
    assert result.rc == 2 and result.out == "" and "'9'" in result.err


def test_filename_gets_the_rows_and_stdout_stays_empty(
    box: Box, run_cli: Cli, tmp_path: Path
) -> None:
    target = tmp_path / "log.csv"
    result = run_cli(box("demo"), "query", "--query-gpu=index,memory.total", "-f", str(target))
    assert result.rc == 0 and result.out == ""
    assert target.read_text().splitlines() == [
        "index, memory.total [MiB]",
        "0, 81920 MiB",
        "1, 81920 MiB",
        "2, 46068 MiB",
        "3, 81920 MiB",
    ]


def test_unwritable_filename_is_one_line_exit_2(box: Box, run_cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "no-such-dir" / "log.csv"
    result = run_cli(box("demo"), "query", "--query-gpu=index", "-f", str(target))
    assert result.rc == 2 and result.out == ""
    assert result.err.count("\n") == 1 and str(target) in result.err
    assert not target.exists()


def test_loop_writes_count_samples_on_schedule(box: Box, run_cli: Cli) -> None:
    source = box("demo", wall=None)  # real timestamps
    result = run_cli(
        source, "query", "--query-gpu=timestamp,index", "-lms", "100", "--count", "4", "-i", "0,1"
    )
    assert result.rc == 0
    lines = result.out.splitlines()
    assert lines[0] == "timestamp, index" and len(lines) == 1 + 4 * 2
    stamps = [datetime.strptime(line.split(", ")[0], "%Y/%m/%d %H:%M:%S.%f") for line in lines[1:]]
    assert [line.split(", ")[1] for line in lines[1:]] == ["0", "1"] * 4
    # Sample k is not taken before start + k * 100 ms: the last is >= 300 ms after the first.
    assert (stamps[-1] - stamps[0]).total_seconds() >= 0.3 - 0.002
    assert source.calls == 4


def test_loop_seconds_option(box: Box, run_cli: Cli) -> None:
    result = run_cli(box("demo"), "query", "--query-gpu=index", "-l", "0.1", "--count", "3")
    assert len(result.out.splitlines()) == 1 + 3 * 4


def test_count_without_loop_takes_that_many_samples(
    box: Box, run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(query, "DEFAULT_LOOP_S", 0.1)  # one interval apart; not 5 s in a test
    result = run_cli(box("demo"), "query", "--query-gpu=index", "--count", "2", "-i", "0")
    assert result.out.splitlines() == ["index", "0", "0"]


class InterruptAfter(SourceBase):
    """A Source that raises KeyboardInterrupt (Ctrl-C) on call number ``n``."""

    def __init__(self, inner: FixedTimeSource, n: int) -> None:
        self.inner, self.n, self.calls = inner, n, 0
        self.simulated, self.dev_dir = True, inner.dev_dir

    def snapshot(self) -> Snapshot:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.inner.snapshot()

    def close(self) -> None:
        self.inner.close()


def test_ctrl_c_ends_cleanly_with_a_complete_file(box: Box, run_cli: Cli, tmp_path: Path) -> None:
    target = tmp_path / "log.csv"
    source = InterruptAfter(box("demo"), 3)
    result = run_cli(
        source, "query", "--query-gpu=index,memory.used", "-lms", "100", "-f", str(target)
    )
    assert result.rc == 0 and result.err == ""
    text = target.read_text()
    assert text.endswith("\n")
    assert len(text.splitlines()) == 1 + 2 * 4  # header + the two samples before Ctrl-C


def test_compute_apps_name_of_a_real_process(box: Box) -> None:
    me = os.getpid()
    scenario = {
        "name": "me",
        "gpu": [{"processes": [{"pid": me, "used_memory_mib": 1234}]}],
    }
    snap = box(scenario).snapshot()
    rows = query.app_rows(snap, [0], query.process_name)
    assert [r.process_name for r in rows] == [psutil.Process(me).cmdline()[0]]


def test_select_gpus_raises_usage_error(box: Box) -> None:
    snap = box("demo").snapshot()
    with pytest.raises(UsageError):
        query.select_gpus(snap, "GPU-not-there")
    assert query.select_gpus(snap, None) == (0, 1, 2, 3)
    assert query.select_gpus(snap, "1,1,0") == (1, 0)


def test_timestamps_are_local_time_with_milliseconds() -> None:
    from gputop.commands.query_fields import timestamp_text

    wall = time.mktime((2024, 1, 31, 12, 34, 56, 0, 0, -1)) + 0.0789
    assert timestamp_text(wall) == "2024/01/31 12:34:56.079"
    assert timestamp_text(wall + 0.9999) == "2024/01/31 12:34:57.079"
    assert timestamp_text(wall - 0.0789 + 0.9996) == "2024/01/31 12:34:57.000"


def test_compute_apps_as_json_lines(box: Box, run_cli: Cli) -> None:
    import json

    result = run_cli(
        box("demo"), "query", "--query-compute-apps=pid,used_memory,process_name", "--format=json"
    )
    records = [json.loads(line) for line in result.out.splitlines()]
    assert records[0] == {"pid": 5048213, "used_gpu_memory": 61000, "process_name": "python"}
    assert {"pid": 5049001, "used_gpu_memory": 6144, "process_name": "python"} in records


def test_nvidia_smi_spellings_of_the_loop_options(box: Box, run_cli: Cli) -> None:
    for argv in (("-lms=100",), ("--loop-ms", "100"), ("-l=0.1",), ("--loop=0.1",)):
        result = run_cli(
            box("demo"), "query", "--query-gpu=index", "-i", "0", "--count", "2", *argv
        )
        assert result.out.splitlines() == ["index", "0", "0"], argv


@pytest.mark.parametrize(
    "argv",
    [
        ("-l", "inf"),
        ("-l", "nan"),
        ("-l", "1e-9"),
        ("-l", "86401"),
        ("-lms", "inf"),
        ("-lms", "99"),
        ("-lms", "1e300"),
    ],
)
def test_loop_intervals_out_of_bounds_are_one_line(
    argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from gputop.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["query", "--query-gpu=index", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    (line,) = err.strip().splitlines()  # one line, no usage block
    assert line.startswith("gputop query: error: argument")
    assert "1 day" in err


def test_query_to_a_full_disk_is_one_line(box: Box, run_cli: Cli) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("needs /dev/full")
    result = run_cli(box("demo"), "query", "--query-gpu=index", "-f", "/dev/full")
    assert result.rc == 2
    # A device is refused as root's files are (a real full disk: tests/commands/test_query_file.py)
    assert result.err.strip() == (
        "gputop: cannot write /dev/full: is not a regular file (a character device)"
    )
