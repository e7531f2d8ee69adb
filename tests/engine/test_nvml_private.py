"""pynvml's private internals behind one module: the feature test, and the public fallback
giving the same snapshots (simulated driver, the real pynvml between)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.engine.model import Snapshot
from gputop.engine.nvml import NvmlSource, pynvml_private
from gputop.sim.scenario import Scenario, load_scenario


def _readings(scenario: Scenario, ticks: int = 4) -> list[Any]:
    """A few snapshots (timing and PCIe, which is timed, left out) and light reads."""
    clock = sim.ManualClock(0.0)
    lib = sim.install(scenario, clock)
    try:
        source = NvmlSource(simulated=True, environ={}, counters=True, dev_dir=lib.dev_dir)
        out: list[Any] = []
        try:
            for _ in range(ticks):
                snap = source.snapshot()
                out.append(_untimed(snap))
                pids = [p.pid for g in snap.gpus for p in g.processes]
                out.append(source.pid_memory(pids).by_gpu_bytes)
                clock.set(clock.now() + 1.5)
        finally:
            source.close()
        return out
    finally:
        sim.uninstall()


def _untimed(snap: Snapshot) -> Snapshot:
    gpus = tuple(dataclasses.replace(g, pcie_rx_kbps=None, pcie_tx_kbps=None) for g in snap.gpus)
    return dataclasses.replace(snap, taken_at_wall=0, taken_at_mono=0, duration_s=0, gpus=gpus)


def test_this_pynvml_has_the_private_the_fast_path_needs() -> None:
    assert pynvml_private.private_api_present()
    assert pynvml_private.FAST


def test_a_pynvml_without_the_private_or_with_another_shape_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", lambda name, extra: None)
    assert not pynvml_private.private_api_present()  # another signature
    monkeypatch.delattr(pynvml, "_nvmlGetFunctionPointer")
    assert not pynvml_private.private_api_present()


@pytest.mark.parametrize("name", ["dgx", "mig"])
def test_the_public_fallback_reads_the_same_as_the_fast_path(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _readings(load_scenario(name))
    monkeypatch.setattr(pynvml_private, "FAST", False)
    public = _readings(load_scenario(name))
    assert public == fast
    assert any(g.processes for snap in fast[::2] for g in snap.gpus)  # lists were read
    assert any(c.nvlink_data_kib for snap in fast[::2] for c in snap.counters) or name == "mig"


def test_the_public_fallback_makes_no_private_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(name: str) -> None:
        raise AssertionError(f"a private pynvml call for {name}")

    monkeypatch.setattr(pynvml_private, "FAST", False)
    # (pynvml's own public wrappers use the private inside: only gputop's own use is refused)
    monkeypatch.setattr(pynvml_private, "function", refused)
    readings = _readings(load_scenario("dgx"), ticks=2)
    assert readings[0].gpus[0].processes
