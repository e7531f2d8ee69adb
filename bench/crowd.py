"""A crowd of real sleeping processes that makes the box bigger for a bench; always cleaned up."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from types import TracebackType


class Crowd:
    """``with Crowd() as crowd: crowd.grow(2000)``: real ``sleep`` processes, killed on exit."""

    def __init__(self, seconds: int = 3000) -> None:
        self._sleep = shutil.which("sleep")
        self._seconds = str(seconds)
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def available(self) -> bool:
        """False where there is no ``sleep`` to start."""
        return self._sleep is not None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def grow(self, count: int) -> None:
        """Start processes until this crowd has ``count``."""
        assert self._sleep is not None, "no sleep command"
        while len(self.procs) < count:
            self.procs.append(
                subprocess.Popen([self._sleep, self._seconds], stdin=subprocess.DEVNULL)
            )

    def grow_box_to(self, total: int) -> None:
        """Start processes until the whole box (this PID namespace) has ``total``."""
        while box_processes() < total:
            self.grow(len(self.procs) + 1)

    def __enter__(self) -> Crowd:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for proc in self.procs:
            with contextlib.suppress(OSError):
                proc.kill()
        for proc in self.procs:
            proc.wait()


def box_processes() -> int:
    """How many processes /proc lists."""
    return sum(1 for name in os.listdir("/proc") if name.isdigit())
