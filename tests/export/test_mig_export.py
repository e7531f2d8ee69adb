"""The exporter on a MIG box: each MIG device's framebuffer series labelled as dcgm-exporter's.

GPU 0 of the ``mig`` scenario: 3g.40gb (GI 1) + 2g.20gb (GI 5) + 1g.10gb (GI 13) + 1g.10gb
(GI 14); GPU 1 a whole H100.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import generate_latest

from gputop.engine.model import Snapshot
from gputop.export.metrics import Family, dcgm_families, process_family
from gputop.export.prom import SnapshotCollector, make_registry
from tests.conftest import FixedTimeSource, snapshot_of
from tests.export.conftest import samples

Box = Callable[..., FixedTimeSource]
GPU_LABELS = ("gpu", "UUID", "pci_bus_id", "device", "modelName")
MIG_NAMES = (*GPU_LABELS, "GPU_I_PROFILE", "GPU_I_ID", "Hostname", "DCGM_FI_DRIVER_VERSION")


def family(families: list[Family], name: str) -> Family:
    (found,) = [f for f in families if f.name == name]
    return found


def labelled(fam: Family) -> list[tuple[dict[str, str], float]]:
    return [
        (dict(zip(s.label_names or fam.label_names, s.labels, strict=True)), s.value)
        for s in fam.samples
    ]


def test_framebuffer_per_mig_device_with_dcgm_labels(box: Box) -> None:
    snap = snapshot_of(box)
    used = labelled(family(dcgm_families(snap), "DCGM_FI_DEV_FB_USED"))
    whole = [(lab["gpu"], v) for lab, v in used if "GPU_I_ID" not in lab]
    assert whole == [("0", 50435.0), ("1", 61000.0)]  # each GPU's own series stays
    per_instance = [
        (lab["gpu"], lab["GPU_I_PROFILE"], lab["GPU_I_ID"], v)
        for lab, v in used
        if "GPU_I_ID" in lab
    ]
    assert per_instance == [
        ("0", "3g.40gb", "1", 30086.0),
        ("0", "2g.20gb", "5", 14125.0),
        ("0", "1g.10gb", "13", 6212.0),
        ("0", "1g.10gb", "14", 12.0),
    ]
    gpu0 = snap.gpus[0]
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
    assert names == {None, MIG_NAMES}
    assert fam.label_names == (*GPU_LABELS, "Hostname", "DCGM_FI_DRIVER_VERSION")


def test_no_utilisation_series_for_a_gpu_in_mig_mode(box: Box) -> None:
    families = dcgm_families(snapshot_of(box))
    util = labelled(family(families, "DCGM_FI_DEV_GPU_UTIL"))
    assert [lab["gpu"] for lab, _ in util] == ["1"]
    temps = labelled(family(families, "DCGM_FI_DEV_GPU_TEMP"))
    assert [lab["gpu"] for lab, _ in temps] == ["0", "1"]  # device-wide readings: once per GPU
    assert all("GPU_I_ID" not in lab for lab, _ in temps)


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
    assert [lab.get("GPU_I_ID") for lab, _ in used] == [None, "2"]
    assert used[1][0]["GPU_I_PROFILE"] == "1c.3g.40gb"


class _Holder:
    def __init__(self, snapshot: Snapshot) -> None:
        self.latest = snapshot
        self.errors = 0
        self.restarts = 0


def test_the_scrape_carries_the_mig_labels(box: Box) -> None:
    text = generate_latest(make_registry(SnapshotCollector(_Holder(snapshot_of(box))))).decode()
    used = samples(text, "DCGM_FI_DEV_FB_USED")
    assert len(used) == 6
    mig = [(lab["GPU_I_PROFILE"], lab["GPU_I_ID"], v) for lab, v in used if "GPU_I_ID" in lab]
    assert mig == [
        ("3g.40gb", "1", 30086.0),
        ("2g.20gb", "5", 14125.0),
        ("1g.10gb", "13", 6212.0),
        ("1g.10gb", "14", 12.0),
    ]
    procs = samples(text, "gputop_process_gpu_memory_bytes")
    assert sum("GPU_I_ID" in lab for lab, _ in procs) == 4
