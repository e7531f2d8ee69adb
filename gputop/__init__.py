"""gputop: a terminal dashboard and scripting toolkit for NVIDIA GPUs.

The scripting API (``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``,
``track()``, ``stages()``, ``use_demo()``) loads on first use, so ``import gputop`` stays cheap
and never loads the NVIDIA bindings or Textual. ``%load_ext gputop`` loads the IPython extension
(gputop.notebook).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop.version import __version__

__all__ = [
    "MemoryTrace",
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
]
_API = frozenset(__all__) - {"__version__", "load_ipython_extension", "unload_ipython_extension"}

if TYPE_CHECKING:
    from gputop.api import (
        MemoryTrace,
        Stages,
        TorchMemory,
        Tracker,
        TrackReport,
        devices,
        processes,
        show,
        snapshot,
        stages,
        track,
        use_demo,
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
    if name in _API:
        from gputop import api

        return getattr(api, name)
    raise AttributeError(f"module 'gputop' has no attribute {name!r}")
