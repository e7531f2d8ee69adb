"""Whether the PIDs the driver lists are PIDs gputop can see: then a listed PID missing from
/proc has exited, not hidden in another PID namespace.

The driver names processes by their PIDs in the first (host) PID namespace. gputop in that
namespace, on a /proc that hides no one's processes from it, sees every one of them; in a
container of its own PID namespace (or under ``hidepid``, not as root) a missing PID may be
alive, so nothing is said.
"""

from __future__ import annotations

import os

# PROC_PID_INIT_INO: the inode the kernel gives the first PID namespace, fixed since Linux 3.8.
INIT_PID_NS_INO = 0xEFFFFFFC


def sees_driver_pids(proc_root: str = "/proc") -> bool:
    """Whether gputop runs in the host's PID namespace and /proc shows it every process."""
    try:
        if os.stat(f"{proc_root}/self/ns/pid").st_ino != INIT_PID_NS_INO:
            return False
    except OSError:
        return False
    return os.geteuid() == 0 or not hides_pids(proc_root)


def hides_pids(proc_root: str = "/proc") -> bool:
    """Whether /proc is mounted with ``hidepid`` (other users' PIDs hidden from non-root)."""
    try:
        with open(f"{proc_root}/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return True  # not known: assume the worst
    for line in lines:
        # "36 35 0:4 / /proc rw,nosuid - proc proc rw,hidepid=2": mount point 5th, super
        # options last.
        fields = line.split()
        if len(fields) < 5 or fields[4] != "/proc" or " - proc " not in line:
            continue
        for option in fields[-1].split(","):
            key, _, value = option.partition("=")
            if key == "hidepid" and value not in ("0", "off"):
                return True
    return False
