"""gputop: a terminal dashboard and scripting toolkit for NVIDIA GPUs.

The scripting API (``gputop.devices()``, ``processes()``, ``snapshot()``, ``show()``,
``track()``, ``use_demo()``) loads on first use, so ``import gputop`` stays cheap and never loads
the NVIDIA bindings or Textual.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gputop.version import __version__

__all__ = [
    "MemoryTrace",
    "TrackReport",
    "Tracker",
    "__version__",
    "devices",
    "processes",
    "show",
    "snapshot",
    "track",
    "use_demo",
]
_API = frozenset(__all__) - {"__version__"}

if TYPE_CHECKING:
    from gputop.api import (
        MemoryTrace,
        Tracker,
        TrackReport,
        devices,
        processes,
        show,
        snapshot,
        track,
        use_demo,
    )


def __getattr__(name: str) -> Any:
    """Load the scripting API on first use of one of its names."""
    if name in _API:
        from gputop import api

        return getattr(api, name)
    raise AttributeError(f"module 'gputop' has no attribute {name!r}")
