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
    """The interface of ``torch.cuda``'s allocator counters, and nothing else (bytes).

    ``devices`` CUDA devices, each with its own counters; a call without a device (as torch's)
    means the current one, so a one-device test reads as before.
    """

    def __init__(self, *, initialised: bool = True, devices: int = 1) -> None:
        self.initialised = initialised
        self.current = 0
        self.allocated_by = [0] * devices
        self.reserved_by = [0] * devices
        self.peak_by = [0] * devices
        self.peak_reserved_by = [0] * devices
        self.resets = 0  # reset_peak_memory_stats calls on the current device
        self.resets_by = [0] * devices
        self.empty_caches = 0

    def _d(self, device: int | None) -> int:
        return self.current if device is None else int(device)

    # the current device's figures, as the one-device tests know them
    @property
    def allocated(self) -> int:
        return self.allocated_by[self.current]

    @property
    def reserved(self) -> int:
        return self.reserved_by[self.current]

    @reserved.setter
    def reserved(self, value: int) -> None:
        self.reserved_by[self.current] = value

    @property
    def peak(self) -> int:
        return self.peak_by[self.current]

    # what the allocator does
    def alloc(self, mib: int, device: int | None = None) -> None:
        d = self._d(device)
        self.allocated_by[d] += mib * MiB
        self.reserved_by[d] = max(self.reserved_by[d], self.allocated_by[d])
        self.peak_by[d] = max(self.peak_by[d], self.allocated_by[d])
        self.peak_reserved_by[d] = max(self.peak_reserved_by[d], self.reserved_by[d])

    def free(self, mib: int, device: int | None = None) -> None:
        self.allocated_by[self._d(device)] -= mib * MiB

    # torch.cuda's interface
    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialised

    def device_count(self) -> int:
        return len(self.allocated_by)

    def current_device(self) -> int:
        return self.current

    def set_device(self, device: int) -> None:
        self.current = device

    def memory_allocated(self, device: int | None = None) -> int:
        return self.allocated_by[self._d(device)]

    def memory_reserved(self, device: int | None = None) -> int:
        return self.reserved_by[self._d(device)]

    def max_memory_allocated(self, device: int | None = None) -> int:
        return self.peak_by[self._d(device)]

    def max_memory_reserved(self, device: int | None = None) -> int:
        return self.peak_reserved_by[self._d(device)]

    def reset_peak_memory_stats(self, device: int | None = None) -> None:
        d = self._d(device)
        self.resets_by[d] += 1
        if d == self.current:
            self.resets += 1
        self.peak_by[d] = self.allocated_by[d]
        self.peak_reserved_by[d] = self.reserved_by[d]

    def empty_cache(self) -> None:
        self.empty_caches += 1
        for d in range(len(self.reserved_by)):
            self.reserved_by[d] = self.allocated_by[d]


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> FakeCuda:
    """A stand-in "torch" in sys.modules with only the allocator counters (one device)."""
    return install_fake_torch(monkeypatch, FakeCuda())


def install_fake_torch(monkeypatch: pytest.MonkeyPatch, cuda: FakeCuda) -> FakeCuda:
    """Put ``cuda`` in sys.modules as "torch".cuda."""
    module = types.ModuleType("torch")
    module.cuda = cuda  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", module)
    return cuda
