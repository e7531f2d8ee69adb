"""`make bench`: run every bench/bench_*.py module's main(), in name order."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).parent
    only = sys.argv[1:]
    for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if not info.name.startswith("bench_"):
            continue
        if only and info.name.removeprefix("bench_") not in only:
            continue
        print(f"== {info.name.removeprefix('bench_')}", flush=True)
        importlib.import_module(f"bench.{info.name}").main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
