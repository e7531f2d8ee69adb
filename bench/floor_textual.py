"""The Textual floor (issue 42): a bare Textual app updating one Static of 8 lines every second.

Run by bench_floor in a 200x60 tmux pane beside gputop. It draws as little as a dashboard can:
one widget, 8 short lines (one per GPU of the dgx box), changed every second so Textual lays
out, renders and writes a frame each tick, as gputop does at rest at ``--interval 1``.

``python -m bench.floor_textual LINES WIDTH`` paints LINES lines of WIDTH cells instead, all
changed every second: with 51 x 196, about as many cells as gputop's dgx screen changes a tick
(bench_floor's optional wide row, which tells Textual's cost per changed row from gputop's own).
"""

from __future__ import annotations

import sys
import time

from textual.app import App, ComposeResult
from textual.widgets import Static

GPUS = 8


class FloorApp(App[None]):
    def __init__(self, lines: int = GPUS, width: int = 0) -> None:
        super().__init__()
        self._lines, self._width = lines, width

    def compose(self) -> ComposeResult:
        yield Static(id="gpus")

    def on_mount(self) -> None:
        self._tick()
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        lines = [
            f"GPU {i}  util {int(now * 7 + i * 13) % 100:3d}%  tick {now:10.1f}"
            for i in range(self._lines)
        ]
        if self._width:  # every cell of every line changes
            lines = [(line + " ") * (self._width // (len(line) + 1) + 1) for line in lines]
            lines = [line[int(now) % 7 :][: self._width] for line in lines]
        self.query_one("#gpus", Static).update("\n".join(lines))


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    FloorApp(*args).run()
