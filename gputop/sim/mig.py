"""MIG in scenario files: GPU instances of a profile (``3g.40gb``), their compute instances.

A GPU with ``mig = true`` may list its GPU instances::

    [[gpu.gpu_instances]]
    profile = "3g.40gb"          # a profile of this board (MIG_PROFILES_80GB or _40GB)
    id = 1                       # the GPU instance id (default: 1, 2, ... in order)
    compute_instances = [0]      # CI ids, one MIG device each (default [0]: the whole GI);
                                 # or tables { id = 0, slices = 1 } for CIs smaller than the GI
    extra_used_mib = 12          # memory in use in the GI that no listed process owns

and its processes say where they run: ``gpu_instance = 1`` (and ``compute_instance = 0``, by
default the GI's first CI). Each compute instance is one MIG device, in the order listed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from gputop.errors import UsageError

MAX_GPU_SLICES = 7  # an A100's or H100's GPU instance slices: at most seven MIG devices


@dataclass(frozen=True, slots=True, kw_only=True)
class MigProfile:
    """A GPU instance profile as nvmlDeviceGetGpuInstanceProfileInfo describes it."""

    name: str  # "3g.40gb": the v2 struct's name is "MIG 3g.40gb"
    profile: int  # NVML_GPU_INSTANCE_PROFILE_*: what the profile-info call is asked for
    id: int  # the profile id (nvidia-smi mig -lgip's "ID")
    slices: int
    memory_mib: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int = 0
    jpegs: int = 0
    ofas: int = 0
    instances: int = 1  # how many fit on the GPU


def _profiles(*profiles: MigProfile) -> dict[str, MigProfile]:
    return {p.name: p for p in profiles}


# After nvidia-smi mig -lgip on an H100 80GB HBM3 (also close to an A100 80GB's).
MIG_PROFILES_80GB = _profiles(
    MigProfile(
        name="1g.10gb",
        profile=0,
        id=19,
        slices=1,
        memory_mib=9984,
        multiprocessors=16,
        copy_engines=1,
        decoders=1,
        jpegs=1,
        instances=7,
    ),
    MigProfile(
        name="1g.10gb+me",
        profile=7,
        id=20,
        slices=1,
        memory_mib=9984,
        multiprocessors=16,
        copy_engines=1,
        decoders=7,
        encoders=0,
        jpegs=7,
        ofas=1,
    ),
    MigProfile(
        name="1g.20gb",
        profile=9,
        id=15,
        slices=1,
        memory_mib=20096,
        multiprocessors=26,
        copy_engines=1,
        decoders=1,
        jpegs=1,
        instances=4,
    ),
    MigProfile(
        name="2g.20gb",
        profile=1,
        id=14,
        slices=2,
        memory_mib=20096,
        multiprocessors=32,
        copy_engines=2,
        decoders=2,
        jpegs=2,
        instances=3,
    ),
    MigProfile(
        name="3g.40gb",
        profile=2,
        id=9,
        slices=3,
        memory_mib=40448,
        multiprocessors=60,
        copy_engines=3,
        decoders=3,
        jpegs=3,
        instances=2,
    ),
    MigProfile(
        name="4g.40gb",
        profile=3,
        id=5,
        slices=4,
        memory_mib=40448,
        multiprocessors=64,
        copy_engines=4,
        decoders=4,
        jpegs=4,
    ),
    MigProfile(
        name="7g.80gb",
        profile=4,
        id=0,
        slices=7,
        memory_mib=81152,
        multiprocessors=132,
        copy_engines=8,
        decoders=7,
        jpegs=7,
        ofas=1,
    ),
)
# After an A100-SXM4-40GB's.
MIG_PROFILES_40GB = _profiles(
    MigProfile(
        name="1g.5gb",
        profile=0,
        id=19,
        slices=1,
        memory_mib=4864,
        multiprocessors=14,
        copy_engines=1,
        decoders=0,
        instances=7,
    ),
    MigProfile(
        name="1g.10gb",
        profile=9,
        id=15,
        slices=1,
        memory_mib=9856,
        multiprocessors=14,
        copy_engines=1,
        decoders=1,
        instances=4,
    ),
    MigProfile(
        name="2g.10gb",
        profile=1,
        id=14,
        slices=2,
        memory_mib=9856,
        multiprocessors=28,
        copy_engines=2,
        decoders=1,
        instances=3,
    ),
    MigProfile(
        name="3g.20gb",
        profile=2,
        id=9,
        slices=3,
        memory_mib=19968,
        multiprocessors=42,
        copy_engines=3,
        decoders=2,
        instances=2,
    ),
    MigProfile(
        name="4g.20gb",
        profile=3,
        id=5,
        slices=4,
        memory_mib=19968,
        multiprocessors=56,
        copy_engines=4,
        decoders=2,
    ),
    MigProfile(
        name="7g.40gb",
        profile=4,
        id=0,
        slices=7,
        memory_mib=40192,
        multiprocessors=98,
        copy_engines=7,
        decoders=5,
        jpegs=1,
        ofas=1,
    ),
)


def profiles_for(memory_total_mib: int) -> dict[str, MigProfile]:
    """The GPU instance profiles of a board with this much memory (80 GB class, else 40 GB)."""
    return MIG_PROFILES_80GB if memory_total_mib >= 60 * 1024 else MIG_PROFILES_40GB


@dataclass(frozen=True, slots=True, kw_only=True)
class SimMigDevice:
    """One compute instance of one GPU instance: a MIG device with a handle and a UUID."""

    gpu_instance_id: int
    compute_instance_id: int
    profile: MigProfile  # its GPU instance's
    slices: int  # the compute instance's slices (the GI's, unless smaller)
    uuid: str
    extra_used_mib: float = 0.0  # its GPU instance's memory that no process owns

    @property
    def name(self) -> str:
        """As nvidia-smi names the MIG device: ``3g.40gb``, ``1c.3g.40gb`` for a smaller CI."""
        if self.slices < self.profile.slices:
            return f"{self.slices}c.{self.profile.name}"
        return self.profile.name


@dataclass(frozen=True, slots=True, kw_only=True)
class _ComputeInstance:
    id: int
    slices: int
    uuid: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _GpuInstance:
    id: int
    profile: MigProfile
    compute_instances: tuple[_ComputeInstance, ...] = field(default=())
    extra_used_mib: float = 0.0


@dataclass(frozen=True, slots=True)
class ScenarioKey:
    """A key a scenario table accepts: its TOML type, the default the parser uses (None: none,
    or one worked out, which ``note`` then says) and a note. The reference page of the scenario
    keys (scripts/gen_reference.py) is generated from these tables."""

    kind: str
    default: Any = None
    note: str = ""


# [[gpu.gpu_instances]]
GI_KEYS: dict[str, ScenarioKey] = {
    "profile": ScenarioKey("string", note="required: a profile of this board, e.g. 3g.40gb"),
    "id": ScenarioKey("integer", note="the GPU instance id; default 1, 2, ... in order"),
    "compute_instances": ScenarioKey(
        "array of integers or tables",
        [0],
        "compute instance ids, one MIG device each ([0]: one spanning the GPU instance)",
    ),
    "extra_used_mib": ScenarioKey("number", 0, "memory in use that no listed process owns"),
}
# A compute instance given as a table, in compute_instances.
CI_KEYS: dict[str, ScenarioKey] = {
    "id": ScenarioKey("integer", note="required"),
    "slices": ScenarioKey("integer", 0, "0: the GPU instance's slices shared out"),
    "uuid": ScenarioKey("string", note="default: made from the seed and the ids"),
}


def mig_devices(
    raw: list[dict[str, Any]], memory_total_mib: int, where: str, seed_text: str
) -> tuple[SimMigDevice, ...]:
    """The MIG devices of a GPU's ``gpu_instances`` list, validated (UsageError otherwise)."""
    profiles = profiles_for(memory_total_mib)
    instances: list[_GpuInstance] = []
    for n, spec in enumerate(raw):
        at = f"{where}: gpu_instances[{n}]"
        if not isinstance(spec, dict):
            raise UsageError(f"scenario: {at}: expected a table")
        unknown = set(spec) - set(GI_KEYS)
        if unknown:
            raise UsageError(f"scenario: {at}: unknown keys {sorted(unknown)}")
        name = str(spec.get("profile", ""))
        if name not in profiles:
            known = ", ".join(profiles)
            raise UsageError(f"scenario: {at}: unknown profile {name!r} (this board: {known})")
        profile = profiles[name]
        cis = _compute_instances(
            spec.get("compute_instances", GI_KEYS["compute_instances"].default), at
        )
        # A lone CI without a size spans its GI; several take a slice each unless sized.
        whole = profile.slices if len(cis) == 1 else 1
        cis = tuple(replace(c, slices=c.slices or whole) for c in cis)
        instances.append(
            _GpuInstance(
                id=int(spec.get("id", n + 1)),
                profile=profile,
                compute_instances=cis,
                extra_used_mib=float(spec.get("extra_used_mib", GI_KEYS["extra_used_mib"].default)),
            )
        )
        ci_slices = sum(c.slices for c in cis)
        if ci_slices > profile.slices:
            raise UsageError(
                f"scenario: {at}: its compute instances take {ci_slices} slices of {profile.slices}"
            )
    _check_instances(instances, where)
    out: list[SimMigDevice] = []
    for gi in instances:
        for ci in gi.compute_instances:
            crc = zlib.crc32(f"{seed_text}:{gi.id}:{ci.id}".encode())
            tail = crc * 7919 % 16**12
            uuid = (
                ci.uuid or f"MIG-{crc:08x}-{gi.id:04x}-5{crc % 4096:03x}-9{ci.id:03x}-{tail:012x}"
            )
            out.append(
                SimMigDevice(
                    gpu_instance_id=gi.id,
                    compute_instance_id=ci.id,
                    profile=gi.profile,
                    slices=ci.slices,
                    uuid=uuid,
                    extra_used_mib=gi.extra_used_mib,
                )
            )
    return tuple(out)


def _compute_instances(raw: Any, where: str) -> tuple[_ComputeInstance, ...]:
    if not isinstance(raw, list) or not raw:
        raise UsageError(f"scenario: {where}: compute_instances must be a non-empty list")
    out: list[_ComputeInstance] = []
    for item in raw:
        if isinstance(item, dict):
            unknown = set(item) - set(CI_KEYS)
            if unknown or "id" not in item:
                raise UsageError(
                    f"scenario: {where}: a compute instance needs an id; "
                    f"unknown keys {sorted(unknown)}"
                )
            uuid = item.get("uuid")
            out.append(
                _ComputeInstance(
                    id=int(item["id"]),
                    slices=int(item.get("slices", CI_KEYS["slices"].default)),
                    uuid=None if uuid is None else str(uuid),
                )
            )
        else:
            out.append(_ComputeInstance(id=int(item), slices=0))
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise UsageError(f"scenario: {where}: compute instance ids repeat")
    return tuple(out)


def _check_instances(instances: list[_GpuInstance], where: str) -> None:
    ids = [gi.id for gi in instances]
    if len(set(ids)) != len(ids):
        raise UsageError(f"scenario: {where}: gpu instance ids repeat")
    for profile in {gi.profile for gi in instances}:
        count = sum(gi.profile is profile for gi in instances)
        if count > profile.instances:
            raise UsageError(
                f"scenario: {where}: {count} gpu instances of {profile.name}; "
                f"the GPU has room for {profile.instances}"
            )
    slices = sum(gi.profile.slices for gi in instances)
    if slices > MAX_GPU_SLICES:
        raise UsageError(
            f"scenario: {where}: its gpu instances take {slices} slices of {MAX_GPU_SLICES}"
        )
