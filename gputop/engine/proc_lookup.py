"""One-off questions about a PID: what the OS says of it now, its parents, children and
environment, its process group and session, whether it is a PID namespace's init.

For the views, the kill dialog and the verdicts: :func:`read_proc` uses a shared
:class:`~gputop.engine.procs.ProcReader`. None raises for a vanished or foreign PID but
:func:`environment`, which says why it cannot be read.
"""

from __future__ import annotations

import os

import psutil

from gputop.engine.model import ProcInfo
from gputop.engine.procs import ProcReader
from gputop.engine.sanitize import clean
from gputop.errors import UsageError

# Environment variables that decide which GPUs a process sees or how it uses them.
GPU_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "GPU_", "ROCR_", "HIP_", "TORCH_", "OMP_NUM")
_MAX_CHAIN = 64  # parent chains longer than this are a loop or a fork bomb; stop there

_DEFAULT_READER = ProcReader(max_cached=1024)


def read_proc(pid: int, *, fresh: bool = False) -> ProcInfo:
    """What the OS tells about ``pid``; never raises for a vanished or foreign PID.

    Uses a shared ProcReader, so a second call for the same process gives a real CPU %. Its
    command line, user and uid may be a few seconds old unless ``fresh``.
    """
    return _DEFAULT_READER.read(pid, fresh=fresh)


def parent_chain(pid: int) -> list[ProcInfo]:
    """The ancestors of ``pid``: its parent first, up to PID 1 (or the first unreadable one)."""
    chain: list[ProcInfo] = []
    seen = {pid}
    current = read_proc(pid)
    while current.ppid and current.ppid not in seen and len(chain) < _MAX_CHAIN:
        seen.add(current.ppid)
        current = read_proc(current.ppid)
        chain.append(current)
        if not current.visible:
            break
    return chain


def children(pid: int, *, recursive: bool = False) -> list[ProcInfo]:
    """The children of ``pid`` (all descendants when ``recursive``); [] if it has vanished."""
    try:
        kids = psutil.Process(pid).children(recursive=recursive)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []
    return [read_proc(k.pid) for k in kids]


def environment(pid: int) -> dict[str, str]:
    """The environment of ``pid``, names and values cleaned (:mod:`gputop.engine.sanitize`).

    Raises UsageError with a readable reason if it can't be read.
    """
    try:
        proc = psutil.Process(pid)
        return {clean(k): clean(v) for k, v in proc.environ().items()}
    except psutil.ZombieProcess:
        raise UsageError(f"PID {pid} is defunct: a zombie has no environment left") from None
    except psutil.NoSuchProcess:
        raise UsageError(f"PID {pid} is not running (or not visible here)") from None
    except psutil.AccessDenied:
        owner = read_proc(pid).user or "another user"
        raise UsageError(
            f"not permitted to read the environment of PID {pid} (owned by {owner}); run as root"
        ) from None


def gpu_environment(pid: int) -> dict[str, str]:
    """The GPU-related part of ``environment(pid)``: CUDA_VISIBLE_DEVICES, NVIDIA_*, NCCL_*..."""
    return {k: v for k, v in environment(pid).items() if k.startswith(GPU_ENV_PREFIXES)}


def process_group(pid: int) -> int | None:
    """The process group id of ``pid``, or None when it has vanished."""
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def session(pid: int) -> int | None:
    """The session id of ``pid``, or None when it has vanished."""
    try:
        return os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def is_namespace_init(pid: int) -> bool:
    """True when ``pid`` is PID 1 of the PID namespace it runs in: ours, or a container's init
    seen from the host (the last number of NSpid in /proc/PID/status). False when unreadable."""
    if pid == 1:
        return True
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return line.split()[-1] == b"1"
    except OSError:
        pass
    return False
