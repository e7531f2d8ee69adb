"""A real IPython shell with ``%load_ext gputop``, on the simulated driver listing this process."""

from __future__ import annotations

import atexit
import builtins
import io
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from gputop import notebook, sim
from gputop.notebook import CellMonitor

MiB = 1024**2


def memory_scenario(
    step_at: float = 10.0, until: float | None = None, *, second_gpu: bool = True
) -> dict[str, Any]:
    """This process holds 1000 MiB on GPU 0, 5000 MiB from ``step_at`` (until ``until``).

    With ``second_gpu`` it also holds a constant 300 MiB on GPU 1; another process holds 7 MiB.
    """
    memory: dict[str, float] = {"base": 1000, "step_at": step_at, "step_to": 5000}
    if until is not None:
        memory |= {"until": until, "after": 1000}
    me = os.getpid()
    gpus: list[dict[str, Any]] = [
        {"processes": [{"pid": me, "used_memory_mib": memory}, {"pid": 1, "used_memory_mib": 7}]}
    ]
    if second_gpu:
        gpus.append({"processes": [{"pid": me, "used_memory_mib": 300}]})
    return {"name": "notebook", "gpu": gpus}


def wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


class Notebook:
    """The shell, its gputop monitor, and what the monitor printed."""

    def __init__(self, shell: InteractiveShell, monitor: CellMonitor, out: io.StringIO) -> None:
        self.shell = shell
        self.monitor = monitor
        self.out = out

    def run(self, cell: str) -> Any:
        """Run one cell (stored in history: In [n] counts up); the result."""
        return self.shell.run_cell(cell, store_history=True)

    def printed(self) -> list[str]:
        """The lines printed since the last call."""
        text = self.out.getvalue()
        self.out.seek(0)
        self.out.truncate()
        return text.splitlines()

    def line(self, cell: str) -> str:
        """Run a cell; the one gputop line it printed."""
        self.printed()
        self.run(cell)
        lines = [x for x in self.printed() if x.startswith("[gputop] In [")]
        assert len(lines) == 1, lines
        return lines[0]

    def settle(self) -> None:
        """Inside a cell: wait until the sampler has read the driver twice more."""
        tracker = self.monitor.current
        assert tracker is not None
        seen = tracker.samples
        wait_for(lambda: tracker.samples >= seen + 2)


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch) -> Iterator[InteractiveShell]:
    """A fresh InteractiveShell (history in memory); the singleton is cleared afterwards.

    The shell puts its own ``__main__`` in sys.modules and names in builtins (``get_ipython``,
    ``__IPYTHON__``...): all put back afterwards, so no other test thinks it runs in IPython.
    """
    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])
    builtin_names = set(vars(builtins))
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    InteractiveShell.clear_instance()
    sh = InteractiveShell.instance(config=config)
    yield sh
    notebook.unload_ipython_extension(sh)
    sh.history_manager.end_session()
    atexit.unregister(sh.atexit_operations)
    InteractiveShell.clear_instance()
    for name in set(vars(builtins)) - builtin_names:
        delattr(builtins, name)


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)


@pytest.fixture
def nb(
    shell: InteractiveShell,
    sim_source: Callable[..., Any],
    sim_clock: sim.ManualClock,
    no_torch: None,
) -> Notebook:
    """``%load_ext gputop`` on the sim (memory_scenario, manual clock); ``clock``, ``settle``."""
    result = shell.run_cell("%load_ext gputop")
    assert result.success
    monitor = notebook.monitor_of(shell)
    assert monitor is not None
    source, _ = sim_source(memory_scenario())
    out = io.StringIO()
    monitor.source, monitor.file = source, out
    book = Notebook(shell, monitor, out)
    shell.user_ns.update(clock=sim_clock, settle=book.settle)
    return book


class FakeCuda:
    """The interface of ``torch.cuda``'s allocator counters, and nothing else (bytes)."""

    def __init__(self, *, initialised: bool = True) -> None:
        self.allocated = 0
        self.reserved = 0
        self.peak = 0
        self.initialised = initialised
        self.resets = 0
        self.empty_caches = 0

    # what the allocator does
    def alloc(self, mib: int) -> None:
        self.allocated += mib * MiB
        self.reserved = max(self.reserved, self.allocated)
        self.peak = max(self.peak, self.allocated)

    def free(self, mib: int) -> None:
        self.allocated -= mib * MiB

    # torch.cuda's interface
    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialised

    def memory_allocated(self) -> int:
        return self.allocated

    def memory_reserved(self) -> int:
        return self.reserved

    def max_memory_allocated(self) -> int:
        return self.peak

    def reset_peak_memory_stats(self) -> None:
        self.resets += 1
        self.peak = self.allocated

    def empty_cache(self) -> None:
        self.empty_caches += 1
        self.reserved = self.allocated


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """A stand-in "torch" in sys.modules with only the allocator counters."""
    module = types.ModuleType("torch")
    cuda = FakeCuda()
    module.cuda = cuda  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", module)
    return cuda
