"""CUDA_VISIBLE_DEVICES entries that name MIG devices, resolved to the device (pure)."""

from __future__ import annotations

import pytest

from gputop.engine.cuda_index import DeviceKey, MigKey, cuda_index_map, cuda_mig_index_map

GPU0 = "GPU-aaaa1111-0000-4000-8000-000000000000"
GPU1 = "GPU-bbbb2222-0000-4000-8000-000000000001"
MIG_A = "MIG-0e2d5d6a-1111-5e3c-9f0b-123456789abc"
MIG_B = "MIG-0e2d9999-2222-5e3c-9f0b-123456789abc"
MIG_C = "MIG-7f000000-3333-5e3c-9f0b-123456789abc"

BOX = (
    DeviceKey(index=0, uuid=GPU0, pci_bus_id="00000000:07:00.0", compute_capability=(9, 0)),
    DeviceKey(
        index=1,
        uuid=GPU1,
        pci_bus_id="00000000:0F:00.0",
        compute_capability=(9, 0),
        mig_devices=(
            MigKey(uuid=MIG_A, gpu_instance_id=1, compute_instance_id=0),
            MigKey(uuid=MIG_B, gpu_instance_id=5, compute_instance_id=0),
            MigKey(uuid=MIG_C, gpu_instance_id=13, compute_instance_id=0),
        ),
    ),
)


def env(visible: str) -> dict[str, str]:
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": visible}


@pytest.mark.parametrize(
    ("visible", "gpus", "migs"),
    [
        (MIG_B, {1: 0}, {MIG_B: 0}),
        (MIG_B.lower(), {1: 0}, {MIG_B: 0}),
        ("MIG-7f00", {1: 0}, {MIG_C: 0}),  # a unique prefix
        ("MIG-0e2d", {}, {}),  # ambiguous: invalid
        ("MIG-ffff", {}, {}),  # no such MIG device
        ("MIG-", {}, {}),
        (f"0,{MIG_A}", {0: 0, 1: 1}, {MIG_A: 1}),
        (f"{MIG_A},0", {1: 0}, {MIG_A: 0}),  # CUDA enumerates a single MIG device: the end
        ("0,MIG-ffff,1", {0: 0}, {}),  # an invalid entry ends the list
        (f"MIG-{GPU1}/5/0", {1: 0}, {MIG_B: 0}),  # the old form
        (f"MIG-{GPU1}/13/0", {1: 0}, {MIG_C: 0}),
        (f"MIG-{GPU1}/2/0", {}, {}),  # its GPU has no GPU instance 2
        (f"MIG-{GPU1}/5/1", {}, {}),
        (f"MIG-{GPU0}/1/0", {0: 0}, {}),  # MIG devices unknown: the entry names the GPU
        ("1", {1: 0}, {}),  # a whole GPU
    ],
)
def test_mig_entries(visible: str, gpus: dict[int, int], migs: dict[str, int]) -> None:
    assert cuda_index_map(BOX, env(visible)) == gpus
    assert cuda_mig_index_map(BOX, env(visible)) == migs


def test_unset_names_no_mig_device() -> None:
    assert cuda_mig_index_map(BOX, {}) == {}
    assert cuda_index_map(BOX, {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == {0: 0, 1: 1}
