"""This process's host memory: its RSS now, and its exact peak RSS over a block of code.

A sampling thread misses a peak that comes and goes between two samples. The kernel does not:
Linux (4.0 on) keeps the process's peak RSS (``VmHWM`` in /proc/self/status) and resets it to the
current RSS when ``5`` is written to /proc/self/clear_refs. A :class:`PeakBlock` resets it when
it opens and reads it when it closes: the exact peak of the block, whatever a sampler saw.

This resets the whole process's counter, so ``getrusage``'s ``ru_maxrss`` of this process (which
follows VmHWM) no longer says the peak since the process started. Blocks may nest or overlap (a
``track()`` inside a tracked cell): before each reset the current VmHWM is folded into every
open block's peak, so an outer block keeps what an inner one reset.

Where that is not possible (no /proc, no permission, an older kernel: tested once), a block has
no exact peak and its caller keeps the sampled one (``PEAK_SAMPLED``).
"""

from __future__ import annotations

import os
import threading

PEAK_EXACT = "exact"  # the kernel's peak RSS over the block
PEAK_SAMPLED = "sampled"  # the highest sample: the true peak may be higher

_STATUS = "/proc/self/status"
_CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK = b"5"  # clear_refs: reset the peak RSS to the current RSS (Linux >= 4.0)


def _page_size() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4096


_PAGE = _page_size()


def rss_bytes() -> int | None:
    """This process's resident set size (/proc/self/statm; psutil elsewhere)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except Exception:  # noqa: BLE001 - no reading on this platform
        return None


def peak_rss_bytes() -> int | None:
    """The kernel's peak RSS of this process since the last reset (VmHWM); None if unreadable."""
    try:
        with open(_STATUS, "rb") as f:
            text = f.read()
    except OSError:
        return None
    at = text.find(b"VmHWM:")
    if at < 0:
        return None
    try:
        return int(text[at + 6 : text.index(b"\n", at)].split()[0]) * 1024  # kB
    except (ValueError, IndexError):
        return None


def _reset_peak() -> bool:
    try:
        # The kernel's own file, yet opened as every file gputop writes is (it may run as root).
        fd = os.open(_CLEAR_REFS, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return os.write(fd, _RESET_PEAK) == 1
    except OSError:  # EINVAL: a kernel before 4.0 (no "5"); EACCES, EPERM
        return False
    finally:
        os.close(fd)


_lock = threading.Lock()
_supported: bool | None = None  # None: not tested yet
_open: list[PeakBlock] = []  # the blocks open now, in any thread


def exact_peaks() -> bool:
    """Whether this process can reset and read its peak RSS (tested once, then remembered)."""
    global _supported
    if _supported is None:
        with _lock:
            if _supported is None:
                _supported = peak_rss_bytes() is not None and _reset_peak()
    return _supported


class PeakBlock:
    """The exact peak RSS over a block: :meth:`open` resets the counter, :meth:`close` reads it.

    ``kind`` is ``PEAK_EXACT``, or ``PEAK_SAMPLED`` where the kernel cannot say (then
    :meth:`close` returns None and the caller keeps its sampled peak).
    """

    __slots__ = ("_peak_bytes", "kind")

    def __init__(self) -> None:
        self.kind = PEAK_EXACT if exact_peaks() else PEAK_SAMPLED
        self._peak_bytes = 0

    def open(self) -> PeakBlock:
        """Reset the process's peak RSS (keeping every open block's peak so far)."""
        if self.kind != PEAK_EXACT:
            return self
        with _lock:
            _fold()
            if not _reset_peak():  # it worked when tested: something changed, fall back
                self.kind = PEAK_SAMPLED
                return self
            _open.append(self)
        return self

    def close(self) -> int | None:
        """The peak RSS since :meth:`open` (bytes); None where not exact."""
        if self.kind != PEAK_EXACT:
            return None
        with _lock:
            _fold()
            if self in _open:
                _open.remove(self)
        if not self._peak_bytes:  # VmHWM unreadable now: no exact figure after all
            self.kind = PEAK_SAMPLED
            return None
        return self._peak_bytes


def _fold() -> None:
    """Fold the current VmHWM into every open block's peak (before a reset or a close)."""
    peak = peak_rss_bytes()
    if peak is None:
        return
    for block in _open:
        if peak > block._peak_bytes:
            block._peak_bytes = peak
