"""A simulated box's own device folder: stand-in ``nvidia*`` files, never the real ``/dev``.

gputop finds the processes that hold a GPU by the device files they have open. A simulated box
that looked in ``/dev`` would call the real box's GPU jobs holders of its simulated GPUs (and
offer to kill them), so every simulated library has a private folder (0700) of its own, made on
first use and removed at exit. A process that dies without tidying up (a driver process killed
for a hang, or crashed on purpose by a scenario) leaves its folder behind: the next folder made
removes every such one whose maker is gone.

Plain ``os`` calls, not tempfile, shutil and pathlib: the driver process of ``--demo`` holds this
module for as long as it runs, and those three (with random) cost it 1.2 MiB.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat

PREFIX = "gputop-sim-"  # then the maker's PID, a dash, and a random part
_MADE: list[str] = []  # every folder this process made
# Where tempfile.gettempdir() looks, in its order (it also falls back to the working directory).
_TEMP_ENV = ("TMPDIR", "TEMP", "TMP")
_TEMP_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")


def device_names(gpus: int) -> tuple[str, ...]:
    """The device files of a box with ``gpus`` GPUs, as the driver makes them."""
    return (*(f"nvidia{i}" for i in range(gpus)), "nvidiactl", "nvidia-uvm")


def fill(dev: str | os.PathLike[str], names: tuple[str, ...]) -> None:
    """Create the stand-in device files (empty regular files) in ``dev``."""
    for name in names:
        # Path.touch's flags (an existing file is kept): the folder is fresh, ours, 0700.
        os.close(
            os.open(
                os.path.join(dev, name),
                os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
            )
        )


def make_private(gpus: int) -> str:
    """A new private folder ``<tmp>/gputop-sim-<pid>-XXXX/dev`` holding the stand-in files."""
    tmp = temp_dir()
    sweep(tmp)
    root = _make_fresh(tmp, f"{PREFIX}{os.getpid()}-")
    _MADE.append(root)
    atexit.register(remove_tree, root)
    dev = os.path.join(root, "dev")
    os.mkdir(dev, 0o700)
    fill(dev, device_names(gpus))
    return dev


def temp_dir() -> str:
    """The folder for temporary files, as ``tempfile.gettempdir()`` chooses it: the first of
    $TMPDIR, $TEMP, $TMP, /tmp, /var/tmp, /usr/tmp that is a folder we may write in."""
    for where in (*(os.environ.get(name) for name in _TEMP_ENV), *_TEMP_DIRS):
        if where and os.path.isdir(where) and os.access(where, os.W_OK | os.X_OK):
            return os.path.abspath(where)
    return os.getcwd()  # tempfile's last resort too


def _make_fresh(tmp: str, prefix: str) -> str:
    """A new folder ``tmp/prefix<random>``, 0700 and never one that was there (mkdtemp's)."""
    while True:
        path = os.path.join(tmp, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # a name already taken: draw another
            continue
        return path


def remove(dev_dir: str) -> None:
    """Remove a folder made by :func:`make_private` (``dev_dir`` is its ``dev``)."""
    root = os.path.dirname(os.path.normpath(dev_dir))
    if os.path.basename(root).startswith(PREFIX):  # never anything else, whatever we are given
        remove_tree(root)


def remove_all() -> None:
    """Remove every folder this process made (a driver process leaves by ``os._exit``, which
    runs no atexit handler: it calls this first)."""
    for root in _MADE:
        remove_tree(root)


def remove_tree(path: str) -> None:
    """Remove the folder ``path`` and all in it, as far as possible (``shutil.rmtree(path,
    ignore_errors=True)``); a link, ``path`` itself or in it, is never followed."""
    if os.path.islink(path):
        return  # as rmtree: a link planted under our folder's name is left alone
    with contextlib.suppress(OSError), os.scandir(path) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                remove_tree(entry.path)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
    with contextlib.suppress(OSError):
        os.rmdir(path)


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
                remove_tree(path)


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
