"""gputop: a terminal dashboard and scripting toolkit for NVIDIA GPUs.

The scripting API (``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``,
``track()``, ``stages()``, ``use_demo()``, ``use_driver()``; the device objects ``Device`` and
``MigDevice``; the ``Collector`` for training-loop logging) loads on first use, so
``import gputop`` stays cheap and never loads the NVIDIA bindings or Textual. The driver is read
in a process of its own: a crashing or hanging driver is a :class:`DriverCrashed` or
:class:`DriverTimeout` (both :class:`GputopError`) in your code, never a dead interpreter; no
driver at all is :class:`DriverMissing` (``use_demo()`` then tries gputop on simulated GPUs).
Every error gputop raises to Python code is importable from here.
A source of your own: subclass :class:`SourceBase` and pass it as ``source=``.
``%load_ext gputop`` loads the IPython extension (gputop.notebook); ``cell_records()`` gives
its per-cell records as data, ``Experiment`` spans cells and reclaims what they left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop.version import __version__

# Each lazily loaded name -> the module that holds it.
_LAZY = {
    **dict.fromkeys(
        ("devices", "processes", "show", "snapshot", "use_demo", "use_driver"), "gputop.api"
    ),
    **dict.fromkeys(
        ("MemoryTrace", "Stages", "TorchMemory", "TrackReport", "Tracker", "stages", "track"),
        "gputop.tracking",
    ),
    **dict.fromkeys(
        (
            "DeviceNotFound",
            "DriverCrashed",
            "DriverError",
            "DriverMissing",
            "DriverTimeout",
            "GputopError",
            "UsageError",
        ),
        "gputop.errors",
    ),
    **dict.fromkeys(("Device", "MigDevice"), "gputop.device"),
    "Collector": "gputop.collector",
    **dict.fromkeys(("Experiment", "ExperimentError", "ExperimentReport"), "gputop.experiment"),
    "SourceBase": "gputop.engine.source",
    "GpuState": "gputop.engine.model",
}

__all__ = [
    "Collector",
    "Device",
    "DeviceNotFound",
    "DriverCrashed",
    "DriverError",
    "DriverMissing",
    "DriverTimeout",
    "Experiment",
    "ExperimentError",
    "ExperimentReport",
    "GpuState",
    "GputopError",
    "MemoryTrace",
    "MigDevice",
    "SourceBase",
    "Stages",
    "TorchMemory",
    "TrackReport",
    "Tracker",
    "UsageError",
    "__version__",
    "cell_records",
    "devices",
    "load_ipython_extension",
    "processes",
    "show",
    "snapshot",
    "stages",
    "track",
    "unload_ipython_extension",
    "use_demo",
    "use_driver",
]

if TYPE_CHECKING:
    from gputop.api import devices, processes, show, snapshot, use_demo, use_driver
    from gputop.collector import Collector
    from gputop.device import Device, MigDevice
    from gputop.engine.model import GpuState
    from gputop.engine.source import SourceBase
    from gputop.errors import (
        DeviceNotFound,
        DriverCrashed,
        DriverError,
        DriverMissing,
        DriverTimeout,
        GputopError,
        UsageError,
    )
    from gputop.experiment import Experiment, ExperimentError, ExperimentReport
    from gputop.tracking import (
        MemoryTrace,
        Stages,
        TorchMemory,
        Tracker,
        TrackReport,
        stages,
        track,
    )


def load_ipython_extension(ip: Any) -> None:
    """``%load_ext gputop``: a line of GPU, host and torch memory after each cell."""
    from gputop.notebook import load_ipython_extension as load  # only when the extension loads

    load(ip)


def cell_records(shell: Any | None = None) -> list[dict[str, Any]]:
    """The cells ``%load_ext gputop`` recorded, as dicts in bytes and seconds (one per cell):
    ``pandas.DataFrame(gputop.cell_records())``. Keys: gputop.notebook.CellRecord.as_dict."""
    from gputop.notebook import records  # only when asked

    return records(shell)


def unload_ipython_extension(ip: Any) -> None:
    """``%unload_ext gputop``: stop the per-cell lines."""
    from gputop.notebook import unload_ipython_extension as unload

    unload(ip)


def __getattr__(name: str) -> Any:
    """Load the scripting API on first use of one of its names."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gputop' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
