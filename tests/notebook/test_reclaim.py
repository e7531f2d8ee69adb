"""gputop.reclaim in a real InteractiveShell: the frames a failed cell leaves, torch's cache."""

from __future__ import annotations

import gc
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from gputop import reclaim, tracking
from tests.notebook.conftest import FakeCuda, memory_scenario

MiB = 1024**2

# A cell that fails while one of its frames holds 300 MiB of touched host memory.
FAILING_CELL = """
def step():
    activations = bytearray(300 * 2**20)  # bytearray(n) writes its zeros: resident
    raise ValueError("out of memory, say")
step()
"""


def rss() -> int:
    value = tracking.host_rss_bytes()
    assert value is not None
    return value


def frame_of_step() -> types.FrameType | None:
    """The ``step`` frame the last traceback still holds, if any."""
    tb = getattr(sys, "last_traceback", None)
    while tb is not None:
        if tb.tb_frame.f_code.co_name == "step":
            return tb.tb_frame
        tb = tb.tb_next
    return None


def test_a_failing_cell_keeps_its_frames_and_reclaim_gives_them_back(
    shell: InteractiveShell, no_torch: None
) -> None:
    gc.collect()
    start = rss()
    result = shell.run_cell(FAILING_CELL, store_history=True)
    assert isinstance(result.error_in_exec, ValueError)
    frame = frame_of_step()
    assert frame is not None and "activations" in frame.f_locals
    gc.collect()
    assert rss() - start > 290 * MiB  # IPython keeps it: gc.collect() alone gives nothing back

    # The frame itself is still referenced here (as a debugger or a log might): its locals go.
    done = reclaim.reclaim(shell, None, gpu=False)

    assert frame.f_locals == {}
    assert start - 20 * MiB < rss() < start + 20 * MiB
    assert done.before.host_rss_bytes is not None and done.after.host_rss_bytes is not None
    assert done.before.host_rss_bytes - done.after.host_rss_bytes > 290 * MiB
    assert done.released.frames_cleared >= 2  # the cell's frame and step's
    assert "sys.last_traceback" in done.released.holders
    assert "shell.last_execution_result.error_in_exec" in done.released.holders
    assert not hasattr(sys, "last_traceback") and not hasattr(sys, "last_value")
    assert shell.InteractiveTB.tb is None
    line = done.line()
    assert line.startswith("[gputop] reclaim: gc.collect() found ")
    assert "of the last exception" in line and "torch not in use" in line
    mib = line.split("RSS ")[1].split()
    assert int(mib[0]) - int(mib[3]) > 290  # "RSS 700 MiB -> 400 MiB (-300 MiB)"


def test_user_variables_survive_the_release(shell: InteractiveShell, no_torch: None) -> None:
    shell.run_cell("kept = bytearray(10)\nraise KeyError('x')", store_history=True)
    assert hasattr(sys, "last_traceback")
    reclaim.release(shell)
    assert shell.user_ns["kept"] == bytearray(10)  # the cell's own frame is the namespace's
    assert shell.run_cell("kept.append(1)").success


def test_nothing_to_clear_without_an_exception(shell: InteractiveShell, no_torch: None) -> None:
    shell.run_cell("x = 1", store_history=True)
    done = reclaim.release(shell)
    assert done.frames_cleared == 0 and done.holders == ()
    assert "last exception" not in done.text()


def test_a_finaliser_in_the_failing_frame_frees_torch_memory(
    shell: InteractiveShell, fake_torch: FakeCuda, sim_source: Callable[..., Any]
) -> None:
    source, _ = sim_source(memory_scenario(second_gpu=False))
    shell.user_ns["cuda"] = fake_torch
    shell.run_cell(
        """
class Tensor:
    def __init__(self, mib):
        self.mib = mib
        cuda.alloc(mib)
    def __del__(self):
        cuda.free(self.mib)

def forward():
    hidden = Tensor(2000)
    raise RuntimeError("CUDA out of memory")
forward()
""",
        store_history=True,
    )
    gc.collect()
    assert fake_torch.allocated == 2000 * MiB  # the frame still holds the tensor

    done = reclaim.reclaim(shell, source, gpu=True)

    assert fake_torch.allocated == 0 and fake_torch.empty_caches == 1
    assert done.before.torch_allocated_bytes == 2000 * MiB
    assert done.after.torch_allocated_bytes == 0
    assert (done.before.torch_reserved_bytes, done.after.torch_reserved_bytes) == (2000 * MiB, 0)
    line = done.line()
    assert "torch cache emptied" in line
    assert "torch reserved 2000 MiB -> 0 MiB (-2000 MiB), allocated 2000 MiB -> 0 MiB" in line
    assert "GPU (NVML) 1000 MiB -> 1000 MiB (+0 MiB)" in line  # the sim does not follow torch
    data = done.as_dict()
    assert data["torch_allocated_reclaimed_bytes"] == 2000 * MiB
    assert data["gpu0_before_bytes"] == 1000 * MiB and data["torch_cache_emptied"] is True


def test_a_failing_driver_is_one_line(shell: InteractiveShell, no_torch: None) -> None:
    class Broken:
        simulated = True

        def pid_memory(self, pids: Any) -> Any:
            raise OSError("NVML: GPU is lost\nsecond line")

        def snapshot(self) -> Any:
            raise OSError("NVML: GPU is lost")

    now = reclaim.measure(Broken(), gpu=True, timeout_s=2.0)  # type: ignore[arg-type]
    assert now.gpu_bytes is None and now.gpu_error == "NVML: GPU is lost"
    assert now.host_rss_bytes is not None
    line = reclaim.reclaim(shell, Broken(), gpu=True, timeout_s=2.0).line()  # type: ignore[arg-type]
    assert "GPU n/a: NVML: GPU is lost |" in line and "\n" not in line


def test_a_suspended_generator_in_a_traceback_is_not_closed() -> None:
    def gen() -> Any:
        try:
            raise ValueError("caught inside")
        except ValueError as e:
            yield e
        yield "still alive"

    g = gen()
    exc = next(g)
    sys.last_value, sys.last_traceback = exc, exc.__traceback__
    reclaim.release(None)
    assert next(g) == "still alive"  # frame.clear() would have closed it before Python 3.13


# -- preload ----------------------------------------------------------------------------------
class PreloadCuda:
    """torch.cuda's calls preload uses."""

    def __init__(self, *, available: bool = True) -> None:
        self.available = available
        self.inits = 0

    def is_available(self) -> bool:
        return self.available

    def is_initialized(self) -> bool:
        return self.inits > 0

    def init(self) -> None:
        self.inits += 1

    def current_device(self) -> int:
        return 1


@pytest.fixture
def preload_torch(monkeypatch: pytest.MonkeyPatch) -> tuple[PreloadCuda, list[str]]:
    module = types.ModuleType("torch")
    cuda = PreloadCuda()
    made: list[str] = []
    module.cuda = cuda  # type: ignore[attr-defined]
    module.ones = lambda n, device: made.append(device)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", module)
    return cuda, made


def test_preload_creates_the_context_on_the_current_device(
    preload_torch: tuple[PreloadCuda, list[str]],
) -> None:
    cuda, made = preload_torch
    line = reclaim.preload()
    assert line.startswith("[gputop] preload: CUDA context created on cuda:1 in ")
    assert cuda.inits == 1 and made == ["cuda:1"]
    assert reclaim.preload() == "[gputop] preload: the CUDA context on cuda:1 was already there"


def test_preload_without_cuda(preload_torch: tuple[PreloadCuda, list[str]]) -> None:
    cuda, made = preload_torch
    cuda.available = False
    assert reclaim.preload() == "[gputop] preload: torch has no CUDA here, nothing to do"
    assert cuda.inits == 0 and made == []


def test_preload_never_imports_torch_unasked(no_torch: None) -> None:
    line = reclaim.preload()
    assert "torch is not imported, nothing to do" in line
    assert "torch" not in sys.modules


def test_preload_may_import_torch_when_asked(
    no_torch: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "path", [])  # no torch to find, here or on a GPU box
    line = reclaim.preload(import_torch=True)
    assert line == "[gputop] preload: cannot import torch: No module named 'torch'"
