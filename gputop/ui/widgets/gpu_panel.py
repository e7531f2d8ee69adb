"""One GPU: bars, readings, sparklines. Three densities so 1 to 8+ GPUs fit any terminal."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from gputop import format as fmt
from gputop.format import Level
from gputop.model import GpuSample, GpuState
from gputop.ui import text


class Density(StrEnum):
    """How much room a panel gets: bordered 5 lines, 2 lines, or 1 line."""

    FULL = "full"
    COMPACT = "compact"
    MINI = "mini"


PANEL_HEIGHT = {Density.FULL: 7, Density.COMPACT: 2, Density.MINI: 1}
VALUE_WIDTH = 14  # "60.0/80.0 GiB"


@dataclass(frozen=True, slots=True)
class Trend:
    """The recent utilisation and memory series a panel draws as sparklines."""

    util: tuple[float | None, ...] = ()
    memory: tuple[float | None, ...] = ()


def short_name(name: str | None) -> str:
    """'NVIDIA A100-SXM4-80GB' -> 'A100-SXM4-80GB'."""
    if not name:
        return text.NA
    return name.removeprefix("NVIDIA ").removeprefix("GeForce ")


def title(sample: GpuSample) -> str:
    """'GPU 0' plus the CUDA index when it differs, and the name."""
    out = f"GPU {sample.index}"
    if sample.cuda_index is not None and sample.cuda_index != sample.index:
        out += f" (CUDA {sample.cuda_index})"
    elif sample.cuda_index is None and sample.state is GpuState.OK:
        out += " (not visible to CUDA)"
    return f"{out} · {short_name(sample.name)}"


class GpuPanel(Widget, can_focus=True):
    """Shows one GpuSample; Enter or a click asks for its detail screen."""

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

    sample: reactive[GpuSample | None] = reactive(None)
    trend: reactive[Trend] = reactive(Trend)
    density: reactive[Density] = reactive(Density.FULL)

    @dataclass
    class Selected(Message):
        """The user asked for this GPU's detail screen."""

        index: int

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self._styles: dict[str, Style] = {}
        self._title: str | None = None

    def watch_density(self, density: Density) -> None:
        for d in Density:
            self.set_class(d is density, f"-{d.value}")

    def watch_sample(self, sample: GpuSample | None) -> None:
        lost = sample is not None and sample.state is not GpuState.OK
        self.set_class(lost, "-lost")
        hot = sample is not None and temp_level(sample) is Level.CRIT
        self.set_class(hot, "-hot")
        new_title = title(sample) if sample is not None else f"GPU {self.index}"
        if new_title != self._title:  # border_title parses and refreshes; skip when unchanged
            self._title = new_title
            self.border_title = Text(new_title)

    def action_select(self) -> None:
        self.post_message(self.Selected(self.index))

    def on_click(self, event: events.Click) -> None:
        self.post_message(self.Selected(self.index))

    def _style(self, name: str) -> Style:
        """Component styles, resolved once per CSS/theme change rather than per render."""
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.get_component_rich_style(f"gpu-panel--{name}")
        return style

    def notify_style_update(self) -> None:
        self._styles.clear()
        super().notify_style_update()

    def render(self) -> Text:
        sample = self.sample
        width = max(10, self.content_size.width)
        if sample is None:
            return Text(f"GPU {self.index}: waiting…", no_wrap=True)
        if sample.state is not GpuState.OK:
            return Text(
                f"GPU {sample.index} {sample.state.value.upper()}: {sample.error or 'unreadable'}",
                no_wrap=True,
                overflow="ellipsis",
            )
        if self.density is Density.FULL:
            lines = self._full(sample, width)
        elif self.density is Density.COMPACT:
            lines = [self._summary(sample, width), self._details(sample, width)]
        else:
            lines = [self._summary(sample, width)]
        out = Text("\n").join(lines)
        out.no_wrap, out.overflow = True, "ellipsis"
        return out

    def _level_style(self, level: Level, *, quiet_warn: bool = False) -> Style:
        """Style for a level; ``quiet_warn`` leaves WARN plain (busy memory is normal)."""
        if level is Level.OK or (quiet_warn and level is Level.WARN):
            return Style()
        return self._style(level.value)

    def _bar_line(
        self, label: str, fraction: float | None, value: str, spark: str, bar_style: Style
    ) -> Text:
        width = max(10, self.content_size.width)
        bar_width = max(6, (width - 5 - VALUE_WIDTH - 2) // 2)
        spark_width = max(0, width - 5 - bar_width - VALUE_WIDTH - 2)
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{label:<5}", self._style("label"))
        line.append(text.bar(fraction, bar_width), self._style("bar") + bar_style)
        line.append(f" {value:>{VALUE_WIDTH}} ")
        line.append(spark[-spark_width:] if spark_width else "", self._style("spark"))
        return line

    def _full(self, s: GpuSample, width: int) -> list[Text]:
        spark_w = max(0, width - 5 - max(6, (width - 5 - VALUE_WIDTH - 2) // 2) - VALUE_WIDTH - 2)
        util = self._bar_line(
            "UTIL",
            None if s.utilization_gpu_percent is None else s.utilization_gpu_percent / 100,
            text.percent(s.utilization_gpu_percent),
            text.sparkline(list(self.trend.util), spark_w, top=100.0),
            Style(),
        )
        mem_frac = _fraction(s.memory_used_bytes, s.memory_total_bytes)
        mem = self._bar_line(
            "MEM",
            mem_frac,
            text.used_total(s.memory_used_bytes, s.memory_total_bytes),
            text.sparkline(list(self.trend.memory), spark_w, top=s.memory_total_bytes or None),
            self._level_style(
                fmt.memory_level(s.memory_used_bytes, s.memory_total_bytes), quiet_warn=True
            ),
        )
        return [util, mem, self._thermal(s), self._clocks(s), self._bus(s)]

    def _thermal(self, s: GpuSample) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("TEMP ", self._style("label"))
        line.append(text.number(s.temperature_c, "°C"), self._level_style(temp_level(s)))
        if s.temperature_slowdown_c is not None:
            line.append(f"/{s.temperature_slowdown_c}", self._style("dim"))
        line.append("  POWER ", self._style("label"))
        power_level = fmt.power_level(s.power_draw_mw, s.power_limit_mw)
        line.append(
            text.watts_unit(s.power_draw_mw), self._level_style(power_level, quiet_warn=True)
        )
        line.append(text.limit_suffix(s.power_limit_mw))
        line.append("  FAN ", self._style("label"))
        line.append(text.percent(s.fan_speed_percent))
        return line

    def _clocks(self, s: GpuSample) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("SM ", self._style("label"))
        line.append(text.number(s.clock_sm_mhz))
        line.append(" MEM ", self._style("label"))
        line.append(text.number(s.clock_memory_mhz, " MHz"))
        pstate = text.NA if s.performance_state is None else f"P{s.performance_state}"
        line.append(f"  {pstate}")
        if s.throttle_reasons:
            line.append("  ")
            line.append("throttle: " + ",".join(s.throttle_reasons), self._style("warn"))
        return line

    def _bus(self, s: GpuSample) -> Text:
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("PCIe ", self._style("label"))
        if s.pcie_gen is not None and s.pcie_width is not None:
            line.append(f"gen{s.pcie_gen} x{s.pcie_width} ")
        line.append(f"↓{text.rate_kbps(s.pcie_rx_kbps)} ↑{text.rate_kbps(s.pcie_tx_kbps)}")
        if s.ecc_errors_uncorrected_volatile:
            line.append("  ")
            line.append(f"ECC {s.ecc_errors_uncorrected_volatile}", self._style("crit"))
        return line

    def _summary(self, s: GpuSample, width: int) -> Text:
        name = short_name(s.name)
        name = name if len(name) <= 14 else name[:13] + "…"
        cuda = f":c{s.cuda_index}" if s.cuda_index not in (None, s.index) else ""
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(f"{s.index}{cuda:<4}", self._style("label"))
        line.append(f"{name:<15}")
        bar_w = max(4, min(16, (width - 68) // 2))
        util = s.utilization_gpu_percent
        line.append("UTIL ", self._style("label"))
        line.append(text.bar(None if util is None else util / 100, bar_w), self._style("bar"))
        line.append(f"{text.percent(util):>5} ")
        line.append("MEM ", self._style("label"))
        mem_frac = _fraction(s.memory_used_bytes, s.memory_total_bytes)
        mem_level = fmt.memory_level(s.memory_used_bytes, s.memory_total_bytes)
        line.append(
            text.bar(mem_frac, bar_w),
            self._style("bar") + self._level_style(mem_level, quiet_warn=True),
        )
        line.append(f" {text.used_total(s.memory_used_bytes, s.memory_total_bytes):>{VALUE_WIDTH}}")
        line.append(" ")
        line.append(text.number(s.temperature_c, "°C"), self._level_style(temp_level(s)))
        line.append(f" {text.watts_unit(s.power_draw_mw)}")
        if s.ecc_errors_uncorrected_volatile:
            line.append(f" ECC {s.ecc_errors_uncorrected_volatile}", self._style("crit"))
        return line

    def _details(self, s: GpuSample, width: int) -> Text:
        line = Text("    ", no_wrap=True, overflow="ellipsis")
        line.append(f"pwr {text.watts_unit(s.power_draw_mw)}{text.limit_suffix(s.power_limit_mw)} ")
        line.append(f"fan {text.percent(s.fan_speed_percent)} ")
        sm, mem = text.number(s.clock_sm_mhz, "MHz"), text.number(s.clock_memory_mhz, "MHz")
        line.append(f"SM {sm} MEM {mem} ")
        pstate = text.NA if s.performance_state is None else f"P{s.performance_state}"
        line.append(f"{pstate} ")
        line.append(f"↓{text.rate_kbps(s.pcie_rx_kbps)} ↑{text.rate_kbps(s.pcie_tx_kbps)}")
        if s.throttle_reasons:
            line.append(" " + ",".join(s.throttle_reasons), self._style("warn"))
        return line


def _fraction(used: int | None, total: int | None) -> float | None:
    return None if used is None or not total else used / total


def temp_level(s: GpuSample) -> Level:
    """The temperature's level against this GPU's slowdown threshold."""
    return fmt.temperature_level(s.temperature_c, s.temperature_slowdown_c)
