"""One GPU: bars, readings, sparklines. Three densities so 1 to 8+ GPUs fit any terminal.

A line-API widget: each tick the panel builds its lines as light `Line`s, compares them with what is
on screen and repaints only the lines whose text or styles changed (a whole-widget refresh of 8
bordered panels per second was most of the dashboard's CPU time).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gputop import units
from gputop.engine.history import History
from gputop.engine.model import GpuSample, GpuState
from gputop.ui import text
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.line import Line
from gputop.ui.spark import GpuSparks
from gputop.units import Level


class Density(StrEnum):
    """How much room a panel gets: bordered 5 lines, 2 lines, or 1 line."""

    FULL = "full"
    COMPACT = "compact"
    MINI = "mini"


PANEL_HEIGHT = {Density.FULL: 7, Density.COMPACT: 2, Density.MINI: 1}
VALUE_WIDTH = 14  # "60.0/80.0 GiB"
TREND_POINTS = 300  # samples the sparklines span: 5 minutes at the default 1 s interval
_PLAIN = Style()


def short_name(name: str | None) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100-SXM4-80GB'."""
    if not name:
        return units.NA
    return name.removeprefix("NVIDIA ").removeprefix("GeForce ")


def title(sample: GpuSample) -> str:
    """'GPU 0' plus the CUDA index when it differs, and the name."""
    out = f"GPU {sample.index}"
    if sample.cuda_index is not None and sample.cuda_index != sample.index:
        out += f" (CUDA {sample.cuda_index})"
    elif sample.cuda_index is None and sample.state is GpuState.OK:
        out += " (not visible to CUDA)"
    return f"{out} · {short_name(sample.name)}"


class GpuPanel(FramedLines, Widget, can_focus=True):
    """Shows one GpuSample (given by :meth:`show`); Enter or a click asks for its detail screen."""

    COMPONENT_CLASSES = {
        "gpu-panel--label",
        "gpu-panel--bar",
        "gpu-panel--spark",
        "gpu-panel--warn",
        "gpu-panel--hot",
        "gpu-panel--crit",
        "gpu-panel--dim",
    }
    BINDINGS = [("enter", "select", "GPU detail")]

    density: reactive[Density] = reactive(Density.FULL)

    @dataclass
    class Selected(Message):
        """The user asked for this GPU's detail screen."""

        index: int

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self.sample: GpuSample | None = None
        self.history: History | None = None
        self.sparks = GpuSparks(index, TREND_POINTS)
        self._styles: dict[str, Style] = {}
        self._title: str | None = None
        # What is on screen: per content line, the (plain, spans) key and its painted strip.
        self._keys: list[object] = []
        self._strips: list[Strip] = []
        self._painted_width = -1

    def watch_density(self, density: Density) -> None:
        for d in Density:
            self.set_class(d is density, f"-{d.value}")
        self._repaint(full=True)

    def show(self, sample: GpuSample, history: History | None) -> None:
        """Take a new sample (and the history its sparklines come from); repaint what changed."""
        self.sample, self.history = sample, history
        lost = sample.state is not GpuState.OK
        self.set_class(lost, "-lost")
        self.set_class(temp_level(sample) is Level.CRIT, "-hot")
        new_title = title(sample)
        if new_title != self._title:  # border_title parses and refreshes; skip when unchanged
            self._title = new_title
            self.border_title = Text(new_title)
        self._repaint()

    def action_select(self) -> None:
        self.post_message(self.Selected(self.index))

    def on_click(self, event: events.Click) -> None:
        self.post_message(self.Selected(self.index))

    def _style(self, name: str) -> Style:
        """Component styles (and "base", the widget's), resolved once per CSS/theme change."""
        style = self._styles.get(name)
        if style is None:
            resolved = (
                self.rich_style
                if name == "base"
                else self.get_component_rich_style(f"gpu-panel--{name}")
            )
            style = self._styles[name] = resolved
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._painted_width = -1  # styles changed: every strip is rebuilt at the next paint
        super().notify_style_update()

    def on_resize(self) -> None:
        self._painted_width = -1
        self.refresh()

    def render(self) -> Text:
        """The panel's content as one Text (what the painted lines show)."""
        out = Text("\n").join(line.to_text() for line in self.content_lines())
        out.no_wrap, out.overflow = True, "ellipsis"
        return out

    def content_lines(self, width: int | None = None) -> list[Line]:
        """The content, one Line per line, for the current sample, trend and density."""
        sample = self.sample
        width = max(10, self.content_size.width if width is None else width)
        if sample is None:
            return [Line(f"GPU {self.index}: waiting…")]
        if sample.state is not GpuState.OK:
            return [Line(state_text(sample))]
        if self.density is Density.FULL:
            return self._full(sample, width)
        if self.density is Density.COMPACT:
            return [self._summary(sample, width), self._details(sample, width)]
        return [self._summary(sample, width)]

    def render_line(self, y: int) -> Strip:
        if self._painted_width < 0:  # after a resize or style change, before the next sample
            self._build(self.content_size, full=True)  # Textual is painting all lines now
        if 0 <= y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self._painted_width, self._style("base"))

    def _repaint(self, *, full: bool = False) -> None:
        """Rebuild the changed lines (all when ``full``) and refresh only those."""
        size = self.content_size
        if not self.is_mounted or size.width <= 0:
            return
        full = full or self._painted_width != size.width
        changed = self._build(size, full=full)
        if full:
            self.refresh()
        elif changed:
            self.refresh_rows(changed)

    def _build(self, size: Size, *, full: bool) -> list[int]:
        """Make the strips of lines whose text or styles changed; returns their numbers."""
        width = size.width
        lines = self.content_lines(width)
        base = self._style("base")
        keys: list[object] = []
        strips: list[Strip] = []
        changed: list[int] = []
        for y in range(max(len(lines), size.height)):
            line = lines[y] if y < len(lines) else Line()
            key = line.key()
            keys.append(key)
            if not full and y < len(self._keys) and self._keys[y] == key:
                strips.append(self._strips[y])
                continue
            changed.append(y)
            strips.append(line.to_strip(width, base))
        self._keys, self._strips, self._painted_width = keys, strips, width
        return changed

    def _level_style(self, level: Level, *, quiet_warn: bool = False) -> Style:
        """Style for a level; ``quiet_warn`` leaves WARN plain (busy memory is normal)."""
        if level is Level.OK or (quiet_warn and level is Level.WARN):
            return _PLAIN
        return self._style(level.value)

    def _bar_line(
        self,
        width: int,
        label: str,
        fraction: float | None,
        value: str,
        spark: str,
        bar_style: Style,
    ) -> Line:
        bar_width = max(6, (width - 5 - VALUE_WIDTH - 2) // 2)
        spark_width = max(0, width - 5 - bar_width - VALUE_WIDTH - 2)
        line = Line()
        line.append(f"{label:<5}", self._style("label"))
        line.append(text.bar(fraction, bar_width), self._style("bar") + bar_style)
        line.append(f" {value:>{VALUE_WIDTH}} ")
        line.append(spark[-spark_width:] if spark_width else "", self._style("spark"))
        return line

    def _sparklines(self, width: int, top_memory: float | None) -> tuple[str, str]:
        if self.history is None or width <= 0:
            return "", ""
        self.sparks.update(self.history, width)
        return self.sparks.util.text(100.0), self.sparks.memory.text(top_memory)

    def _full(self, s: GpuSample, width: int) -> list[Line]:
        spark_w = max(0, width - 5 - max(6, (width - 5 - VALUE_WIDTH - 2) // 2) - VALUE_WIDTH - 2)
        util_spark, mem_spark = self._sparklines(spark_w, s.memory_total_bytes or None)
        util = self._bar_line(
            width,
            "UTIL",
            None if s.utilization_gpu_percent is None else s.utilization_gpu_percent / 100,
            units.percent(s.utilization_gpu_percent),
            util_spark,
            _PLAIN,
        )
        mem_frac = units.memory_fraction(s.memory_used_bytes, s.memory_total_bytes)
        mem = self._bar_line(
            width,
            "MEM",
            mem_frac,
            units.gib_pair(s.memory_used_bytes, s.memory_total_bytes),
            mem_spark,
            self._level_style(
                units.memory_level(s.memory_used_bytes, s.memory_total_bytes), quiet_warn=True
            ),
        )
        return [util, mem, self._thermal(s), self._clocks(s), self._bus(s)]

    def _thermal(self, s: GpuSample) -> Line:
        line = Line()
        line.append("TEMP ", self._style("label"))
        line.append(units.temperature(s.temperature_c), self._level_style(temp_level(s)))
        if s.temperature_slowdown_c is not None:
            line.append(f"/{s.temperature_slowdown_c}", self._style("dim"))
        line.append("  POWER ", self._style("label"))
        power_level = units.power_level(s.power_draw_mw, s.power_limit_mw)
        line.append(units.watts(s.power_draw_mw), self._level_style(power_level, quiet_warn=True))
        line.append(units.watts_limit_suffix(s.power_limit_mw))
        line.append("  FAN ", self._style("label"))
        line.append(units.percent(s.fan_speed_percent))
        return line

    def _clocks(self, s: GpuSample) -> Line:
        line = Line()
        line.append("SM ", self._style("label"))
        line.append(units.number(s.clock_sm_mhz))
        line.append(" MEM ", self._style("label"))
        line.append(units.mhz(s.clock_memory_mhz, sep=" "))
        line.append(f"  {units.pstate(s.performance_state)}")
        if s.throttle_reasons:
            line.append("  ")
            line.append("throttle: " + ",".join(s.throttle_reasons), self._style("warn"))
        return line

    def _bus(self, s: GpuSample) -> Line:
        line = Line()
        line.append("PCIe ", self._style("label"))
        if s.pcie_gen is not None and s.pcie_width is not None:
            line.append(f"gen{s.pcie_gen} x{s.pcie_width} ")
        line.append(f"↓{units.rate_kbps(s.pcie_rx_kbps)} ↑{units.rate_kbps(s.pcie_tx_kbps)}")
        if s.ecc_errors_uncorrected_volatile:
            line.append("  ")
            line.append(f"ECC {s.ecc_errors_uncorrected_volatile}", self._style("crit"))
        return line

    def _summary(self, s: GpuSample, width: int) -> Line:
        name = short_name(s.name)
        name = name if len(name) <= 14 else name[:13] + "…"
        cuda = f":c{s.cuda_index}" if s.cuda_index not in (None, s.index) else ""
        line = Line()
        line.append(f"{s.index}{cuda:<4}", self._style("label"))
        line.append(f"{name:<15}")
        bar_w = max(4, min(16, (width - 68) // 2))
        util = s.utilization_gpu_percent
        line.append("UTIL ", self._style("label"))
        line.append(text.bar(None if util is None else util / 100, bar_w), self._style("bar"))
        line.append(f"{units.percent(util):>5} ")
        line.append("MEM ", self._style("label"))
        mem_frac = units.memory_fraction(s.memory_used_bytes, s.memory_total_bytes)
        mem_level = units.memory_level(s.memory_used_bytes, s.memory_total_bytes)
        line.append(
            text.bar(mem_frac, bar_w),
            self._style("bar") + self._level_style(mem_level, quiet_warn=True),
        )
        line.append(f" {units.gib_pair(s.memory_used_bytes, s.memory_total_bytes):>{VALUE_WIDTH}}")
        line.append(" ")
        line.append(units.temperature(s.temperature_c), self._level_style(temp_level(s)))
        line.append(f" {units.watts(s.power_draw_mw)}")
        if s.ecc_errors_uncorrected_volatile:
            line.append(f" ECC {s.ecc_errors_uncorrected_volatile}", self._style("crit"))
        return line

    def _details(self, s: GpuSample, width: int) -> Line:
        line = Line("    ")
        line.append(
            f"pwr {units.watts(s.power_draw_mw)}{units.watts_limit_suffix(s.power_limit_mw)} "
        )
        line.append(f"fan {units.percent(s.fan_speed_percent)} ")
        sm, mem = units.mhz(s.clock_sm_mhz), units.mhz(s.clock_memory_mhz)
        line.append(f"SM {sm} MEM {mem} ")
        line.append(f"{units.pstate(s.performance_state)} ")
        line.append(f"↓{units.rate_kbps(s.pcie_rx_kbps)} ↑{units.rate_kbps(s.pcie_tx_kbps)}")
        if s.throttle_reasons:
            line.append(" " + ",".join(s.throttle_reasons), self._style("warn"))
        return line


def state_text(s: GpuSample) -> str:
    """What a panel says instead of readings for a GPU that is not OK (none of them are read).

    'GPU 1 LOST: GPU is lost', 'GPU 3 NOT RESPONDING for 4 s: nvmlDeviceGetPowerUsage hung'.
    """
    if s.state is GpuState.NOT_RESPONDING:
        since = "" if s.stale_s is None else f" for {max(0.0, s.stale_s):.0f} s"  # as STALE n s
        why = f": {s.error}" if s.error else ""
        return f"GPU {s.index} NOT RESPONDING{since}{why}"
    return f"GPU {s.index} {s.state.value.upper()}: {s.error or 'unreadable'}"


def temp_level(s: GpuSample) -> Level:
    """The temperature's level against this GPU's slowdown threshold."""
    return units.temperature_level(s.temperature_c, s.temperature_slowdown_c)
