"""Run nvitop's own CLI on gputop's simulated driver: ``nvitop_on_sim.py SCENARIO [nvitop args]``.

Run by bench_peers with nvitop's python (its own venv, .venv-peers) and PYTHONPATH at the repo
root, so ``gputop.sim`` imports there (it needs only the standard library and pynvml, from
nvidia-ml-py, which nvitop depends on). nvitop loads libnvidia-ml through pynvml:
``nvitop.api.libnvml`` calls ``pynvml.nvmlInitWithFlags``, whose ``_LoadNvmlLibrary`` dlopens
``libnvidia-ml.so.1`` only while ``pynvml.nvmlLib`` is None. ``gputop.sim.install`` puts the
SimLibrary there before nvitop is imported, so every NVML call nvitop makes (including its
``_nvmlGetFunctionPointer`` probes for versioned symbols) is answered by the scenario. As a guard,
``ctypes.CDLL`` is wrapped to refuse any libnvidia-ml name, so a path that bypassed the sim would
fail loudly instead of finding a real driver.
"""

from __future__ import annotations

import ctypes
import sys


def _refuse_real_nvml() -> None:
    real_cdll = ctypes.CDLL

    class _GuardedCDLL(real_cdll):  # type: ignore[misc,valid-type]
        def __init__(self, name: str | None, *args: object, **kwargs: object) -> None:
            if name is not None and "nvidia-ml" in str(name):
                raise OSError(f"nvitop_on_sim: refusing to load the real {name}")
            super().__init__(name, *args, **kwargs)

    ctypes.CDLL = _GuardedCDLL  # type: ignore[misc]


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: nvitop_on_sim.py SCENARIO [nvitop args...]", file=sys.stderr)
        return 2
    scenario, nvitop_args = argv[0], argv[1:]
    _refuse_real_nvml()  # before pynvml's import: it binds CDLL by ``from ctypes import *``

    from gputop import sim

    sim.install(scenario)  # no actors: the dgx scenario has none (its PIDs are stand-ins)
    from nvitop import cli  # imported after install: nvitop sees the simulated library only

    if sim.active() is None or sys.modules["pynvml"].CDLL is not ctypes.CDLL:
        raise RuntimeError("nvitop_on_sim: the simulated NVML library is not in place")
    sys.argv = ["nvitop", *nvitop_args]
    return cli.main()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
