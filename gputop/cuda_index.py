"""Which CUDA device index each NVML GPU gets in a CUDA program started from this shell.

NVML numbers GPUs by PCI bus id. CUDA orders them by ``CUDA_DEVICE_ORDER`` (FASTEST_FIRST by
default, PCI_BUS_ID on request), then keeps and renumbers only those named by
``CUDA_VISIBLE_DEVICES``: integer indices into that order, or GPU UUIDs (full, or any unique
prefix, with or without the ``GPU-`` prefix). As in CUDA, the first entry that is invalid (out of
range, unknown or ambiguous UUID, a duplicate, garbage) ends the list: the entries before it stay
visible. Unset means all GPUs; set but empty means none.

FASTEST_FIRST is CUDA's own heuristic and is not documented; this approximates it by compute
capability (higher first), ties kept in PCI bus order, which matches CUDA on boxes of one GPU model.
MIG entries (``MIG-...``) select the GPU instance's parent; gputop does not resolve MIG UUIDs, so
such an entry ends the list here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceKey:
    """What cuda_index_map needs to know of one NVML device."""

    index: int
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None


def _pci_key(device: DeviceKey) -> tuple[str, int]:
    return ((device.pci_bus_id or "").lower(), device.index)


def cuda_order(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> list[DeviceKey]:
    """The devices in CUDA's enumeration order before CUDA_VISIBLE_DEVICES is applied."""
    by_bus = sorted(devices, key=_pci_key)
    if environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST").strip().upper() == "PCI_BUS_ID":
        return by_bus
    # sorted() is stable: equal capabilities keep PCI bus order.
    return sorted(by_bus, key=lambda d: d.compute_capability or (0, 0), reverse=True)


def _match_uuid(entry: str, ordered: Sequence[DeviceKey]) -> DeviceKey | None:
    wanted = entry.lower()
    if not wanted.startswith("gpu-"):
        wanted = "gpu-" + wanted
    hits = [d for d in ordered if d.uuid and d.uuid.lower().startswith(wanted)]
    return hits[0] if len(hits) == 1 else None


def _resolve(entry: str, ordered: Sequence[DeviceKey]) -> DeviceKey | None:
    if entry.isdigit():
        position = int(entry)
        return ordered[position] if position < len(ordered) else None
    if entry.lower().startswith("mig-") or not entry:
        return None
    if entry.startswith("-"):
        return None  # a negative index hides every GPU from CUDA
    return _match_uuid(entry, ordered)


def cuda_index_map(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> dict[int, int]:
    """NVML index -> CUDA index; NVML devices a CUDA program would not see are absent."""
    ordered = cuda_order(devices, environ)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return {d.index: i for i, d in enumerate(ordered)}
    chosen: list[DeviceKey] = []
    for raw in visible.split(","):
        device = _resolve(raw.strip(), ordered)
        if device is None or device in chosen:
            break
        chosen.append(device)
    return {d.index: i for i, d in enumerate(chosen)}
