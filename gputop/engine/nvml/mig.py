"""MIG: a GPU's MIG devices, their ids, memory and profile names (nvidia-smi's ``3g.40gb``).

Every MIG call is optional (``soft``): one that fails leaves out what it would have read, never
the GPU; only a lost GPU raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gputop.engine.cuda_index import MigKey
from gputop.engine.model import MigDevice
from gputop.engine.nvml.calls import soft, text

_MAX_MIG_DEVICES = 64  # more than any GPU has: a driver answering nonsense is not asked forever


@dataclass(frozen=True, slots=True)
class Profile:
    """One of a GPU's instance profiles (nvmlDeviceGetGpuInstanceProfileInfo): names MIG devices."""

    name: str | None  # "3g.40gb" (None: the driver's struct has no name)
    slices: int
    memory_mb: int
    media: tuple[int, int, int, int]  # decoders, encoders, JPEG and OFA engines


@dataclass(slots=True)
class MigState:
    """What a GPU's MIG reading keeps from snapshot to snapshot."""

    # the GPU's instance profiles (read when first needed), and what does not change of each
    # MIG device, by its UUID (ids, profile name, slices): read when it first appears
    profiles: tuple[Profile, ...] = ()
    static: dict[str, dict[str, Any]] = field(default_factory=dict)
    utilization: bool = True  # False once a MIG device gave none (no driver to date does)


def read_mig(
    index: int, h: Any, state: MigState, cuda: Mapping[str, int]
) -> list[tuple[MigDevice, Any]]:
    """The GPU's MIG devices with their handles; ``cuda``: MIG device UUID -> CUDA index."""
    devices: list[tuple[MigDevice, Any]] = []
    known: dict[str, dict[str, Any]] = {}
    for i, mh in mig_handles(h):
        uuid = text(soft(pynvml.nvmlDeviceGetUUID, mh))
        fixed = state.static.get(uuid) if uuid else None
        if fixed is None:
            fixed = _mig_identity(h, mh, state)
        if uuid and None not in fixed.values():  # else asked again next time
            known[uuid] = fixed
        mem = soft(pynvml.nvmlDeviceGetMemoryInfo, mh)
        util = soft(pynvml.nvmlDeviceGetUtilizationRates, mh) if state.utilization else None
        state.utilization = util is not None
        device = MigDevice(
            index=i,
            gpu_index=index,
            uuid=uuid,
            cuda_index=cuda.get(uuid) if uuid else None,
            memory_total_bytes=_int_of(mem, "total"),
            memory_used_bytes=_int_of(mem, "used"),
            memory_free_bytes=_int_of(mem, "free"),
            utilization_gpu_percent=_int_of(util, "gpu"),
            **fixed,
        )
        devices.append((device, mh))
    state.static = known  # forget MIG devices that are gone (instances re-made)
    return devices


def _int_of(struct: Any, name: str) -> int | None:
    value = getattr(struct, name, None) if struct is not None else None
    return None if value is None else int(value)


def mig_handles(h: Any) -> list[tuple[int, Any]]:
    """(index, handle) of each MIG device of a GPU in MIG mode; indices without one are skipped."""
    count = soft(pynvml.nvmlDeviceGetMaxMigDeviceCount, h)
    if not count:
        return []
    out = []
    for i in range(min(int(count), _MAX_MIG_DEVICES)):
        mh = soft(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, h, i)
        if mh is not None:
            out.append((i, mh))
    return out


def instances(
    migs: Sequence[tuple[MigDevice, Any]],
) -> list[tuple[int | None, int | None, Any]]:
    """Each MIG device's GPU and compute instance ids, and its handle."""
    return [(m.gpu_instance_id, m.compute_instance_id, mh) for m, mh in migs]


def in_mig_mode(h: Any) -> bool:
    mode = soft(pynvml.nvmlDeviceGetMigMode, h)
    return bool(mode and mode[0])


def mig_keys(h: Any) -> tuple[MigKey, ...]:
    """The MIG devices of a GPU in MIG mode, as CUDA_VISIBLE_DEVICES may name them."""
    if not in_mig_mode(h):
        return ()
    keys = []
    for _, mh in mig_handles(h):
        uuid = text(soft(pynvml.nvmlDeviceGetUUID, mh))
        if uuid:
            keys.append(
                MigKey(
                    uuid=uuid,
                    gpu_instance_id=soft(pynvml.nvmlDeviceGetGpuInstanceId, mh),
                    compute_instance_id=soft(pynvml.nvmlDeviceGetComputeInstanceId, mh),
                )
            )
    return tuple(keys)


def _mig_identity(h: Any, mh: Any, state: MigState) -> dict[str, Any]:
    """What does not change of a MIG device: its ids, slices and profile name."""
    attrs = soft(pynvml.nvmlDeviceGetAttributes, mh)
    return {
        "gpu_instance_id": soft(pynvml.nvmlDeviceGetGpuInstanceId, mh),
        "compute_instance_id": soft(pynvml.nvmlDeviceGetComputeInstanceId, mh),
        "gpu_instance_slices": _int_of(attrs, "gpuInstanceSliceCount"),
        "compute_instance_slices": _int_of(attrs, "computeInstanceSliceCount"),
        "multiprocessor_count": _int_of(attrs, "multiprocessorCount"),
        "profile": _profile_name(h, attrs, state),
    }


def _profile_name(h: Any, attrs: Any, state: MigState) -> str | None:
    """The MIG device's name as nvidia-smi gives it: its GPU instance profile's name
    (``3g.40gb``), after ``<c>c.`` when its compute instance is smaller (``1c.3g.40gb``).

    The profile is the one of the GPU's whose slices and memory (then media engines) are the
    device's; where none is, or the driver names none, the name is made as NVIDIA's MIG guide
    names devices: slices, then memory in whole GB rounded up.
    """
    if attrs is None:
        return None
    slices, ci_slices = int(attrs.gpuInstanceSliceCount), int(attrs.computeInstanceSliceCount)
    memory_mb = int(attrs.memorySizeMB)
    if not slices or not memory_mb:
        return None
    if not state.profiles:  # none yet (or none read: asked again for a new device)
        state.profiles = _read_profiles(h)
    matches = [p for p in state.profiles if (p.slices, p.memory_mb) == (slices, memory_mb)]
    media = (
        int(attrs.sharedDecoderCount),
        int(attrs.sharedEncoderCount),
        int(attrs.sharedJpegCount),
        int(attrs.sharedOfaCount),
    )
    matches = [p for p in matches if p.media == media] or matches
    name = matches[0].name if matches else None
    if name is None:
        name = f"{slices}g.{math.ceil(memory_mb / 1024)}gb"
    return f"{ci_slices}c.{name}" if 0 < ci_slices < slices else name


def _read_profiles(h: Any) -> tuple[Profile, ...]:
    """Every GPU instance profile the GPU has (asked once per GPU, when first needed)."""
    out: list[Profile] = []
    for profile in range(int(getattr(pynvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 18))):
        info = soft(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h, profile)
        if info is None:  # a driver without the named (v2) struct: the first one
            info = soft(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, h, profile, 1)
        if info is None:
            continue
        name = text(getattr(info, "name", None))
        out.append(
            Profile(
                name=name.removeprefix("MIG ").strip() or None if name else None,
                slices=int(info.sliceCount),
                memory_mb=int(info.memorySizeMB),
                media=(
                    int(info.decoderCount),
                    int(info.encoderCount),
                    int(info.jpegCount),
                    int(info.ofaCount),
                ),
            )
        )
    return tuple(out)
