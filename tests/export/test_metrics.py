"""The snapshot -> metric families mapping: dcgm-exporter names, labels and units; gputop's own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from prometheus_client.parser import text_string_to_metric_families

from gputop.engine.model import (
    Container,
    GpuProcess,
    ProcessRow,
    ProcessType,
    ProcInfo,
    ProcState,
    Snapshot,
)
from gputop.export.metrics import DCGM_FIELDS, Family, snapshot_families
from gputop.export.prom import SnapshotCollector, generate_text, make_registry
from tests.conftest import FixedTimeSource, snapshot_of
from tests.export.conftest import samples
from tests.fakes import GiB, lost_gpu, make_gpu, make_snapshot

MiB = 1024 * 1024


def render(snapshot: Snapshot | None) -> str:
    class Holder:
        latest = snapshot
        errors = 0
        restarts = 0

    return generate_text(make_registry(SnapshotCollector(Holder()))).decode()


def by_name(families: list[Family]) -> dict[str, Family]:
    return {f.name: f for f in families}


def test_dcgm_labels_match_dcgm_exporter() -> None:
    snap = make_snapshot()
    text = render(snap)
    rows = samples(text, "DCGM_FI_DEV_GPU_UTIL")
    assert len(rows) == 2
    for labels, value in rows:
        gpu = snap.gpu(int(labels["gpu"]))
        assert gpu is not None
        assert labels == {
            "gpu": str(gpu.index),
            "UUID": gpu.uuid,
            "pci_bus_id": gpu.pci_bus_id,
            "device": f"nvidia{gpu.index}",
            "modelName": gpu.name,
            "hostname": snap.system.hostname,
            "DCGM_FI_DRIVER_VERSION": snap.system.driver_version,
        }
        assert value == gpu.utilization_gpu_percent


def test_units_are_dcgm_units() -> None:
    gpu = make_gpu(
        0,
        memory_used_bytes=3 * GiB + 5,
        memory_free_bytes=77 * GiB,
        power_draw_mw=251_500,
        pcie_tx_kbps=2000,
    )
    text = render(make_snapshot(gpus=(gpu,)))
    assert samples(text, "DCGM_FI_DEV_FB_USED")[0][1] == 3 * 1024  # whole MiB
    assert samples(text, "DCGM_FI_DEV_FB_FREE")[0][1] == 77 * 1024
    assert samples(text, "DCGM_FI_DEV_FB_TOTAL")[0][1] == 80 * 1024
    assert samples(text, "DCGM_FI_DEV_POWER_USAGE")[0][1] == 251.5  # watts
    assert samples(text, "DCGM_FI_PROF_PCIE_TX_BYTES")[0][1] == 2000 * 1024  # bytes/s
    assert samples(text, "DCGM_FI_DEV_SM_CLOCK")[0][1] == gpu.clock_sm_mhz


def test_every_dcgm_family_has_dcgm_exporters_type_and_help() -> None:
    full = make_gpu(
        0, encoder_percent=1, decoder_percent=2, memory_reserved_bytes=MiB, temperature_memory_c=45
    )
    text = render(make_snapshot(gpus=(full,)))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for field in DCGM_FIELDS:
        if field.name not in families:
            continue  # a counter the fake GPU has none of
        assert families[field.name].type == str(field.info.type), field.name
        assert families[field.name].documentation == field.help


def test_unreported_readings_and_lost_gpus_are_left_out() -> None:
    gpus = (make_gpu(0, temperature_c=None, encoder_percent=None), lost_gpu(1))
    fams = by_name(
        snapshot_families(make_snapshot(gpus=gpus), age_s=0, sampler_errors=0, version="x")
    )
    assert "DCGM_FI_DEV_GPU_TEMP" not in fams  # no GPU reported it: no family at all
    assert [s.labels[0] for s in fams["DCGM_FI_DEV_GPU_UTIL"].samples] == ["0"]
    lost = {s.labels: s.value for s in fams["gputop_gpu_lost"].samples}
    assert lost == {("0",): 0.0, ("1",): 1.0}


def _row(pid: int, state: ProcState, **info: object) -> ProcessRow:
    return ProcessRow(pid=pid, info=ProcInfo(pid=pid, **info), states=(state,))  # type: ignore[arg-type]


def test_process_memory_uses_short_name_never_the_command_line() -> None:
    secret = "--api-key=hunter2-SECRET"
    proc = GpuProcess(pid=777, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=5 * GiB)
    snap = replace(
        make_snapshot(gpus=(make_gpu(0, processes=(proc,)),)),
        processes=(
            _row(777, ProcState.ACTIVE, name="python3", user="alice", cmdline=("python", secret)),
        ),
    )
    text = render(snap)
    assert "SECRET" not in text
    rows = samples(text, "gputop_process_gpu_memory_bytes")
    assert rows == [
        (
            {
                "gpu": "0",
                "UUID": snap.gpus[0].uuid,
                "pid": "777",
                "user": "alice",
                "command": "python3",
                "container": "",
                "pod": "",
                "namespace": "",
            },
            5.0 * GiB,
        )
    ]


def test_process_memory_names_its_container_pod_and_namespace_as_dcgm_exporter() -> None:
    procs = tuple(
        GpuProcess(pid=pid, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=GiB)
        for pid in (10, 11)
    )
    pod = Container("containerd", "ab" * 32, name="worker", pod="train-0", namespace="ml")
    bare = Container("docker", "cd" * 32)  # its name unreadable: the short id
    snap = replace(
        make_snapshot(gpus=(make_gpu(0, processes=procs),)),
        processes=(
            _row(10, ProcState.ACTIVE, name="python3", container=pod),
            _row(11, ProcState.ACTIVE, name="python3", container=bare),
        ),
    )
    labels = {
        lab["pid"]: (lab["container"], lab["pod"], lab["namespace"])
        for lab, _ in samples(render(snap), "gputop_process_gpu_memory_bytes")
    }
    assert labels == {"10": ("worker", "train-0", "ml"), "11": ("cdcdcdcdcdcd", "", "")}


def test_stuck_counts_every_state_and_unattributed_memory() -> None:
    snap = replace(
        make_snapshot(),
        processes=(
            _row(1, ProcState.HOLDER),
            _row(2, ProcState.HOLDER),
            _row(3, ProcState.DEFUNCT),
            _row(4, ProcState.ACTIVE),
            _row(5, ProcState.UNKILLABLE),
        ),
        unattributed_memory_bytes=((1, 3 * GiB),),
    )
    text = render(snap)
    stuck = {labels["state"]: value for labels, value in samples(text, "gputop_stuck_processes")}
    assert stuck == {
        "holder": 2.0,
        "defunct": 1.0,
        "orphan": 0.0,
        "stopped": 0.0,
        "unkillable": 1.0,
    }
    unattributed = samples(text, "gputop_unattributed_memory_bytes")
    assert unattributed == [({"gpu": "1", "UUID": snap.gpus[1].uuid}, 3.0 * GiB)]


def test_before_the_first_sample_only_health_metrics() -> None:
    text = render(None)
    names = {f.name for f in text_string_to_metric_families(text)}
    assert names == {
        "gputop_sample_age_seconds",
        "gputop_sampler_errors",
        "gputop_sampler_restarts",
        "gputop_info",
    }
    assert samples(text, "gputop_sampler_errors_total") == [({}, 0.0)]
    assert samples(text, "gputop_sampler_restarts_total") == [({}, 0.0)]


def _pod_snapshot(*boxes: Container | None) -> Snapshot:
    """GPU 0 with one process per box (pids 10, 11, ...), GPU 1 with none."""
    procs = tuple(
        GpuProcess(pid=10 + i, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=GiB)
        for i in range(len(boxes))
    )
    return replace(
        make_snapshot(gpus=(make_gpu(0, processes=procs), make_gpu(1))),
        processes=tuple(
            _row(10 + i, ProcState.ACTIVE, name="python3", container=box)
            for i, box in enumerate(boxes)
        ),
    )


def test_a_gpu_used_by_one_pod_carries_its_labels() -> None:
    worker = Container("containerd", "ab" * 32, name="worker", pod="train-0", namespace="ml")
    helper = Container("containerd", "ef" * 32, name="helper", pod="train-0", namespace="ml")
    text = render(_pod_snapshot(worker, worker))
    for name in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_TEMP"):
        by_gpu = {lab["gpu"]: lab for lab, _ in samples(text, name)}
        assert (by_gpu["0"]["pod"], by_gpu["0"]["namespace"], by_gpu["0"]["container"]) == (
            "train-0",
            "ml",
            "worker",
        )
        assert "pod" not in by_gpu["1"]  # no process: no pod
    # two containers of the pod: the pod, no container
    (lab,) = [
        lab
        for lab, _ in samples(render(_pod_snapshot(worker, helper)), "DCGM_FI_DEV_GPU_UTIL")
        if lab["gpu"] == "0"
    ]
    assert (lab["pod"], lab["container"]) == ("train-0", "")


def test_a_gpu_shared_beyond_one_pod_has_no_pod_labels() -> None:
    a = Container("containerd", "ab" * 32, name="w", pod="train-0", namespace="ml")
    b = Container("containerd", "cd" * 32, name="w", pod="train-1", namespace="ml")
    bare = Container("docker", "ef" * 32)
    for boxes in ((a, b), (a, bare), (a, None)):
        text = render(_pod_snapshot(*boxes))
        assert all("pod" not in lab for lab, _ in samples(text, "DCGM_FI_DEV_GPU_UTIL")), boxes


def test_every_gpu_has_one_health_verdict_and_its_evidence(
    box: Callable[..., FixedTimeSource],
) -> None:
    """gputop_gpu_health: one series per GPU and verdict, 1 for its own; the reasons as series."""
    text = render(snapshot_of(box, "sick"))
    health = samples(text, "gputop_gpu_health")
    own = {labels["gpu"]: labels["verdict"] for labels, value in health if value == 1.0}
    assert own == {
        "0": "ok",
        "1": "degraded",
        "2": "reset needed",
        "3": "reboot needed",
        "4": "replace",
        "5": "unknown",
        "6": "ok",
    }
    assert len(health) == 7 * 6  # every verdict of every GPU: the series set never changes
    reasons = samples(text, "gputop_gpu_health_reason")
    assert {(r["gpu"], r["evidence"]) for r, _ in reasons} >= {
        ("2", "recovery: GPU reset"),
        ("3", "recovery: node reboot"),
        ("4", "unrepairable memory"),
    }
    assert all(r["source"] for r, _ in reasons)
