"""Everything gputop reads from PyTorch's CUDA caching allocator, on every device it uses.

torch is never imported here (only found in sys.modules), and nothing here creates a CUDA
context: an uninitialised torch has no figures. The allocator's counters are host-side
bookkeeping, so reading them (or resetting a device's peak) costs no driver call.

Devices are torch's (CUDA) indices; gputop.tracking maps them to NVML indices through the
light read's CUDA index of each GPU (gputop.engine.cuda_index, worked out by the driver layer).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any


def torch_cuda() -> Any | None:
    """``torch.cuda`` when PyTorch is already imported, CUDA is available and initialised.

    Never imports torch, and never creates a CUDA context (an uninitialised torch has no figures).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_available():
            return None
        initialised = getattr(cuda, "is_initialized", None)
        if initialised is not None and not initialised():
            return None
    except Exception:  # noqa: BLE001 - a broken torch install: no torch figures
        return None
    return cuda


@dataclass(frozen=True, slots=True)
class DeviceNow:
    """One device's allocator counters at one moment (bytes)."""

    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True, slots=True)
class DevicePeaks:
    """One device's allocator peaks since its last reset (bytes)."""

    allocated_bytes: int
    reserved_bytes: int


def device_count(cuda: Any) -> int:
    return int(cuda.device_count())


def devices_in_use(cuda: Any) -> tuple[int, ...]:
    """The devices with memory reserved, plus the current one (torch indices, in order)."""
    current = int(cuda.current_device())
    return tuple(
        d for d in range(device_count(cuda)) if d == current or int(cuda.memory_reserved(d)) > 0
    )


def reset_peaks(cuda: Any) -> None:
    """Start every device's allocator peak afresh (the block's own peak from now on).

    All devices, not only those in use: one first used during the block has its peak reset too.
    """
    for d in range(device_count(cuda)):
        cuda.reset_peak_memory_stats(d)


def now(cuda: Any, devices: tuple[int, ...]) -> dict[int, DeviceNow]:
    """Allocated and reserved on each of ``devices``."""
    return {
        d: DeviceNow(int(cuda.memory_allocated(d)), int(cuda.memory_reserved(d))) for d in devices
    }


def peaks(cuda: Any, devices: tuple[int, ...]) -> dict[int, DevicePeaks]:
    """Each device's allocated and reserved peak since :func:`reset_peaks`."""
    return {
        d: DevicePeaks(int(cuda.max_memory_allocated(d)), int(cuda.max_memory_reserved(d)))
        for d in devices
    }


def used_since_reset(cuda: Any, known: tuple[int, ...]) -> tuple[int, ...]:
    """``known`` plus every other device that holds memory now or held some since the reset."""
    extra = [
        d
        for d in range(device_count(cuda))
        if d not in known
        and (int(cuda.memory_reserved(d)) > 0 or int(cuda.max_memory_reserved(d)) > 0)
    ]
    return tuple(sorted((*known, *extra)))
