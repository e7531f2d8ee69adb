"""gputop.experiment in a real InteractiveShell (the magic driven directly) and from code."""

from __future__ import annotations

import gc
import io
import sys
import types
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from gputop import experiment
from gputop.experiment import Experiment, ExperimentError, ExperimentReport
from tests.notebook.conftest import FakeCuda, memory_scenario

MiB = 1024**2
SLACK = 30 * MiB  # the allocator and the interpreter move a few MiB of their own


def near(value: int | None, mib: int) -> bool:
    return value is not None and abs(value - mib * MiB) < SLACK


@pytest.fixture
def source(sim_source: Callable[..., Any]) -> Any:
    return sim_source(memory_scenario())[0]


def run(shell: InteractiveShell, source: Any, line: str) -> str:
    return experiment.magic(shell, source, line.split(), gpu=True)


def report_of(shell: InteractiveShell, source: Any, line: str) -> tuple[ExperimentReport, str]:
    """End the running experiment with the magic: its report and the text printed."""
    e = experiment.active(shell.user_ns)
    assert e is not None
    text = run(shell, source, line)
    assert e.report is not None and experiment.active(shell.user_ns) is None
    return e.report, text


def test_the_end_deletes_what_was_created_and_reports_it(
    shell: InteractiveShell, source: Any, no_torch: None
) -> None:
    shell.run_cell("before = 1", store_history=True)
    gc.collect()
    started = run(shell, source, "start finetune")
    assert started.startswith("[gputop] experiment 'finetune' started: GPU (NVML) 1300 MiB, ")
    shell.run_cell("a = bytearray(300 * 2**20)\nb = bytearray(100 * 2**20)", store_history=True)
    status = run(shell, source, "status")
    assert "2 new variables (a, b); so far GPU (NVML) +0 MiB, host RSS +" in status

    r, text = report_of(shell, source, "end --keep b")

    assert "a" not in shell.user_ns and "before" in shell.user_ns
    assert len(shell.user_ns["b"]) == 100 * MiB
    assert (r.deleted, r.kept) == (("a",), ("b",))
    rss = r.readings["host_rss"]
    assert near(rss.consumed_bytes, 400) and near(rss.reclaimed_bytes, 300)
    assert near(rss.still_held_bytes, 100)
    gpu = r.readings["gpu"]
    assert (gpu.start_bytes, gpu.consumed_bytes, gpu.still_held_bytes) == (1300 * MiB, 0, 0)
    assert [(s.name, s.size_bytes, s.kind) for s in r.survivors] == [("b", 100 * MiB, "bytearray")]
    lines = text.splitlines()
    assert lines[0].startswith("[gputop] experiment 'finetune' ended after ")
    assert lines[0].endswith("s: deleted 1 (a), kept 1 (b)")
    assert lines[1].split() == ["start", "consumed", "reclaimed", "still", "held"]
    assert lines[2].split() == [
        "GPU",
        "(NVML)",
        "1300",
        "MiB",
        "+0",
        "MiB",
        "0",
        "MiB",
        "+0",
        "MiB",
    ]
    assert lines[3].startswith("  GPU0 ") and lines[4].startswith("  GPU1 ")  # two GPUs in use
    assert lines[5].startswith("host RSS ")
    assert text.endswith("largest survivors: b 100 MiB (bytearray)")
    data = r.as_dict()
    assert data["deleted"] == ["a"] and data["survivors"][0]["size_bytes"] == 100 * MiB
    assert data["gpu1_start_bytes"] == 300 * MiB and data["host_rss_still_held_bytes"] > 0
    assert isinstance(data["duration_s"], float)


def test_a_failing_cell_and_a_displayed_output_are_reclaimed(
    shell: InteractiveShell, source: Any, no_torch: None
) -> None:
    gc.collect()
    run(shell, source, "start")
    # Out[n] keeps the displayed value (a memoryview: its repr is short)
    shell.run_cell("shown = memoryview(bytearray(200 * 2**20))\nshown", store_history=True)
    shell.run_cell(
        "def step():\n    act = bytearray(100 * 2**20)\n    raise ValueError\nstep()",
        store_history=True,
    )

    r, text = report_of(shell, source, "end")

    assert near(r.readings["host_rss"].reclaimed_bytes, 300)
    assert near(r.readings["host_rss"].still_held_bytes, 0)
    assert r.outputs_dropped == 1 and r.released.frames_cleared >= 2
    assert "of the last exception, torch not in use, 1 cached outputs (Out[n]) dropped" in text
    assert shell.user_ns["Out"] == {}


def test_fake_torch_tensors_are_freed_and_counted(
    shell: InteractiveShell, source: Any, fake_torch: FakeCuda
) -> None:
    shell.user_ns["cuda"] = fake_torch
    fake_torch.initialised = False  # torch imported, CUDA not used yet: no torch figures
    run(shell, source, "start --no-preload")
    shell.run_cell(
        """
cuda.initialised = True
class Tensor:
    __module__ = "torch"
    device = "cuda:0"
    def __init__(self, mib):
        self.mib = mib
        cuda.alloc(mib)
    def element_size(self):
        return 4
    def nelement(self):
        return self.mib * 2**20 // 4
    def __del__(self):
        cuda.free(self.mib)
weights = Tensor(2000)
grads = Tensor(500)
""",
        store_history=True,
    )
    r, text = report_of(shell, source, "end --keep=grads")
    assert fake_torch.allocated == 500 * MiB and fake_torch.reserved == 500 * MiB
    alloc, reserved = r.readings["torch_allocated"], r.readings["torch_reserved"]
    assert (alloc.consumed_bytes, alloc.reclaimed_bytes, alloc.still_held_bytes) == (
        2500 * MiB,
        2000 * MiB,
        500 * MiB,
    )
    assert (reserved.consumed_bytes, reserved.reclaimed_bytes) == (2500 * MiB, 2000 * MiB)
    assert r.released.torch_emptied and r.deleted == ("Tensor", "weights")
    assert r.survivors[0].kind == "torch.Tensor on cuda:0"
    assert r.survivors[0].size_bytes == 500 * MiB
    rows = {line[:16].strip(): line[16:].split() for line in text.splitlines()}
    assert rows["torch allocated"] == ["0", "MiB", "+2500", "MiB", "2000", "MiB", "+500", "MiB"]
    assert rows["torch reserved"] == ["0", "MiB", "+2500", "MiB", "2000", "MiB", "+500", "MiB"]


def test_one_experiment_at_a_time(shell: InteractiveShell, source: Any, no_torch: None) -> None:
    run(shell, source, "start one")
    line = run(shell, source, "start two")
    assert line == (
        "[gputop] experiment 'one' is already running (since In [1]):"
        " end it first (%gputop experiment end)"
    )
    with pytest.raises(ExperimentError, match=r"^experiment 'one' is already running here"):
        Experiment("three", namespace=shell.user_ns, source=source)
    run(shell, source, "end")
    assert run(shell, source, "status").startswith("[gputop] no experiment running")
    assert run(shell, source, "end").startswith("[gputop] no experiment running")


@pytest.mark.parametrize(
    "line",
    ["", "begin", "keep", "end --keep", "end --keep=", "end a", "status now", "start --fast"],
)
def test_bad_words_are_the_usage(shell: InteractiveShell, source: Any, line: str) -> None:
    assert run(shell, source, line) == experiment.USAGE


def test_keep_by_magic_and_names_not_found(
    shell: InteractiveShell, source: Any, no_torch: None
) -> None:
    run(shell, source, "experiment start")  # a leading "experiment" is accepted
    shell.run_cell("x = [1]\ny = b'abc'\nimport json", store_history=True)
    assert run(shell, source, "keep x,ghost") == "[gputop] experiment keeps x, ghost"
    r, text = report_of(shell, source, "end --keep y")
    assert (r.deleted, r.kept, r.not_found) == ((), ("x", "y"), ("ghost",))
    assert "json" in shell.user_ns  # a module holds nothing: left alone
    assert "kept 2 (x, y) (not found: ghost)" in text
    assert [s.name for s in r.survivors] == ["x", "y"]  # list's shallow size 64+ > 3 bytes
    assert r.survivors[0].kind == "list, shallow" and r.survivors[1].size_bytes == 3


def test_the_context_manager_in_plain_python(source: Any, no_torch: None) -> None:
    ns: dict[str, Any] = {"old": 1}
    out = io.StringIO()
    with redirect_stdout(out), Experiment("block", namespace=ns, source=source) as e:
        ns["big"] = bytearray(50 * MiB)
        ns["os"] = types.ModuleType("os")
        ns["e"] = e
    assert set(ns) == {"old", "os", "e"}
    assert e.report is not None and e.report.deleted == ("big",)
    assert out.getvalue().startswith("[gputop] experiment 'block' ended after ")
    with pytest.raises(ExperimentError, match="has already ended"):
        e.end()
    Experiment(namespace=ns, source=source, show=False).end()  # the namespace is free again


def test_the_namespace_defaults_to_the_callers_globals(source: Any, no_torch: None) -> None:
    e = Experiment(source=source, gpu=False)
    assert e.namespace is globals()
    assert "gpu" not in e.end().readings  # gpu=False: no NVML reading


def test_the_start_preloads_cuda_when_torch_is_imported(
    source: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = types.ModuleType("torch")
    module.cuda = types.SimpleNamespace(is_available=lambda: False)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", module)
    e = Experiment(namespace={}, source=source)
    assert e.preload_line == "[gputop] preload: torch has no CUDA here, nothing to do"
    e.end()
    assert Experiment(namespace={}, source=source, preload=False).preload_line is None
