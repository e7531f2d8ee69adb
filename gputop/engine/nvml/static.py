"""What does not change of a GPU or the host while gputop runs: read once, at start."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pynvml

from gputop.engine.cuda_index import MigKey
from gputop.engine.model import SystemInfo
from gputop.engine.nvml.calls import Lost, first, read, text
from gputop.engine.nvml.mig import MigState, mig_keys
from gputop.engine.sanitize import clean


@dataclass(slots=True)
class Static:
    """Per-GPU facts that do not change while we run: read once."""

    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None
    minor_number: int | None = None
    serial: str | None = None
    slowdown_c: int | None = None
    shutdown_c: int | None = None
    clock_max: dict[str, int | None] = field(default_factory=dict)
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    fans: int | None = None
    cuda_index: int | None = None
    mig_keys: tuple[MigKey, ...] = ()  # its MIG devices at start (for CUDA_VISIBLE_DEVICES)
    mig: MigState = field(default_factory=MigState)  # what its MIG reading keeps
    lost: bool = False  # a call read here answered GPU_IS_LOST: a lost GPU does not come back


def read_static(handle: Any) -> Static:
    """A GPU's Static (all None for a GPU the driver gave no handle for)."""
    st = Static()
    if handle is None:
        return st
    try:
        st.uuid = text(read(pynvml.nvmlDeviceGetUUID, handle))
        st.name = text(read(pynvml.nvmlDeviceGetName, handle))
        pci = read(pynvml.nvmlDeviceGetPciInfo, handle)
        st.pci_bus_id = text(pci.busId) if pci is not None else None
        cc = read(pynvml.nvmlDeviceGetCudaComputeCapability, handle)
        st.compute_capability = (int(cc[0]), int(cc[1])) if cc else None
        st.minor_number = read(pynvml.nvmlDeviceGetMinorNumber, handle)
        st.serial = text(read(pynvml.nvmlDeviceGetSerial, handle))
        st.slowdown_c = read(
            pynvml.nvmlDeviceGetTemperatureThreshold,
            handle,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN,
        )
        st.shutdown_c = read(
            pynvml.nvmlDeviceGetTemperatureThreshold,
            handle,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN,
        )
        for key, clock in (
            ("graphics", pynvml.NVML_CLOCK_GRAPHICS),
            ("sm", pynvml.NVML_CLOCK_SM),
            ("memory", pynvml.NVML_CLOCK_MEM),
        ):
            st.clock_max[key] = read(pynvml.nvmlDeviceGetMaxClockInfo, handle, clock)
        st.pcie_gen_max = read(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, handle)
        st.pcie_width_max = read(pynvml.nvmlDeviceGetMaxPcieLinkWidth, handle)
        st.fans = first(("nvmlDeviceGetNumFans", lambda: pynvml.nvmlDeviceGetNumFans(handle)))
        st.mig_keys = mig_keys(handle)
    except Lost:
        st.lost = True  # every tick reports it lost, whichever calls a tick makes
    return st


def read_system(*, simulated: bool) -> SystemInfo:
    """Host and driver facts."""
    return SystemInfo(
        # os.uname(), not socket.gethostname() (the same uname(2) on Linux): no socket module
        # in the driver process for one name.
        hostname=clean(os.uname().nodename),
        driver_version=text(
            first(("nvmlSystemGetDriverVersion", pynvml.nvmlSystemGetDriverVersion))
        ),
        cuda_driver_version=cuda_version_text(
            first(
                ("nvmlSystemGetCudaDriverVersion_v2", pynvml.nvmlSystemGetCudaDriverVersion_v2),
                ("nvmlSystemGetCudaDriverVersion", pynvml.nvmlSystemGetCudaDriverVersion),
            )
        ),
        nvml_version=text(first(("nvmlSystemGetNVMLVersion", pynvml.nvmlSystemGetNVMLVersion))),
        simulated=simulated,
    )


def cuda_version_text(version: int | None) -> str | None:
    """12040 -> '12.4' (NVML's integer CUDA driver version)."""
    if version is None:
        return None
    return f"{version // 1000}.{(version % 1000) // 10}"
