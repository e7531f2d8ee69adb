"""The one way in to the NVIDIA driver: NVML, through pynvml, into immutable Snapshots.

Only this package (and the simulator, which serves a library to pynvml) imports pynvml. Every
field is read on its own under one error policy (``calls``): a field whose call fails, with any
error code known or not, is None and costs nothing else; only NVML_ERROR_GPU_IS_LOST makes a
GPU a GpuSample in state LOST, while the others keep working. A process list the driver could
not give is unknown (GpuSample.process_list_error), never empty.

Modules, each importing only those above it:

- ``calls``: the error policy (read, first, soft, Lost) and which call each thread is in
  (``in_flight``, for naming a hung call).
- ``pynvml_private``: every use of pynvml's private internals, feature-tested, with a fallback.
- ``mig``: MIG devices and their profile names.
- ``static``: what is read once (a GPU's identity, limits; the host's driver versions).
- ``processes``: the process lists and per-process utilisation, unchanged entries kept.
- ``counters``: the exporter's counters (energy, NVLink, GPM, Xid events).
- ``query``: the readings ``gputop query`` asks for by name.
- ``reader``: NvmlSource, which puts a snapshot together from the rest.
"""

from __future__ import annotations

# pynvml_private first: it imports pynvml without ctypes.util (import_pynvml), before the
# reader's modules import pynvml themselves.
from gputop.engine.nvml import pynvml_private as _pynvml_private  # noqa: F401
from gputop.engine.nvml.reader import NvmlSource

__all__ = ["NvmlSource"]
