"""A simulated box's own device folder: stand-in ``nvidia*`` files, never the real ``/dev``.

gputop finds the processes that hold a GPU by the device files they have open. A simulated box
that looked in ``/dev`` would call the real box's GPU jobs holders of its simulated GPUs (and
offer to kill them), so every simulated library has a private folder (0700) of its own, made on
first use and removed at exit. A process that dies without tidying up (a driver process killed
for a hang, or crashed on purpose by a scenario) leaves its folder behind: the next folder made
removes every such one whose maker is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import stat
import tempfile
from pathlib import Path

PREFIX = "gputop-sim-"  # then the maker's PID, a dash, and mkdtemp's random part
_MADE: list[Path] = []  # every folder this process made


def device_names(gpus: int) -> tuple[str, ...]:
    """The device files of a box with ``gpus`` GPUs, as the driver makes them."""
    return (*(f"nvidia{i}" for i in range(gpus)), "nvidiactl", "nvidia-uvm")


def fill(dev: Path, names: tuple[str, ...]) -> None:
    """Create the stand-in device files (empty regular files) in ``dev``."""
    for name in names:
        (dev / name).touch(mode=0o600)


def make_private(gpus: int) -> str:
    """A new private folder ``<tmp>/gputop-sim-<pid>-XXXX/dev`` holding the stand-in files."""
    sweep(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))  # 0700, a fresh name
    _MADE.append(root)
    atexit.register(shutil.rmtree, root, True)
    dev = root / "dev"
    dev.mkdir(mode=0o700)
    fill(dev, device_names(gpus))
    return str(dev)


def remove(dev_dir: str) -> None:
    """Remove a folder made by :func:`make_private` (``dev_dir`` is its ``dev``)."""
    root = Path(dev_dir).parent
    if root.name.startswith(PREFIX):  # never anything else, whatever we are given
        shutil.rmtree(root, ignore_errors=True)


def remove_all() -> None:
    """Remove every folder this process made (a driver process leaves by ``os._exit``, which
    runs no atexit handler: it calls this first)."""
    for root in _MADE:
        shutil.rmtree(root, ignore_errors=True)


def sweep(tmp: str) -> None:
    """Remove the folders in ``tmp`` left by makers that are gone (ours only: same owner)."""
    try:
        names = os.listdir(tmp)
    except OSError:
        return
    me = os.geteuid()
    for name in names:
        pid = name.removeprefix(PREFIX).partition("-")[0]
        if not name.startswith(PREFIX) or not pid.isdigit() or _alive(int(pid)):
            continue
        path = os.path.join(tmp, name)
        with contextlib.suppress(OSError):
            info = os.lstat(path)  # lstat: a link planted under our name is never followed
            if stat.S_ISDIR(info.st_mode) and info.st_uid == me:
                shutil.rmtree(path, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a maker's PID: leave it alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # someone else's process (EPERM): alive
    return True
