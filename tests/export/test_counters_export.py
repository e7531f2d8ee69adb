"""dcgm-exporter's default counters beyond a sample's readings, the host label's name, the Xid
labels and the DCGM 4.7 field names.

Rendered by gputop.export.prom from snapshots of the simulated driver (the real pynvml on it).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop import dcgm, sim
from gputop.commands.export import FIELD_NAMES_CHOICES, HOST_LABEL_CHOICES, add_arguments
from gputop.engine.model import Snapshot
from gputop.export.metrics import COUNTER_FIELDS, HOST_LABELS, FieldNames
from gputop.export.prom import SnapshotCollector, generate_text, make_registry
from tests.export.conftest import exporter_process, http_get, samples

Source = Any
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
H100: dict[str, Any] = {
    "name": "NVIDIA H100 80GB HBM3",
    "compute_capability": [9, 0],
    "power_w": 250,
    "memory_temperature_c": 48,
    "pcie_replay_count": 2,
    "remapped_rows_correctable": 5,
    "remapped_rows_uncorrectable": 1,
    "nvlink_links": 1,
    "nvlink_tx_kibps": 10,
    "nvlink_rx_kibps": 30,
    "util_gpu": 40,
    "gpm_tensor_util": 25,
    "util_memory": 70,
    "xids": [{"at_s": 2, "xid": 79}],
}
A100: dict[str, Any] = {"name": "NVIDIA A100-SXM4-80GB", "compute_capability": [8, 0]}


class Holder:
    def __init__(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self.errors = 0
        self.restarts = 0


def render(snapshot: Snapshot, host_label: str = "hostname", field_names: str = "legacy") -> str:
    collector = SnapshotCollector(
        Holder(snapshot), host_label=host_label, field_names=FieldNames(field_names)
    )
    return generate_text(make_registry(collector)).decode()


def one(text: str, name: str, gpu: str = "0") -> tuple[dict[str, str], float]:
    (found,) = [(lab, v) for lab, v in samples(text, name) if lab["gpu"] == gpu]
    return found


@pytest.fixture
def ticked(
    sim_source: Callable[..., tuple[Any, sim.SimLibrary]], sim_clock: sim.ManualClock
) -> Callable[..., Snapshot]:
    """Open a scenario, read it at 0 s and return its reading at ``t`` seconds."""

    def make(scenario: dict[str, Any] | str, t: float = 4.0) -> Snapshot:
        source, _ = sim_source(scenario)
        source.snapshot()
        sim_clock.set(t)
        snap: Snapshot = source.snapshot()
        return snap

    return make


def test_counters_of_a_hopper_gpu(ticked: Callable[..., Snapshot]) -> None:
    text = render(ticked({"gpu": [H100, A100]}))
    labels, energy = one(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert energy == 1_000_000  # 250 W for 4 s, in mJ
    assert set(GPU_LABELS) <= set(labels) and labels["hostname"]
    assert one(text, "DCGM_FI_DEV_MEMORY_TEMP")[1] == 48
    assert one(text, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")[1] == 2
    assert one(text, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS")[1] == 5
    assert one(text, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")[1] == 1
    assert one(text, "DCGM_FI_DEV_ROW_REMAP_FAILURE")[1] == 0
    assert one(text, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")[1] == 4 * 40  # KiB, tx + rx
    assert one(text, "DCGM_FI_DEV_XID_ERRORS")[1] == 79
    assert one(text, "DCGM_FI_DEV_XID_ERRORS", gpu="1")[1] == 0  # none yet: 0, as DCGM says
    assert one(text, "gputop_xid_errors_total")[1] == 1
    assert one(text, "gputop_xid_errors_total", gpu="1")[1] == 0
    assert one(text, "gputop_xid_last_timestamp_seconds")[1] > 1.7e9
    assert not [
        lab for lab, _ in samples(text, "gputop_xid_last_timestamp_seconds") if lab["gpu"] == "1"
    ]
    # DCGM's profiling fields are ratios; GPM gives percentages.
    assert one(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")[1] == pytest.approx(0.40)
    assert one(text, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")[1] == pytest.approx(0.25)
    assert one(text, "DCGM_FI_PROF_DRAM_ACTIVE")[1] == pytest.approx(0.70)


def test_what_an_older_gpu_lacks_is_left_out(ticked: Callable[..., Snapshot]) -> None:
    text = render(ticked({"gpu": [A100]}))
    for name in (
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_MEMORY_TEMP",  # no HBM sensor on the default GPU
    ):
        assert samples(text, name) == [], name
    assert one(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[1] == 4 * 60_000


def test_families_have_dcgm_help_and_type(ticked: Callable[..., Snapshot]) -> None:
    text = render(ticked({"gpu": [H100]}))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert {f.name for f in COUNTER_FIELDS} >= {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    }
    for field in COUNTER_FIELDS:
        if field.name == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL":
            continue  # the simulated H100 reports no ECC
        assert families[field.name].type == "counter", field.name
        assert families[field.name].documentation == field.help
        # dcgm-exporter's exact name, not prometheus-client's NAME_total
        assert f"\n# TYPE {field.name} counter\n" in text
        assert f"\n{field.name}{{" in text and f"{field.name}_total" not in text
    assert families["DCGM_FI_DEV_XID_ERRORS"].type == "gauge"  # the last Xid: a gauge
    assert families["gputop_xid_errors"].type == "counter"
    assert "\ngputop_xid_errors_total{" in text  # gputop's own counters keep _total


def test_xid_labels_as_dcgm_exporter(ticked: Callable[..., Snapshot]) -> None:
    text = render(ticked({"gpu": [H100, A100]}))
    labels, value = one(text, "DCGM_FI_DEV_XID_ERRORS")
    assert (value, labels["err_code"], labels["err_msg"]) == (
        79,
        "79",
        "GPU has fallen off the bus",
    )
    labels, value = one(text, "DCGM_FI_DEV_XID_ERRORS", gpu="1")
    assert (value, labels["err_code"], labels["err_msg"]) == (0, "0", "No Error")
    assert "err_code" not in one(text, "DCGM_FI_DEV_GPU_TEMP")[0]
    assert dcgm.xid_message(10_000) == "Unknown Error"


def test_dcgm47_names_and_units(ticked: Callable[..., Snapshot]) -> None:
    snap = ticked({"gpu": [H100]})
    legacy = render(snap)
    new = render(snap, field_names="dcgm4.7")
    clock = one(legacy, "DCGM_FI_DEV_SM_CLOCK")[1]
    assert one(new, "DCGM_FI_DEV_SM_CLOCK_HERTZ")[1] == clock * 1e6
    assert samples(new, "DCGM_FI_DEV_SM_CLOCK") == []
    assert one(new, "DCGM_FI_DEV_GPU_UTIL_RATIO")[1] == pytest.approx(0.40)
    energy = one(legacy, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")[1]
    assert one(new, "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL")[1] == energy / 1000
    assert "# TYPE DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL counter" in new
    total = one(legacy, "DCGM_FI_DEV_FB_TOTAL")[1]
    assert one(new, "DCGM_FI_DEV_FB_CAPACITY_BYTES")[1] == total * 2**20
    # no confirmed DCGM 4.7 name: the legacy one stays
    assert one(new, "DCGM_FI_DEV_FB_USED")[1] == one(legacy, "DCGM_FI_DEV_FB_USED")[1]
    labels = one(new, "DCGM_FI_DEV_FB_USED")[0]
    assert "DCGM_FI_SYSTEM_DRIVER_VERSION" in labels and "DCGM_FI_DRIVER_VERSION" not in labels
    both = render(snap, field_names="both")
    assert one(both, "DCGM_FI_DEV_SM_CLOCK")[1] == clock
    assert one(both, "DCGM_FI_DEV_SM_CLOCK_HERTZ")[1] == clock * 1e6
    assert "DCGM_FI_DRIVER_VERSION" in one(both, "DCGM_FI_DEV_SM_CLOCK")[0]
    assert "DCGM_FI_SYSTEM_DRIVER_VERSION" in one(both, "DCGM_FI_DEV_SM_CLOCK_HERTZ")[0]
    for name in dcgm.BY_NEW:  # every new name reads back to the legacy value
        f = dcgm.BY_NEW[name]
        for lab, v in samples(both, name):
            (legacy_value,) = [lv for ll, lv in samples(both, f.legacy) if ll["gpu"] == lab["gpu"]]
            assert dcgm.legacy_value(name, v) == pytest.approx(legacy_value), name


def test_a_lost_gpu_has_no_counter_series(
    sim_source: Callable[..., tuple[Any, sim.SimLibrary]], sim_clock: sim.ManualClock
) -> None:
    source, _ = sim_source({"gpu": [{**H100, "lost_after_s": 3}, A100]})
    source.snapshot()
    sim_clock.set(4.0)
    text = render(source.snapshot())
    assert [lab["gpu"] for lab, _ in samples(text, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")] == ["1"]
    assert [lab["gpu"] for lab, _ in samples(text, "gputop_xid_errors_total")] == ["1"]


def test_the_dgx_demo_exports_profiling_and_nvlink(ticked: Callable[..., Snapshot]) -> None:
    text = render(ticked("dgx", t=50.0))
    assert len(samples(text, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")) == 8
    assert all(0 < v < 1 for _, v in samples(text, "DCGM_FI_PROF_GR_ENGINE_ACTIVE"))
    assert len(samples(text, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")) == 8
    assert one(text, "DCGM_FI_DEV_XID_ERRORS", gpu="5")[1] == 13


@pytest.mark.parametrize("host_label", HOST_LABELS)
def test_the_host_label_is_named_as_asked(ticked: Callable[..., Snapshot], host_label: str) -> None:
    snap = ticked({"gpu": [H100]})
    text = render(snap, host_label)
    other = ({"Hostname", "hostname"} - {host_label}).pop()
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"):
        labels, _ = one(text, name)
        assert labels[host_label] == snap.system.hostname and other not in labels
    # gputop's own info metric keeps its own label name
    ((info, _),) = samples(text, "gputop_info")
    assert info["hostname"] == snap.system.hostname


def test_the_options_default_to_the_current_release() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args([]).hostname_label == "hostname"
    assert parser.parse_args(["--hostname-label", "Hostname"]).hostname_label == "Hostname"
    with pytest.raises(SystemExit):
        parser.parse_args(["--hostname-label", "host"])
    assert HOST_LABEL_CHOICES == HOST_LABELS
    assert parser.parse_args([]).field_names == "legacy"
    assert tuple(FieldNames) == FIELD_NAMES_CHOICES
    with pytest.raises(SystemExit):
        parser.parse_args(["--field-names", "dcgm5"])


def test_the_exporter_process_takes_the_option() -> None:
    with exporter_process("--interval", "1", "--hostname-label", "Hostname") as url:
        body = http_get(url)
    rows = samples(body, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    assert len(rows) == 4 and all(lab["Hostname"] and "hostname" not in lab for lab, _ in rows)
