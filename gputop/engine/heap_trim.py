"""Hand the C heap's free pages back to the kernel (glibc's ``malloc_trim``): driver process only.

Opening the driver parses a scenario or loads the NVML library, and the first reading reads every
field once; most of what that makes is freed at once, but glibc keeps free pages inside its heap
for later. Trimming once, when the heap has settled, takes 1.3 MiB off the driver process on the
simulated ``dgx`` box (``bench floor``). The dashboard does not call it: it has no ctypes loaded,
and ctypes costs more (0.7 MiB) than a trim gives back there (0.5 MiB).
"""

from __future__ import annotations


def release_free_pages() -> bool:
    """Ask the C library to return its free pages; False where there is no ``malloc_trim``
    (musl, macOS) or it kept everything."""
    import ctypes  # already loaded in the driver process, by pynvml

    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return bool(trim(0))
