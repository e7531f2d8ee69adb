"""A metric collector for logging from a training loop (TensorBoard, W&B): mean/min/max/last of
every GPU reading over the window since the last ``collect()``.

    with gputop.Collector(interval_s=1.0, tag="resources") as collector:
        for step in range(steps):
            train_step()
            if step % 100 == 0:
                for key, value in collector.collect().items():  # or wandb.log(..., step=step)
                    writer.add_scalar(key, value, step)

:meth:`Collector.start` takes one reading, then a daemon thread one whole snapshot every
``interval_s``, through the API's shared connection (or ``source=``), each read within
``timeout_s``; a read that fails is counted (``read_errors``), never raised into the loop.
``collect()`` never reads the driver: it hands over the running aggregates (a few numbers per
reading, whatever the run's length) and starts a new window.

Keys: ``[tag/]gpu<NVML index>/<reading>/<mean|min|max|last>``, units in the reading's name
(``gpu0/utilization_gpu_percent/mean``, ``gpu0/power_draw_w/max``); a MIG device's under
``gpu<index>/mig<GI>.<CI>/``; this process's GPU memory as ``gpu<index>/process_memory_bytes``
(the driver's figure for the PIDs followed), its resident host memory as
``host/process_rss_bytes``; and ``collector/samples``, ``collector/read_errors``,
``collector/window_s``. A reading the driver does not give (a lost GPU's, an unsupported one)
is absent, never a zero.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from types import TracebackType

from gputop import api, host_memory
from gputop.engine.deadline import DEFAULT_TIMEOUT_S
from gputop.engine.model import GpuSample, GpuState, Snapshot
from gputop.engine.source import Source

__all__ = ["Collector"]

# GpuSample's numeric readings the collector aggregates, by their key (units in the name).
_GPU_FIELDS = (
    "utilization_gpu_percent",
    "utilization_memory_percent",
    "encoder_percent",
    "decoder_percent",
    "memory_used_bytes",
    "memory_free_bytes",
    "memory_total_bytes",
    "memory_reserved_bytes",
    "temperature_c",
    "temperature_memory_c",
    "fan_speed_percent",
    "clock_graphics_mhz",
    "clock_sm_mhz",
    "clock_memory_mhz",
    "pcie_rx_kbps",
    "pcie_tx_kbps",
    "performance_state",
)
_MIG_FIELDS = ("memory_used_bytes", "memory_free_bytes", "memory_total_bytes")
_STATS = ("mean", "min", "max", "last")


@dataclass(slots=True)
class _Running:
    """One reading's aggregate over a window: constant memory however many samples."""

    count: int = 0
    total: float = 0.0
    low: float = 0.0
    high: float = 0.0
    last: float = 0.0

    def add(self, value: float) -> None:
        if self.count == 0:
            self.low = self.high = value
        else:
            self.low = min(self.low, value)
            self.high = max(self.high, value)
        self.count += 1
        self.total += value
        self.last = value

    def stats(self) -> tuple[float, float, float, float]:
        return (self.total / self.count, self.low, self.high, self.last)


def gpu_readings(gpu: GpuSample) -> dict[str, float]:
    """The numeric readings of one GPU sample by key (``power_draw_w``...); None ones absent.

    A GPU that is not OK (lost, failing, not responding) has none.
    """
    if gpu.state is not GpuState.OK:
        return {}
    out: dict[str, float] = {}
    for name in _GPU_FIELDS:
        value = getattr(gpu, name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[name] = value
    if gpu.power_draw_mw is not None:
        out["power_draw_w"] = gpu.power_draw_mw / 1000
    if gpu.power_limit_mw is not None:
        out["power_limit_w"] = gpu.power_limit_mw / 1000
    if gpu.memory_used_bytes is not None and gpu.memory_total_bytes:
        out["memory_used_percent"] = 100 * gpu.memory_used_bytes / gpu.memory_total_bytes
    for mig in gpu.mig_devices:
        where = (
            f"mig{mig.index}/"  # the GI and CI ids are not known: its index under the GPU
            if mig.gpu_instance_id is None
            else f"mig{mig.gpu_instance_id}.{mig.compute_instance_id or 0}/"
        )
        for name in _MIG_FIELDS:
            value = getattr(mig, name)
            if value is not None:
                out[where + name] = value
        if mig.utilization_gpu_percent is not None:
            out[where + "utilization_gpu_percent"] = mig.utilization_gpu_percent
    return out


class Collector:
    """Samples every ``interval_s`` in a daemon thread; :meth:`collect` returns the window's
    mean/min/max/last of every reading as a flat dict and starts a new window.

    ``tag``: a prefix for every key (``"resources"`` -> ``resources/gpu0/...``). ``pids``: the
    processes whose GPU memory is followed (default: this one). ``source``: a Source of your own
    (else the API's shared connection). Use as a context manager, or :meth:`start` /
    :meth:`stop`; :meth:`sample` takes one reading now (without the thread).
    """

    def __init__(
        self,
        *,
        interval_s: float = 1.0,
        tag: str = "",
        pids: Iterable[int] | None = None,
        source: Source | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, not {interval_s!r}")
        self.interval_s = interval_s
        self.prefix = tag.rstrip("/") + "/" if tag else ""
        self.pids = frozenset(pids) if pids is not None else frozenset({os.getpid()})
        self.source = source
        self.timeout_s = timeout_s
        self.samples = 0  # readings taken in this window
        self.read_errors = 0  # readings that failed in this window
        self.last_error: str | None = None  # the newest failure, in one line
        self._lock = threading.Lock()  # guards the window (the thread adds, collect() takes)
        self._window: dict[str, _Running] = {}
        self._window_start = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- running ------------------------------------------------------------------------------
    def start(self) -> Collector:
        """Take one reading now (so the first window is never empty; it waits for the driver
        to open, at most ``timeout_s``), then one every ``interval_s`` in a daemon thread."""
        if self._thread is not None and self._thread.is_alive():
            return self
        self.sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gputop-collector", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling; waits at most ``timeout_s`` for a reading in progress (a hung driver
        keeps only the daemon thread, never the caller)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(self.timeout_s + self.interval_s)

    def __enter__(self) -> Collector:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    # -- reading ------------------------------------------------------------------------------
    def sample(self) -> bool:
        """Take one reading into the window now; False (and counted) when it failed."""
        try:
            snap = api.read_snapshot(self.source, self.timeout_s)
        except Exception as exc:  # noqa: BLE001 - a failed read is counted, never raised
            with self._lock:
                self.read_errors += 1
                self.last_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            return False
        readings = self._readings(snap)
        with self._lock:
            for key, value in readings.items():
                running = self._window.get(key)
                if running is None:
                    running = self._window[key] = _Running()
                running.add(value)
            self.samples += 1
        return True

    def _readings(self, snap: Snapshot) -> dict[str, float]:
        out: dict[str, float] = {}
        for gpu in snap.gpus:
            where = f"gpu{gpu.index}/"
            for key, value in gpu_readings(gpu).items():
                out[where + key] = value
            # Only where the driver's list was read: an unread list is not "uses nothing".
            if gpu.state is GpuState.OK and gpu.process_list_error is None:
                out[where + "process_memory_bytes"] = sum(
                    p.used_memory_bytes or 0 for p in gpu.processes if p.pid in self.pids
                )
        rss = host_memory.rss_bytes() if os.getpid() in self.pids else None
        if rss is not None:
            out["host/process_rss_bytes"] = rss
        return out

    def collect(self) -> dict[str, float]:
        """The window's ``{key/mean|min|max|last: value}`` (and ``collector/samples``,
        ``collector/read_errors``, ``collector/window_s``), then a new window. Never reads the
        driver: cheap enough for every step."""
        now = time.monotonic()
        with self._lock:
            window, self._window = self._window, {}
            samples, errors = self.samples, self.read_errors
            self.samples = self.read_errors = 0
            started, self._window_start = self._window_start, now
        out: dict[str, float] = {}
        for key in sorted(window):
            for stat, value in zip(_STATS, window[key].stats(), strict=True):
                out[f"{self.prefix}{key}/{stat}"] = value
        out[f"{self.prefix}collector/samples"] = samples
        out[f"{self.prefix}collector/read_errors"] = errors
        out[f"{self.prefix}collector/window_s"] = now - started
        return out
