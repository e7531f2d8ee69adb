"""Snapshot.counters are opt-in (issue 20): read only when the source was opened for them.

The dashboard, --once, query, dmon and the notebook never show them; reading them every tick
made the driver process half as expensive again. (Xid events are registered either way: the GPU
health verdict reads them, one wait call a tick.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gputop import sim
from gputop.engine.source import Source
from gputop.sources import open_source

BOX = """
name = "counters"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
compute_capability = [9, 0]
power_w = 200
pcie_replay_count = 4
nvlink_links = 2
count = 2
"""


@pytest.fixture
def box(tmp_path: Path) -> str:
    path = tmp_path / "box.toml"
    path.write_text(BOX, encoding="utf-8")
    return str(path)


@pytest.fixture
def opened() -> Iterator[list[Source]]:
    sources: list[Source] = []
    yield sources
    for source in sources:
        source.close()


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "driver-process"])
def test_without_counters_a_snapshot_has_none(
    box: str, opened: list[Source], isolated: bool
) -> None:
    source = open_source(scenario=box, isolated=isolated, environ={})
    opened.append(source)
    snap = source.snapshot()
    assert len(snap.gpus) == 2 and snap.gpus[0].power_draw_mw is not None
    assert snap.counters == ()


@pytest.mark.parametrize("isolated", [False, True], ids=["in-process", "driver-process"])
def test_with_counters_a_snapshot_has_them(box: str, opened: list[Source], isolated: bool) -> None:
    source = open_source(scenario=box, isolated=isolated, counters=True, environ={})
    opened.append(source)
    snap = source.snapshot()
    assert [c.index for c in snap.counters] == [0, 1]
    assert all(c.pcie_replay_count == 4 and c.xid_count == 0 for c in snap.counters)


def test_without_counters_no_counter_call(box: str, opened: list[Source]) -> None:
    source = open_source(scenario=box, environ={})
    opened.append(source)
    lib = sim.active()
    assert lib is not None
    for _ in range(3):
        source.snapshot()
    for call in (
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetPcieReplayCounter",
        "nvmlGpmSampleGet",
    ):
        assert lib.calls[call] == 0, call
    assert lib.calls["nvmlDeviceGetPowerUsage"] == 6  # the snapshot itself was read


def test_with_counters_xid_events_are_registered(box: str, opened: list[Source]) -> None:
    source = open_source(scenario=box, counters=True, environ={})
    opened.append(source)
    lib = sim.active()
    assert lib is not None
    source.snapshot()
    assert lib.calls["nvmlDeviceRegisterEvents"] == 2
    assert lib.calls["nvmlDeviceGetTotalEnergyConsumption"] == 2
