"""Memory left behind by screens opened and closed, with gputop's fixes and on Textual's paths.

A dashboard left running for days has its help and detail screens opened and closed many
times. The real dashboard app, headless at 200x60 over the simulated ``dgx`` box's driver
process (0.5 s ticks), with the dashboard's collector settings: after two warm-up rounds (the
first opening imports plotext and the screens), ROUNDS rounds of GPU detail and help opened and
closed; RSS and live pymalloc blocks before and after. Twice, in fresh processes: as shipped, and
with ``GPUTOP_PLAIN_TEXTUAL=1`` (Textual's own paths: no pruning of removed nodes' watchers,
Textual's ``StylesCache.get_inner_outer``), which is what the two private fixes in
gputop.ui.textual_private pay for.

``python -m bench leaks``; ``GPUTOP_BENCH_LEAK_ROUNDS`` (default 20).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = int(os.environ.get("GPUTOP_BENCH_LEAK_ROUNDS", "20"))
KEYS = ("d", "escape", "question_mark", "escape")


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return kib / 1024


async def _run(rounds: int) -> dict[str, float]:
    from gputop.engine.isolated import DriverConfig, IsolatedSource
    from gputop.ui import _settle_heap
    from gputop.ui.app import make_app

    source = IsolatedSource(DriverConfig(demo="dgx"))
    app = make_app(source, interval_s=0.5)
    try:
        async with app.run_test(size=(200, 60)) as pilot:
            await pilot.pause(2.0)

            async def cycle(n: int) -> None:
                for _ in range(n):
                    for key in KEYS:
                        await pilot.press(key)
                        await pilot.pause(0.3)
                await pilot.pause(1.0)

            await cycle(2)
            _settle_heap()
            rss0, blocks0 = _rss_mib(), sys.getallocatedblocks()
            await cycle(rounds)
            rss1, blocks1 = _rss_mib(), sys.getallocatedblocks()
    finally:
        source.close()
    return {"rss0": rss0, "rss1": rss1, "blocks0": blocks0, "blocks1": blocks1}


def _one(plain: bool) -> dict[str, float]:
    env = dict(os.environ)
    env.pop("GPUTOP_PLAIN_TEXTUAL", None)
    if plain:
        env["GPUTOP_PLAIN_TEXTUAL"] = "1"
    out = subprocess.run(
        [sys.executable, "-m", "bench.bench_leaks", "--one", str(ROUNDS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    print(f"{ROUNDS} rounds of GPU detail + help opened and closed, dgx, 200x60, headless")
    for name, plain in (("gputop", False), ("Textual's paths", True)):
        r = _one(plain)
        grown = r["rss1"] - r["rss0"]
        blocks = (r["blocks1"] - r["blocks0"]) / 1000
        print(
            f"  {name:16} RSS {r['rss0']:.1f} -> {r['rss1']:.1f} MiB ({grown:+.1f}), "
            f"live pymalloc blocks {blocks:+.0f}k",
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        gc.collect()
        print(json.dumps(asyncio.run(_run(int(sys.argv[2])))))
    else:
        main()
