"""heap_trim: the C heap's free pages go back to the kernel (a real process, its real RSS)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

# Fills the C heap with 16 MiB of 4 KiB blocks (malloc's, not pymalloc's: over 512 bytes),
# keeps every 64th so glibc cannot give the heap back from its top, frees the rest, then trims.
_CHILD = r"""
from gputop.engine.heap_trim import release_free_pages

def rss_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

blocks = [bytes(4096) for _ in range(4096)]
kept = blocks[::64]
del blocks
before = rss_kib()
trimmed = release_free_pages()
print(trimmed, before - rss_kib(), len(kept))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc_trim")
def test_freed_pages_leave_the_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "True"
    assert int(out[1]) > 8 * 1024  # KiB: most of the 15.75 MiB freed
