"""The cells as data (``as_dict``, ``records()``), ``%gputop warn``, use_demo after a first cell."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from IPython.core.interactiveshell import InteractiveShell

import gputop
from gputop import notebook
from gputop.notebook import Threshold, parse_threshold
from tests.notebook.conftest import FakeCuda, Notebook, memory_scenario
from tests.notebook.test_cells import parts

MiB = 1024**2
GiB = 1024**3

FIXED_KEYS = {
    "number",
    "source",
    "duration_s",
    "error",
    "gpu_error",
    "gpu_delta_bytes",
    "gpu_end_bytes",
    "gpu_peak_bytes",
    "gpu_peak_rise_bytes",
    "gpu_peak_kind",
    "host_rss_delta_bytes",
    "host_rss_end_bytes",
    "host_rss_peak_bytes",
    "host_rss_peak_rise_bytes",
    "host_peak_kind",
    "torch_allocated_delta_bytes",
    "torch_allocated_end_bytes",
    "torch_allocated_peak_bytes",
    "torch_reserved_end_bytes",
    "torch_reserved_peak_bytes",
    "torch_reclaimable_bytes",
    "context_overhead_bytes",
}
PER_GPU = (
    "delta_bytes",
    "end_bytes",
    "peak_bytes",
    "peak_rise_bytes",
    "peak_kind",
    "free_bytes",
    "total_bytes",
)


def test_a_record_is_a_flat_dict_in_bytes_and_seconds(nb: Notebook) -> None:
    nb.run("clock.set(10.0)\nsettle()")
    (record,) = notebook.records(nb.shell)
    gpus = {f"gpu{i}_{k}" for i in (0, 1) for k in PER_GPU}
    assert set(record) == FIXED_KEYS | gpus
    assert record["number"] == 1 and record["source"] == "clock.set(10.0)"
    assert isinstance(record["duration_s"], float) and record["error"] is None
    assert record["gpu_delta_bytes"] == 4000 * MiB
    assert record["gpu_end_bytes"] == 5300 * MiB and record["gpu_peak_bytes"] == 5300 * MiB
    assert record["gpu_peak_rise_bytes"] == 4000 * MiB and record["gpu_peak_kind"] == "sampled"
    assert record["gpu0_delta_bytes"] == 4000 * MiB and record["gpu0_end_bytes"] == 5000 * MiB
    assert record["gpu1_delta_bytes"] == 0 and record["gpu1_end_bytes"] == 300 * MiB
    assert record["gpu0_total_bytes"] == 80 * GiB
    # another process holds 7 MiB, and the (simulated) driver reserves 512 MiB of each GPU
    assert record["gpu0_free_bytes"] == 80 * GiB - (5007 + 512) * MiB
    assert record["host_peak_kind"] == "exact"
    assert record["host_rss_end_bytes"] > 0
    assert record["torch_allocated_end_bytes"] is None  # no torch: the keys stay, as None
    json.dumps(record)  # plain data all through


def test_records_with_torch(nb: Notebook, fake_torch: FakeCuda) -> None:
    nb.shell.user_ns["cuda"] = fake_torch
    nb.run("cuda.alloc(600)\ncuda.free(200)")
    (record,) = nb.monitor.as_dicts()
    assert record["torch_allocated_delta_bytes"] == 400 * MiB
    assert record["torch_allocated_peak_bytes"] == 600 * MiB
    assert record["torch_reserved_end_bytes"] == 600 * MiB
    assert record["torch_reserved_peak_bytes"] == 600 * MiB
    assert record["torch_reclaimable_bytes"] == 200 * MiB
    assert record["context_overhead_bytes"] == 700 * MiB  # 1300 in NVML - 600 reserved
    assert record["gpu0_torch_reclaimable_bytes"] == 200 * MiB
    assert "gpu1_torch_reclaimable_bytes" not in record  # torch is not on GPU 1


def test_records_of_the_only_shell_and_a_failed_cell(nb: Notebook) -> None:
    nb.run("x = 1")
    nb.run("raise KeyError('k')")
    rows = notebook.records()
    assert [r["number"] for r in rows] == [1, 2]
    assert [r["error"] for r in rows] == [None, "KeyError"]


def test_records_without_the_extension_say_what_to_do(shell: InteractiveShell) -> None:
    with pytest.raises(ValueError, match="run %load_ext gputop first"):
        notebook.records()
    with pytest.raises(ValueError, match="run %load_ext gputop first"):
        notebook.records(shell)


# -- %gputop warn ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2GiB", Threshold(bytes_=2 * GiB)),
        ("2 GiB", Threshold(bytes_=2 * GiB)),
        ("500mib", Threshold(bytes_=500 * MiB)),
        ("1.5G", Threshold(bytes_=int(1.5 * GiB))),
        ("2GB", Threshold(bytes_=2 * GiB)),
        ("4096", Threshold(bytes_=4096)),
        ("10%", Threshold(percent=10.0)),
        ("off", None),
        ("OFF", None),
    ],
)
def test_parse_threshold(text: str, expected: Threshold | None) -> None:
    assert parse_threshold(text) == expected


@pytest.mark.parametrize("text", ["lots", "2XB", "-1GiB", "0%", "150%", "%", "GiB"])
def test_parse_threshold_refuses(text: str) -> None:
    with pytest.raises(ValueError, match=r"^(expected a size|a share is)"):
        parse_threshold(text)


def test_warn_when_a_gpu_runs_low(nb: Notebook) -> None:
    nb.run("%gputop warn 75GiB")
    assert nb.printed() == ["[gputop] warn when a GPU this process uses has under 75.0 GiB free"]
    nb.run("x = 1")  # 78.5 GiB free on GPU 0: no warning
    assert len(nb.printed()) == 1
    nb.run("clock.set(10.0)")
    lines = nb.printed()
    assert lines[1:] == [
        "[gputop] warning: GPU0 has 74.6 GiB free after In [3], under 75.0 GiB (%gputop warn)"
    ]
    nb.run("%gputop warn 95%")
    nb.printed()
    nb.run("y = 2")  # 74.6 of 80 GiB is 93 %; GPU 1 has 99 % free
    lines = nb.printed()
    assert len(lines) == 2 and lines[1].startswith("[gputop] warning: GPU0 has 74.6 GiB free")
    assert lines[1].endswith("under 95% (%gputop warn)")
    nb.run("%gputop warn")
    assert nb.printed() == ["[gputop] warn: under 95% free"]
    nb.run("%gputop warn off")
    assert nb.printed() == ["[gputop] warn off"]
    nb.run("z = 3")
    assert len(nb.printed()) == 1


def test_warn_with_bad_input_says_so_in_one_line(nb: Notebook) -> None:
    nb.run("%gputop warn 75GiB")
    nb.run("%gputop warn plenty")
    assert nb.printed()[1:] == [
        "[gputop] warn: expected a size (2GiB, 500MiB), a share (10%) or off, got 'plenty'"
    ]
    assert nb.monitor.warn == Threshold(bytes_=75 * GiB)  # the setting stays as it was


def test_usage_names_warn(nb: Notebook) -> None:
    nb.run("%gputop nonsense")
    assert "warn 2GiB | warn 10% | warn off" in "\n".join(nb.printed())


# -- use_demo() after the first cell -------------------------------------------------------------


@pytest.fixture
def in_process() -> Iterator[None]:
    gputop.use_driver(in_process=True)
    yield
    gputop.use_driver()


def test_use_demo_after_the_first_cell_takes_effect(
    nb: Notebook, tmp_path: Path, in_process: None
) -> None:
    """No GPU at the first cell: it tracks the host only; after use_demo() the GPU is back."""
    nb.monitor.source = None  # the shared connection, as a user has it
    nb.monitor.gpu = None
    gputop.use_demo(str(tmp_path / "missing.json"))  # as good as no driver: it does not open
    nb.printed()
    nb.run("x = 1")
    first = nb.printed()
    assert first[0].startswith("[gputop] no GPU readings (")
    assert parts(first[1])[2][0] == "GPU n/a"
    scenario = tmp_path / "me.json"
    scenario.write_text(json.dumps(memory_scenario(second_gpu=False)))
    nb.run(f"import gputop; gputop.use_demo({str(scenario)!r})")
    fields = parts(nb.line("y = 2"))[2]
    assert fields[0].startswith("GPU0 +0 MiB (peak≥ +0 MiB sampled) = 1000 MiB, ")


def test_full_reads_the_free_memory_from_its_snapshots(nb: Notebook) -> None:
    nb.run("%gputop full")
    nb.run("clock.set(10.0)")
    record = nb.monitor.as_dicts()[-1]
    assert record["gpu0_free_bytes"] == 80 * GiB - (5007 + 512) * MiB
    assert record["gpu1_total_bytes"] == 80 * GiB
