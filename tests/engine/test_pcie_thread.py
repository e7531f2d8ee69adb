"""PCIe throughput: NVML samples ~20 ms a call, so a slow call moves to a thread of its own, on
the real clock; a simulated box on a hand-moved clock keeps it in line (its frames must follow
that clock alone: the screenshots and SVG snapshots are drawn from them)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.sources import open_simulated


@pytest.fixture
def slow_pcie(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = pynvml.nvmlDeviceGetPcieThroughput

    def slow(handle: Any, counter: int) -> int:
        time.sleep(0.02)  # as real NVML: it samples for ~20 ms
        return int(real(handle, counter))

    monkeypatch.setattr(pynvml, "nvmlDeviceGetPcieThroughput", slow)
    yield
    sim.uninstall()


def _pcie_threads() -> int:
    return sum(t.name == "gputop-pcie" and t.is_alive() for t in threading.enumerate())


@pytest.mark.usefixtures("slow_pcie")
@pytest.mark.parametrize("hand_moved", [True, False])
def test_slow_pcie_reads_move_to_a_thread_unless_the_clock_is_the_callers(
    hand_moved: bool,
) -> None:
    before = _pcie_threads()
    source = open_simulated("demo", sim.ManualClock(0.0) if hand_moved else None)
    try:
        source.snapshot()
        source.snapshot()
        assert _pcie_threads() - before == (0 if hand_moved else 1)
    finally:
        source.close()
