"""A bench-only start-up hook (issue 42's breakdown): what each gputop process has imported.

Put bench/hooks on PYTHONPATH and set GPUTOP_BENCH_MODULES_DIR: every Python process that starts
with that environment (gputop's dashboard and its driver process, which inherits it) writes, after
GPUTOP_BENCH_MODULES_AFTER seconds (default 8), DIR/modules-PID.json: its argv, the number of
modules in sys.modules, their names and its RSS. Nothing in gputop reads this; without the
variable the hook does nothing.
"""

from __future__ import annotations

import os

_DIR = os.environ.get("GPUTOP_BENCH_MODULES_DIR")


def _dump(path: str, after_s: float) -> None:
    import sys
    import time

    time.sleep(after_s)
    names = sorted(sys.modules)  # before json, which the hook itself imports
    import json

    with open("/proc/self/status") as status:
        rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    data = {
        "argv": sys.argv,
        "orig_argv": getattr(sys, "orig_argv", []),
        "modules": len(names),
        "names": names,
        "rss_kib": rss_kib,
    }
    with open(path, "w") as out:
        json.dump(data, out)


if _DIR:
    import threading

    _after = float(os.environ.get("GPUTOP_BENCH_MODULES_AFTER", "8"))
    _path = os.path.join(_DIR, f"modules-{os.getpid()}.json")
    threading.Thread(target=_dump, args=(_path, _after), daemon=True, name="bench-modules").start()
