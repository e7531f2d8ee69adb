"""gputop: a terminal dashboard and scripting toolkit for NVIDIA GPUs.

The scripting API (``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``,
``track()``, ``stages()``, ``use_demo()``, ``use_driver()``) loads on first use, so
``import gputop`` stays cheap and never loads the NVIDIA bindings or Textual. The driver is read
in a process of its own: a crashing or hanging driver is a :class:`DriverCrashed` or
:class:`DriverTimeout` (both :class:`GputopError`) in your code, never a dead interpreter.
A source of your own: subclass :class:`SourceBase` and pass it as ``source=``.
``%load_ext gputop`` loads the IPython extension (gputop.notebook).
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
        ("DriverCrashed", "DriverError", "DriverMissing", "DriverTimeout", "GputopError"),
        "gputop.errors",
    ),
    "SourceBase": "gputop.engine.source",
}

__all__ = [
    "DriverCrashed",
    "DriverError",
    "DriverMissing",
    "DriverTimeout",
    "GputopError",
    "MemoryTrace",
    "SourceBase",
    "Stages",
    "TorchMemory",
    "TrackReport",
    "Tracker",
    "__version__",
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
    from gputop.engine.source import SourceBase
    from gputop.errors import DriverCrashed, DriverError, DriverMissing, DriverTimeout, GputopError
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
