"""Model-level fakes for fast engine/UI tests (the simulated driver covers the driver path)."""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import replace

from gputop.engine.model import GpuProcess, GpuSample, GpuState, ProcessType, Snapshot, SystemInfo
from gputop.engine.source import SourceBase

GiB = 1024**3


def make_gpu(index: int = 0, **overrides: object) -> GpuSample:
    """A plausible healthy GPU; override any field."""
    base = GpuSample(
        index=index,
        cuda_index=index,
        uuid=f"GPU-00000000-0000-0000-0000-00000000000{index}",
        name="NVIDIA A100-SXM4-80GB",
        pci_bus_id=f"00000000:0{index}:00.0",
        compute_capability=(8, 0),
        memory_total_bytes=80 * GiB,
        memory_used_bytes=20 * GiB,
        memory_free_bytes=60 * GiB,
        utilization_gpu_percent=50,
        utilization_memory_percent=30,
        temperature_c=60,
        temperature_slowdown_c=90,
        temperature_shutdown_c=95,
        fan_speeds_percent=(40,),
        power_draw_mw=250_000,
        power_limit_mw=400_000,
        clock_sm_mhz=1410,
        clock_memory_mhz=1593,
        clock_graphics_mhz=1410,
        clock_sm_max_mhz=1410,
        clock_memory_max_mhz=1593,
        clock_graphics_max_mhz=1410,
        performance_state=0,
        throttle_reasons=(),
        pcie_gen=4,
        pcie_gen_max=4,
        pcie_width=16,
        pcie_width_max=16,
        pcie_rx_kbps=1000,
        pcie_tx_kbps=2000,
        ecc_errors_uncorrected_volatile=0,
        compute_mode="Default",
        persistence_mode=True,
        mig_mode=False,
        processes=(
            GpuProcess(
                pid=4242,
                gpu_index=index,
                type=ProcessType.COMPUTE,
                used_memory_bytes=18 * GiB,
            ),
        ),
    )
    return replace(base, **overrides)  # type: ignore[arg-type]


def make_snapshot(seq: int = 1, gpus: tuple[GpuSample, ...] | None = None) -> Snapshot:
    """A snapshot of a 2-GPU box, or of the GPUs given."""
    return Snapshot(
        seq=seq,
        taken_at_wall=1_700_000_000.0 + seq,
        taken_at_mono=1000.0 + seq,
        system=SystemInfo(
            hostname=socket.gethostname(),
            driver_version="550.54.15",
            cuda_driver_version="12.4",
            nvml_version="12.550.54.15",
        ),
        gpus=gpus if gpus is not None else (make_gpu(0), make_gpu(1)),
    )


def lost_gpu(index: int) -> GpuSample:
    """A GPU that fell off the bus."""
    return GpuSample(index=index, state=GpuState.LOST, error="GPU is lost")


class FakeSource(SourceBase):
    """A Source that returns prepared snapshots; can be made to hang or raise."""

    simulated = True
    dev_dir = os.devnull  # prepared snapshots: no box whose device files could be read

    def __init__(self, snapshots: list[Snapshot] | None = None) -> None:
        self.snapshots = snapshots or [make_snapshot()]
        self.calls = 0
        self.hang = threading.Event()  # set() -> snapshot() blocks until release is set
        self.release = threading.Event()
        self.raise_next: Exception | None = None

    def snapshot(self) -> Snapshot:
        self.calls += 1
        if self.hang.is_set():
            self.release.wait()
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc
        snap = self.snapshots[min(self.calls - 1, len(self.snapshots) - 1)]
        return replace(
            snap, seq=self.calls, taken_at_mono=time.monotonic(), taken_at_wall=time.time()
        )

    def close(self) -> None:
        self.release.set()
