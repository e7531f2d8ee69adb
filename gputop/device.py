"""Device objects: ``gputop.Device(0).memory_used_bytes()``, by NVML index, CUDA index or UUID.

A :class:`Device` is a GPU by NVML index (with its UUID, read when it was found); a
:class:`MigDevice` one MIG device of a GPU in MIG mode. Each reading reads one fresh snapshot
through the API's shared connection (``gputop.api.read_snapshot``, with the device's
``timeout_s``); :meth:`Device.sample` gives the whole typed GpuSample when many fields are
wanted at once. Units are in the names; a reading the driver does not give is None.

A GPU that fell off the bus is a state (``device.state`` is ``GpuState.LOST``, its readings
None), never an exception from a reading. The API's read errors stay as they are: a GPU that
does not answer in time is :class:`gputop.DriverTimeout`, a crashed driver process
:class:`gputop.DriverCrashed`, no driver :class:`gputop.DriverMissing`. An index or UUID that
names no device is :class:`gputop.DeviceNotFound`, at lookup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeAlias

from gputop import api
from gputop.engine.cuda_index import DeviceKey, MigKey, cuda_index_map, cuda_mig_index_map
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.model import GpuProcess, GpuSample, GpuState, Snapshot
from gputop.engine.model import MigDevice as MigSample
from gputop.engine.source import Source
from gputop.errors import DeviceNotFound

__all__ = ["AnyDevice", "Device", "MigDevice"]


def _read(source: Source | None, timeout_s: float) -> Snapshot:
    return api.read_snapshot(source, timeout_s)


def _count_line(snap: Snapshot) -> str:
    n = len(snap.gpus)
    return "this machine has no GPU" if n == 0 else f"this machine has {n} (0-{n - 1})"


def _keys(snap: Snapshot) -> list[DeviceKey]:
    """What CUDA's numbering needs of each GPU (the same facts the driver layer uses)."""
    return [
        DeviceKey(
            index=g.index,
            uuid=g.uuid,
            pci_bus_id=g.pci_bus_id,
            compute_capability=g.compute_capability,
            mig_devices=tuple(
                MigKey(
                    uuid=m.uuid,
                    gpu_instance_id=m.gpu_instance_id,
                    compute_instance_id=m.compute_instance_id,
                )
                for m in g.mig_devices
                if m.uuid
            ),
        )
        for g in snap.gpus
    ]


class Device:
    """One GPU, by NVML index (``Device(0)``); see also :meth:`from_cuda_index`,
    :meth:`from_uuid`, :meth:`all` and :meth:`cuda_all`.

    ``source``: a Source of your own (else the API's shared connection); ``timeout_s``: the
    time limit of each reading. Raises DeviceNotFound when no GPU has this index.
    """

    def __init__(
        self,
        index: int,
        *,
        source: Source | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        _sample: GpuSample | None = None,
    ) -> None:
        self.source = source
        self.timeout_s = timeout_s
        gpu = _sample
        if gpu is None:
            snap = _read(source, timeout_s)
            gpu = snap.gpu(index)
            if gpu is None:
                raise DeviceNotFound(f"no GPU with NVML index {index}: {_count_line(snap)}")
        self.index: int = gpu.index  # NVML index (nvidia-smi's)
        self.uuid: str | None = gpu.uuid  # "GPU-...", as read when the device was found
        self.name: str | None = gpu.name

    # -- finding devices ----------------------------------------------------------------------
    @classmethod
    def all(
        cls, *, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> list[Device]:
        """Every GPU of this machine, in NVML order."""
        snap = _read(source, timeout_s)
        return [cls(g.index, source=source, timeout_s=timeout_s, _sample=g) for g in snap.gpus]

    @classmethod
    def from_uuid(
        cls, uuid: str, *, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> AnyDevice:
        """The GPU (``GPU-...``) or MIG device (``MIG-...``) with this UUID (any case)."""
        wanted = uuid.strip().lower()
        snap = _read(source, timeout_s)
        for g in snap.gpus:
            if g.uuid and g.uuid.lower() == wanted:
                return cls(g.index, source=source, timeout_s=timeout_s, _sample=g)
            for m in g.mig_devices:
                if m.uuid and m.uuid.lower() == wanted:
                    return MigDevice._of(m, source=source, timeout_s=timeout_s)
        raise DeviceNotFound(f"no GPU or MIG device with UUID {uuid!r}: {_count_line(snap)}")

    @classmethod
    def cuda_all(
        cls,
        *,
        source: Source | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
    ) -> list[AnyDevice]:
        """The devices a CUDA program in this process sees, in CUDA index order.

        From ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES`` (indices, GPU UUIDs, MIG UUIDs)
        of ``environ`` (default: this process's environment now; CUDA itself reads it once, when
        it starts). A MIG device named there is a :class:`MigDevice`.
        """
        env = os.environ if environ is None else environ
        snap = _read(source, timeout_s)
        keys = _keys(snap)
        by_cuda: dict[int, AnyDevice] = {}
        for nvml_index, cuda_index in cuda_index_map(keys, env).items():
            gpu = snap.gpu(nvml_index)
            assert gpu is not None  # the keys came from this snapshot's GPUs
            by_cuda[cuda_index] = cls(nvml_index, source=source, timeout_s=timeout_s, _sample=gpu)
        migs = {m.uuid: m for g in snap.gpus for m in g.mig_devices if m.uuid}
        for mig_uuid, cuda_index in cuda_mig_index_map(keys, env).items():
            by_cuda[cuda_index] = MigDevice._of(migs[mig_uuid], source=source, timeout_s=timeout_s)
        return [by_cuda[i] for i in sorted(by_cuda)]

    @classmethod
    def from_cuda_index(
        cls,
        cuda_index: int,
        *,
        source: Source | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
    ) -> AnyDevice:
        """What CUDA in this process calls device ``cuda_index`` (``torch.device("cuda", i)``);
        see :meth:`cuda_all`."""
        visible = cls.cuda_all(source=source, timeout_s=timeout_s, environ=environ)
        if 0 <= cuda_index < len(visible):
            return visible[cuda_index]
        env = os.environ if environ is None else environ
        shown = env.get("CUDA_VISIBLE_DEVICES")
        why = f"CUDA_VISIBLE_DEVICES={shown!r}" if shown is not None else "this machine"
        raise DeviceNotFound(
            f"no CUDA device {cuda_index}: {why} shows CUDA {len(visible)} device(s)"
        )

    # -- readings -----------------------------------------------------------------------------
    def sample(self) -> GpuSample:
        """One fresh, whole typed reading of this GPU (every field at once).

        A GPU that is gone from the driver's list is a LOST sample with no readings.
        """
        gpu = _read(self.source, self.timeout_s).gpu(self.index)
        if gpu is None:
            return GpuSample(index=self.index, state=GpuState.LOST, uuid=self.uuid, name=self.name)
        return gpu

    @property
    def state(self) -> GpuState:
        """``GpuState.OK``, ``LOST`` (fell off the bus: readings None) or ``ERROR``, now."""
        return self.sample().state

    def memory_total_bytes(self) -> int | None:
        """Total memory (NVML's)."""
        return self.sample().memory_total_bytes

    def memory_used_bytes(self) -> int | None:
        """Memory in use, by every process."""
        return self.sample().memory_used_bytes

    def memory_free_bytes(self) -> int | None:
        """Memory free: what the next allocation can take."""
        return self.sample().memory_free_bytes

    def utilization_gpu_percent(self) -> int | None:
        """Percent of the last sample period a kernel ran."""
        return self.sample().utilization_gpu_percent

    def utilization_memory_percent(self) -> int | None:
        """Percent of the last sample period memory was read or written."""
        return self.sample().utilization_memory_percent

    def temperature_c(self) -> int | None:
        """Core temperature, degrees Celsius."""
        return self.sample().temperature_c

    def power_draw_w(self) -> float | None:
        """Power draw, watts."""
        mw = self.sample().power_draw_mw
        return None if mw is None else mw / 1000

    def power_limit_w(self) -> float | None:
        """Enforced power limit, watts."""
        mw = self.sample().power_limit_mw
        return None if mw is None else mw / 1000

    def fan_speed_percent(self) -> int | None:
        """The first fan's speed."""
        return self.sample().fan_speed_percent

    def clock_sm_mhz(self) -> int | None:
        """SM clock now."""
        return self.sample().clock_sm_mhz

    def clock_memory_mhz(self) -> int | None:
        """Memory clock now."""
        return self.sample().clock_memory_mhz

    def processes(self) -> list[GpuProcess]:
        """The processes the driver lists on this GPU (PID, type, used memory); see
        ``gputop.snapshot()`` for each process's user and command."""
        return list(self.sample().processes)

    def mig_devices(self) -> list[MigDevice]:
        """Its MIG devices (none when it is not in MIG mode)."""
        return [
            MigDevice._of(m, source=self.source, timeout_s=self.timeout_s)
            for m in self.sample().mig_devices
        ]

    def __repr__(self) -> str:
        return f"Device(index={self.index}, name={self.name!r}, uuid={self.uuid!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Device) and (other.index, other.uuid) == (self.index, self.uuid)

    def __hash__(self) -> int:
        return hash((self.index, self.uuid))


class MigDevice:
    """One MIG device (a compute instance of a GPU instance) of a GPU in MIG mode.

    Found through :meth:`Device.mig_devices`, :meth:`Device.from_uuid` or
    :meth:`Device.cuda_all`. NVML gives a MIG device its own memory but no utilisation on the
    drivers to date: ``utilization_gpu_percent()`` is then None.
    """

    def __init__(
        self, uuid: str, *, source: Source | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        found = Device.from_uuid(uuid, source=source, timeout_s=timeout_s)
        if not isinstance(found, MigDevice):
            raise DeviceNotFound(f"{uuid!r} is a whole GPU, not a MIG device: use gputop.Device")
        self._copy(found)

    @classmethod
    def _of(cls, mig: MigSample, *, source: Source | None, timeout_s: float) -> MigDevice:
        made = cls.__new__(cls)
        made.source = source
        made.timeout_s = timeout_s
        made.uuid = mig.uuid
        made.gpu_index = mig.gpu_index
        made.mig_index = mig.index
        made.gpu_instance_id = mig.gpu_instance_id
        made.compute_instance_id = mig.compute_instance_id
        made.profile = mig.profile
        return made

    def _copy(self, other: MigDevice) -> None:
        for name in _MIG_FIELDS:
            setattr(self, name, getattr(other, name))

    source: Source | None
    timeout_s: float
    uuid: str | None  # "MIG-...", what CUDA_VISIBLE_DEVICES takes
    gpu_index: int  # NVML index of its GPU
    mig_index: int  # its index under that GPU
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None  # "3g.40gb"

    @property
    def name(self) -> str:
        """``"MIG 3g.40gb"``, as ``nvidia-smi -L`` names it."""
        return f"MIG {self.profile}" if self.profile else "MIG device"

    def parent(self) -> Device:
        """The GPU it is part of."""
        return Device(self.gpu_index, source=self.source, timeout_s=self.timeout_s)

    def _now(self) -> tuple[GpuState, MigSample | None]:
        gpu = _read(self.source, self.timeout_s).gpu(self.gpu_index)
        if gpu is None:
            return GpuState.LOST, None
        for m in gpu.mig_devices:
            if (m.uuid and m.uuid == self.uuid) or (
                not m.uuid
                and (m.gpu_instance_id, m.compute_instance_id)
                == (self.gpu_instance_id, self.compute_instance_id)
            ):
                return gpu.state, m
        return gpu.state, None

    def sample(self) -> MigSample | None:
        """One fresh typed reading of this MIG device; None when its GPU is lost or the MIG
        device is gone (MIG reconfigured)."""
        return self._now()[1]

    @property
    def state(self) -> GpuState:
        """Its GPU's state now (``LOST``: readings None)."""
        return self._now()[0]

    def memory_total_bytes(self) -> int | None:
        """Its GPU instance's memory (its compute instances share it)."""
        m = self.sample()
        return None if m is None else m.memory_total_bytes

    def memory_used_bytes(self) -> int | None:
        """Memory in use in its GPU instance."""
        m = self.sample()
        return None if m is None else m.memory_used_bytes

    def memory_free_bytes(self) -> int | None:
        """Memory free in its GPU instance."""
        m = self.sample()
        return None if m is None else m.memory_free_bytes

    def utilization_gpu_percent(self) -> int | None:
        """None on the drivers to date (NVML gives MIG devices no utilisation)."""
        m = self.sample()
        return None if m is None else m.utilization_gpu_percent

    def processes(self) -> list[GpuProcess]:
        """The processes the driver lists on this MIG device."""
        gpu = _read(self.source, self.timeout_s).gpu(self.gpu_index)
        if gpu is None:
            return []
        here = (self.gpu_instance_id, self.compute_instance_id)
        return [
            p
            for p in gpu.processes
            if (m := gpu.mig_device_of(p)) is not None
            and (m.gpu_instance_id, m.compute_instance_id) == here
        ]

    def __repr__(self) -> str:
        return (
            f"MigDevice(gpu_index={self.gpu_index}, gpu_instance_id={self.gpu_instance_id}, "
            f"compute_instance_id={self.compute_instance_id}, profile={self.profile!r}, "
            f"uuid={self.uuid!r})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MigDevice) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[int, int | None, int | None, str | None]:
        return (self.gpu_index, self.gpu_instance_id, self.compute_instance_id, self.uuid)


_MIG_FIELDS = (
    "source",
    "timeout_s",
    "uuid",
    "gpu_index",
    "mig_index",
    "gpu_instance_id",
    "compute_instance_id",
    "profile",
)

AnyDevice: TypeAlias = Device | MigDevice  # what a CUDA index or a UUID can name
