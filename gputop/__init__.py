"""gputop: a terminal dashboard and scripting toolkit for NVIDIA GPUs."""

from __future__ import annotations

__version__ = "0.1.0"
