"""Who holds the GPUs: every process with an ``nvidia*`` device file open or mapped (``fuser -v``).

Reads ``/proc/PID/fd`` links and ``/proc/PID/maps`` directly (no psutil, no subprocess) so a scan
of thousands of processes stays cheap. Both directories are parameters so tests use their own files.
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from gputop.engine.sanitize import clean

NOT_ROOT_NOTE = "not root: other users' open files cannot be read; run as root to see every holder"


def _denied_as_root_note(denied: int) -> str:
    return (
        f"{denied} process{'es' if denied != 1 else ''} could not be inspected even as root "
        "(kernel or container security policy); a holder among them would be missing"
    )


# Long-running tools that keep the device files open by design: not stuck workers.
DAEMON_NAMES = frozenset(
    {
        "nvidia-persistenced",
        "nv-hostengine",
        "nvidia-smi",
        "dcgm-exporter",
        "nvidia-fabricmanager",
        "nv-fabricmanager",
        "nvtop",
        "nvitop",
        "gpustat",
        "gputop",
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class HolderScan:
    """The result of one scan: PID -> device files it holds, plus what could not be read."""

    holders: dict[int, tuple[str, ...]] = field(default_factory=dict)
    note: str | None = None  # said once per scan, e.g. NOT_ROOT_NOTE
    scanned: int = 0  # processes looked at
    denied: int = 0  # processes whose fds/maps we were not allowed to read
    unreadable: frozenset[int] = frozenset()  # their PIDs: "holds nothing" is unknown for them
    taken_at_mono: float = 0.0
    duration_s: float = 0.0
    dev_dir: str = "/dev"
    proc_root: str = "/proc"
    # From the incremental watch (gputop.engine.holder_watch), None from a full scan:
    checked: frozenset[int] | None = None  # listed PIDs looked at since NVML first listed them
    sweep_s: float | None = None  # every process is looked at at least this often
    looked: int = 0  # processes looked at this tick (one stat() each)
    full_looks: int = 0  # ... of which read in full (maps and fd links)


@functools.lru_cache(maxsize=16)
def device_prefix(dev_dir: str) -> str:
    # readlink() gives resolved paths, so resolve the directory the same way.
    return os.path.join(os.path.realpath(dev_dir), "nvidia")


def _fd_targets(fd_dir: str, prefix: str) -> set[str]:
    """Device files open through the fds in ``fd_dir``; raises PermissionError as the OS does."""
    found: set[str] = set()
    # Links read relative to the open directory: the kernel walks one name, not the whole path.
    dir_fd = os.open(fd_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in os.listdir(dir_fd):
            try:
                target = os.readlink(name, dir_fd=dir_fd)
            except OSError:  # the fd was closed while we looked
                continue
            if target.startswith(prefix):
                found.add(target.removesuffix(" (deleted)"))
    finally:
        os.close(dir_fd)
    return found


def _read_all(path: str) -> bytes:
    """The whole file, through plain os.read: a third cheaper than open() for /proc files."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _mapped_targets(data: bytes, prefix: str) -> set[str]:
    """Device files mapped into memory (still held after the fd is closed), from maps text."""
    needle = prefix.encode()
    if needle not in data:  # the common case: one C-level search, no line parsing
        return set()
    found: set[str] = set()
    for line in data.splitlines():
        idx = line.find(needle)
        if idx >= 0:
            found.add(line[idx:].decode(errors="replace").removesuffix(" (deleted)"))
    return found


class Look(NamedTuple):
    """What one look at one /proc/PID directory found."""

    found: set[str]  # device files held
    denied: bool  # maps or fds were not ours to read
    inert: bool = False  # no memory map: a kernel thread or a zombie, which never hold files
    gone: bool = False  # the process exited while we looked


def look_at(proc_dir: str, prefix: str) -> Look:
    """Read one process's maps and fd links for device files under ``prefix``."""
    found: set[str] = set()
    denied = False
    try:
        maps = _read_all(os.path.join(proc_dir, "maps"))
    except PermissionError:
        denied = True
    except OSError:  # vanished mid-scan
        return Look(found, denied, gone=True)
    else:
        if not maps:
            # No memory map: a kernel thread or a zombie, which have no open files either.
            # Most PIDs on a big box are kernel threads; this skips their fd directories.
            return Look(found, denied, inert=True)
        found |= _mapped_targets(maps, prefix)
    try:
        found |= _fd_targets(os.path.join(proc_dir, "fd"), prefix)
    except PermissionError:
        denied = True
    except OSError:  # vanished mid-scan
        return Look(found, denied, gone=True)
    return Look(found, denied)


def note_for(denied: int, euid: int) -> str | None:
    if not denied:
        return None
    return NOT_ROOT_NOTE if euid != 0 else _denied_as_root_note(denied)


def scan_holders(
    dev_dir: str = "/dev", proc_root: str = "/proc", *, euid: int | None = None
) -> HolderScan:
    """Every process holding ``<dev_dir>/nvidia*`` open or mapped; never raises for one process.

    ``euid`` (default: ours) only chooses the wording of the note about unreadable processes.
    """
    start = time.monotonic()
    prefix = device_prefix(dev_dir)
    holders: dict[int, tuple[str, ...]] = {}
    scanned = 0
    unreadable: set[int] = set()
    try:
        names = [e.name for e in os.scandir(proc_root) if e.name.isdigit()]
    except OSError as exc:
        return HolderScan(
            note=f"cannot read {proc_root}: {exc.strerror}",
            taken_at_mono=start,
            dev_dir=dev_dir,
            proc_root=proc_root,
        )
    for name in names:
        scanned += 1
        seen = look_at(os.path.join(proc_root, name), prefix)
        if seen.denied:
            unreadable.add(int(name))
        if seen.found:
            holders[int(name)] = names_of(seen.found)
    return HolderScan(
        holders=holders,
        note=note_for(len(unreadable), os.geteuid() if euid is None else euid),
        scanned=scanned,
        denied=len(unreadable),
        unreadable=frozenset(unreadable),
        taken_at_mono=start,
        duration_s=time.monotonic() - start,
        dev_dir=dev_dir,
        proc_root=proc_root,
    )


def held_by(pid: int, dev_dir: str = "/dev", proc_root: str = "/proc") -> tuple[str, ...] | None:
    """The device files one process holds now, or None when we may not look."""
    seen = look_at(os.path.join(proc_root, str(pid)), device_prefix(dev_dir))
    if seen.denied and not seen.found:
        return None
    return names_of(seen.found)


def names_of(found: set[str]) -> tuple[str, ...]:
    # Device names are paths under a folder that may not be /dev (the demo's is in /tmp).
    return tuple(sorted(map(clean, found)))
