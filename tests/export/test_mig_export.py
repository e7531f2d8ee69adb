"""The exporter on a MIG box: dcgm-exporter's default shape, one series per GPU instance.

GPU 0 of the ``mig`` scenario: 3g.40gb (GI 1) + 2g.20gb (GI 5) + 1g.10gb (GI 13) + 1g.10gb
(GI 14); GPU 1 a whole H100.
"""

from __future__ import annotations

from collections.abc import Callable

from gputop.engine.model import Snapshot
from gputop.export.metrics import Family, dcgm_families, process_family
from gputop.export.prom import SnapshotCollector, generate_text, make_registry
from gputop.units import whole_mib
from tests.conftest import FixedTimeSource, snapshot_of
from tests.export.conftest import samples

Box = Callable[..., FixedTimeSource]
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_NAMES = (*GPU_LABELS, "GPU_I_PROFILE", "GPU_I_ID", "hostname", "DCGM_FI_DRIVER_VERSION")


def family(families: list[Family], name: str) -> Family:
    (found,) = [f for f in families if f.name == name]
    return found


def labelled(fam: Family) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(zip(s.label_names or fam.label_names, s.labels, strict=True)), s.value)
        for s in fam.samples
    ]


def test_a_mig_gpu_is_one_series_per_gpu_instance(box: Box) -> None:
    snap = snapshot_of(box)
    used = labelled(family(dcgm_families(snap), "DCGM_FI_DEV_FB_USED"))
    # no whole-GPU series for the MIG GPU 0 (dcgm-exporter's default, --devices f)
    assert [(lab["gpu"], lab.get("GPU_I_ID"), v) for lab, v in used] == [
        ("0", "1", 30086.0),
        ("0", "5", 14125.0),
        ("0", "13", 6212.0),
        ("0", "14", 12.0),
        ("1", None, 61000.0),
    ]
    # so a sum counts each MiB once: the instances add up to the GPU's used memory
    gpu0 = snap.gpus[0]
    assert sum(v for lab, v in used if lab["gpu"] == "0") == whole_mib(gpu0.memory_used_bytes or 0)
    profiles = [lab["GPU_I_PROFILE"] for lab, _ in used if "GPU_I_ID" in lab]
    assert profiles == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    for lab, _ in used:
        if "GPU_I_ID" in lab:  # the parent GPU's identity, as dcgm-exporter gives it
            assert (lab["UUID"], lab["device"], lab["modelName"]) == (
                gpu0.uuid,
                "nvidia0",
                gpu0.name,
            )
    total = labelled(family(dcgm_families(snap), "DCGM_FI_DEV_FB_TOTAL"))
    assert [v for lab, v in total if "GPU_I_ID" in lab] == [40448.0, 20096.0, 9984.0, 9984.0]
    free = labelled(family(dcgm_families(snap), "DCGM_FI_DEV_FB_FREE"))
    assert [v for lab, v in free if "GPU_I_ID" in lab] == [10362.0, 5971.0, 3772.0, 9972.0]


def test_mig_series_put_the_two_labels_after_model_name(box: Box) -> None:
    fam = family(dcgm_families(snapshot_of(box)), "DCGM_FI_DEV_FB_USED")
    names = {s.label_names for s in fam.samples}
    assert names == {MIG_NAMES, (*GPU_LABELS, "hostname", "DCGM_FI_DRIVER_VERSION")}


def test_device_wide_fields_repeat_the_gpu_on_each_instance(box: Box) -> None:
    """As DCGM answers a GPU-level field for a GPU instance: with its GPU's value."""
    snap = snapshot_of(box)
    families = dcgm_families(snap)
    temps = labelled(family(families, "DCGM_FI_DEV_GPU_TEMP"))
    assert [(lab["gpu"], lab.get("GPU_I_ID")) for lab, _ in temps] == [
        ("0", "1"),
        ("0", "5"),
        ("0", "13"),
        ("0", "14"),
        ("1", None),
    ]
    assert {v for lab, v in temps if lab["gpu"] == "0"} == {float(snap.gpus[0].temperature_c or 0)}
    energy = labelled(family(families, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"))
    assert len([lab for lab, _ in energy if lab["gpu"] == "0"]) == 4
    # NVML gives no utilisation in MIG mode, gputop no per-instance reserved memory
    util = labelled(family(families, "DCGM_FI_DEV_GPU_UTIL"))
    assert [lab["gpu"] for lab, _ in util] == ["1"]
    reserved = [f for f in families if f.name == "DCGM_FI_DEV_FB_RESERVED"]
    assert all(lab["gpu"] == "1" for f in reserved for lab, _ in labelled(f))


def test_process_memory_names_the_mig_device(box: Box) -> None:
    fam = process_family(snapshot_of(box))
    by_pid = {lab["pid"]: lab for lab, _ in labelled(fam)}
    assert (by_pid["5300201"]["GPU_I_PROFILE"], by_pid["5300201"]["GPU_I_ID"]) == ("2g.20gb", "5")
    assert by_pid["5300102"]["GPU_I_ID"] == "1"
    assert "GPU_I_ID" not in by_pid["5300401"]  # on the whole GPU 1


def test_a_gpu_instance_with_several_compute_instances_is_one_series(box: Box) -> None:
    gpu = {
        "name": "NVIDIA H100 80GB HBM3",
        "memory_total_mib": 81559,
        "mig": True,
        "gpu_instances": [{"profile": "3g.40gb", "id": 2, "compute_instances": [0, 1, 2]}],
    }
    used = labelled(
        family(dcgm_families(snapshot_of(box, {"name": "m", "gpu": [gpu]})), "DCGM_FI_DEV_FB_USED")
    )
    assert [lab.get("GPU_I_ID") for lab, _ in used] == ["2"]  # no whole-GPU series
    assert used[0][0]["GPU_I_PROFILE"] == "3g.40gb"  # the GPU instance's, not "1c.3g.40gb"


class _Holder:
    def __init__(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self.errors = 0
        self.restarts = 0


def test_the_scrape_carries_the_mig_labels(box: Box) -> None:
    text = generate_text(make_registry(SnapshotCollector(_Holder(snapshot_of(box))))).decode()
    used = samples(text, "DCGM_FI_DEV_FB_USED")
    assert len(used) == 5
    mig = [(lab["GPU_I_PROFILE"], lab["GPU_I_ID"], v) for lab, v in used if "GPU_I_ID" in lab]
    assert mig == [
        ("3g.40gb", "1", 30086.0),
        ("2g.20gb", "5", 14125.0),
        ("1g.10gb", "13", 6212.0),
        ("1g.10gb", "14", 12.0),
    ]
    procs = samples(text, "gputop_process_gpu_memory_bytes")
    assert sum("GPU_I_ID" in lab for lab, _ in procs) == 4
