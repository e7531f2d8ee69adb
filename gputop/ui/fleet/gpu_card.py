"""One GPU of a fleet host as a small panel: its index and model in the border, utilisation and
memory as bars, power and temperature (what Prometheus has of it; ``-`` where nothing). Where
the panels of a host would crowd its processes off the screen (8 GPUs at 80 by 24), each is one
line instead (:func:`compact_line`)."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gputop.fleet.model import FleetGpu
from gputop.fleet.text import gib
from gputop.ui.plain import plain
from gputop.ui.text import bar

BAR_WIDTH = 12
CARD_WIDTH = 40  # cells a card takes, border and gutter included: the grid's columns
CARD_HEIGHT = 5  # rows a panel takes, border included (one when compact)
COMPACT_BAR = 6


def card_lines(gpu: FleetGpu, degree: str = "°") -> list[str]:
    """The panel's lines: utilisation and memory bars, then power and temperature."""
    util = gpu.util_percent
    used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
    memory = None if used is None or not total else used / total
    return [
        f"UTIL {bar(None if util is None else util / 100, BAR_WIDTH)} "
        + ("-" if util is None else f"{util:.0f} %"),
        f"MEM  {bar(memory, BAR_WIDTH)} "
        + ("-" if used is None else f"{gib(used)} / {gib(total)} GiB"),
        ("-" if gpu.power_w is None else f"{gpu.power_w:.0f} W")
        + "   "
        + ("-" if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}{degree}C"),
    ]


def compact_line(gpu: FleetGpu, degree: str = "°") -> str:
    """The panel in one line (no border, no model): ``3 ███ 30% 2.9/82.0G 300W 53°C``."""
    util = gpu.util_percent
    used, total = gpu.memory_used_bytes, gpu.memory_total_bytes
    memory = "-" if used is None else f"{gib(used)}/{gib(total)}G"
    return " ".join(
        (
            gpu.gpu.rjust(2),
            bar(None if util is None else util / 100, COMPACT_BAR),
            "  -" if util is None else f"{util:3.0f}%",
            memory.rjust(11),
            "-" if gpu.power_w is None else f"{gpu.power_w:.0f}W",
            "-" if gpu.temperature_c is None else f"{gpu.temperature_c:.0f}{degree}C",
        )
    )


class GpuCard(Static):
    """A fleet GPU's panel; :meth:`show` takes its newest reading."""

    def __init__(self, gpu: FleetGpu, *, compact: bool = False) -> None:
        super().__init__(classes="gpu-card")
        self.compact = compact
        self.show(gpu)

    def show(self, gpu: FleetGpu, compact: bool | None = None) -> None:
        """Paint this reading (the border title names the GPU; compact: its first cells)."""
        self.gpu = gpu
        if compact is not None:
            self.compact = compact
        self.set_class(self.compact, "compact")
        # Text: the GPU's label and model are an exporter's words, never markup.
        self.border_title = plain(f"GPU {gpu.gpu}" + (f" · {gpu.model}" if gpu.model else ""))
        lines = [compact_line(gpu)] if self.compact else card_lines(gpu)
        self.update(Text("\n".join(lines), no_wrap=True, overflow="ellipsis"))
