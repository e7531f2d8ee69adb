"""CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER -> CUDA index, as a table."""

from __future__ import annotations

import pytest

from gputop.engine.cuda_index import (
    DeviceKey,
    cuda_index_map,
    cuda_order,
    parse_pci_bus_id,
    visible_devices,
)

UUID0 = "GPU-aaaa1111-0000-4000-8000-000000000000"
UUID1 = "GPU-aaaa2222-0000-4000-8000-000000000001"
UUID2 = "GPU-bbbb3333-0000-4000-8000-000000000002"
UUID3 = "GPU-cccc4444-0000-4000-8000-000000000003"

# PCI order is 0, 1, 2, 3. FASTEST_FIRST (approximation): 2 (8.9), 0, 1 (8.0), 3 (7.5).
BOX = (
    DeviceKey(index=0, uuid=UUID0, pci_bus_id="00000000:07:00.0", compute_capability=(8, 0)),
    DeviceKey(index=1, uuid=UUID1, pci_bus_id="00000000:0F:00.0", compute_capability=(8, 0)),
    DeviceKey(index=2, uuid=UUID2, pci_bus_id="00000000:87:00.0", compute_capability=(8, 9)),
    DeviceKey(index=3, uuid=UUID3, pci_bus_id="00000000:90:00.0", compute_capability=(7, 5)),
)

PCI = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def pci(visible: str) -> dict[str, str]:
    return {**PCI, "CUDA_VISIBLE_DEVICES": visible}


def fast(visible: str) -> dict[str, str]:
    return {"CUDA_VISIBLE_DEVICES": visible}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        # order only
        (PCI, {0: 0, 1: 1, 2: 2, 3: 3}),
        ({"CUDA_DEVICE_ORDER": " pci_bus_id "}, {0: 0, 1: 1, 2: 2, 3: 3}),
        ({}, {2: 0, 0: 1, 1: 2, 3: 3}),
        ({"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, {2: 0, 0: 1, 1: 2, 3: 3}),
        ({"CUDA_DEVICE_ORDER": "nonsense"}, {2: 0, 0: 1, 1: 2, 3: 3}),
        # empty: nothing visible
        (pci(""), {}),
        (pci("   "), {}),
        # indices, reordering
        (pci("0"), {0: 0}),
        (pci("2,1"), {2: 0, 1: 1}),
        (pci("3,2,1,0"), {3: 0, 2: 1, 1: 2, 0: 3}),
        (pci(" 3 , 1 "), {3: 0, 1: 1}),
        (pci("00"), {0: 0}),
        (pci("+1"), {1: 0}),
        (pci("-0"), {0: 0}),
        (pci("1gpu2,0"), {1: 0, 0: 1}),  # strtoul reads the leading number
        (fast("0"), {2: 0}),
        (fast("2,3"), {1: 0, 3: 1}),
        (fast("3,0"), {3: 0, 2: 1}),
        # the first invalid entry ends the list
        (pci("0,2,-1,1"), {0: 0, 2: 1}),
        (pci("-1"), {}),
        (pci("-1,0"), {}),
        (pci("4"), {}),
        (pci("1,7,0"), {1: 0}),
        (pci("0,,1"), {0: 0}),
        (pci("0,x,1"), {0: 0}),
        (pci("x"), {}),
        (pci("0,"), {0: 0}),
        # duplicates hide everything, as in CUDA
        (pci("0,0"), {}),
        (pci("1,+1"), {}),
        (pci("0,9,0"), {}),
        (pci("0,-1,0"), {0: 0}),  # the negative entry ends parsing before the repeat
        (pci(f"3,{UUID3}"), {}),
        (pci(f"{UUID1},gpu-aaaa2222"), {}),
        # UUIDs: full, abbreviated, any case, with or without "GPU-"
        (pci(UUID3), {3: 0}),
        (pci(f"{UUID3},{UUID0}"), {3: 0, 0: 1}),
        (pci("GPU-bbbb3333"), {2: 0}),
        (pci("gpu-BBBB3333"), {2: 0}),
        (pci("bbbb3333"), {2: 0}),
        (pci("cccc"), {3: 0}),
        (fast("GPU-cccc4444,GPU-aaaa1"), {3: 0, 0: 1}),
        (pci(f"1,{UUID2},0"), {1: 0, 2: 1, 0: 2}),
        # unknown, ambiguous, empty UUIDs are invalid
        (pci("GPU-aaaa"), {}),
        (pci("1,GPU-aaaa,2"), {1: 0}),
        (pci("GPU-dead"), {}),
        (pci("0,GPU-dead,1"), {0: 0}),
        (pci("GPU-"), {}),
        (pci("2,GPU-"), {2: 0}),
        # MIG: the old form names its parent GPU and ends the list; the new form is unresolved
        (pci(f"MIG-{UUID3}/1/0"), {3: 0}),
        (pci(f"MIG-{UUID3}/1/0,0"), {3: 0}),
        (pci(f"1,MIG-{UUID3}/2/0,0"), {1: 0, 3: 1}),
        (pci("MIG-0e2d5d6a-1111-5e3c-9f0b-123456789abc"), {}),
        (pci("0,MIG-0e2d5d6a-1111-5e3c-9f0b-123456789abc,1"), {0: 0}),
        (pci("MIG-GPU-dead/1/0"), {}),
    ],
)
def test_cuda_index_map(environ: dict[str, str], expected: dict[int, int]) -> None:
    assert cuda_index_map(BOX, environ) == expected


def test_input_order_does_not_matter() -> None:
    shuffled = (BOX[3], BOX[1], BOX[2], BOX[0])
    assert cuda_index_map(shuffled, PCI) == cuda_index_map(BOX, PCI)
    assert cuda_index_map(shuffled, {}) == cuda_index_map(BOX, {})


def test_one_model_box_fastest_first_is_pci_order() -> None:
    same = tuple(
        DeviceKey(index=i, pci_bus_id=f"0000:{bus:02x}:00.0", compute_capability=(9, 0))
        for i, bus in enumerate((0x1B, 0x43, 0x52, 0x61, 0x9D, 0xC3, 0xD1, 0xDB))
    )
    assert cuda_index_map(same, {}) == {i: i for i in range(8)}


def test_pci_order_is_numeric_not_textual() -> None:
    # Bus 0x0F sorts before 0x87 numerically; domains of different widths still compare.
    devices = (
        DeviceKey(index=0, pci_bus_id="0001:00:00.0"),
        DeviceKey(index=1, pci_bus_id="00000000:87:00.0"),
        DeviceKey(index=2, pci_bus_id="0000:0f:00.0"),
    )
    assert [d.index for d in cuda_order(devices, PCI)] == [2, 1, 0]


def test_devices_without_bus_id_come_last() -> None:
    devices = (
        DeviceKey(index=0, pci_bus_id=None),
        DeviceKey(index=1, pci_bus_id="0000:90:00.0"),
        DeviceKey(index=2, pci_bus_id="garbage"),
    )
    assert [d.index for d in cuda_order(devices, PCI)] == [1, 0, 2]


def test_fastest_first_breaks_capability_ties_by_sm_count_then_clock() -> None:
    devices = (
        DeviceKey(index=0, pci_bus_id="0000:01:00.0", compute_capability=(8, 6)),
        DeviceKey(
            index=1,
            pci_bus_id="0000:02:00.0",
            compute_capability=(8, 6),
            multiprocessor_count=28,
            clock_sm_max_mhz=1800,
        ),
        DeviceKey(
            index=2,
            pci_bus_id="0000:03:00.0",
            compute_capability=(8, 6),
            multiprocessor_count=84,
            clock_sm_max_mhz=1700,
        ),
        DeviceKey(
            index=3,
            pci_bus_id="0000:04:00.0",
            compute_capability=(8, 6),
            multiprocessor_count=84,
            clock_sm_max_mhz=1860,
        ),
    )
    assert [d.index for d in cuda_order(devices, {})] == [3, 2, 1, 0]


def test_unknown_capability_counts_as_slowest() -> None:
    devices = (
        DeviceKey(index=0, pci_bus_id="0000:01:00.0"),
        DeviceKey(index=1, pci_bus_id="0000:02:00.0", compute_capability=(6, 1)),
    )
    assert cuda_index_map(devices, {}) == {1: 0, 0: 1}


def test_devices_without_uuid_are_not_matched_by_prefix() -> None:
    devices = (DeviceKey(index=0, pci_bus_id="0000:01:00.0"), BOX[1])
    assert cuda_index_map(devices, pci("GPU-aaaa")) == {1: 0}


def test_visible_devices_returns_keys_in_cuda_order() -> None:
    assert visible_devices(BOX, pci("2,0")) == [BOX[2], BOX[0]]
    assert visible_devices(BOX, {}) == [BOX[2], BOX[0], BOX[1], BOX[3]]


def test_no_devices() -> None:
    assert cuda_index_map((), {}) == {}
    assert cuda_index_map((), pci("0")) == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("00000000:07:00.0", (0, 7, 0, 0)),
        ("0000:8A:1F.7", (0, 0x8A, 0x1F, 7)),
        ("0001:00:00.0", (1, 0, 0, 0)),
        (" 0000:0f:00.0 ", (0, 15, 0, 0)),
        ("", None),
        (None, None),
        ("07:00.0", None),
        ("0000:zz:00.0", None),
        ("0000:07:00", None),
    ],
)
def test_parse_pci_bus_id(text: str | None, expected: tuple[int, int, int, int] | None) -> None:
    assert parse_pci_bus_id(text) == expected
