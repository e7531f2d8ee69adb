"""One GPU: bars, readings, sparklines. Three densities so 1 to 8+ GPUs fit any terminal.

A bordered (full) panel's sparklines take what its width leaves after a short bar and the value,
and become charts ``chart_rows`` lines tall when the grid has lines to spare. One-line and
two-line panels end their first line with the utilisation sparkline where there is room.

A GPU in MIG mode lists its MIG devices under its readings: in a bordered panel one line each
(label, memory bar and value, profile, utilisation: N/A, as NVML gives none in MIG mode), in the
one- and two-line rows one more line for all of them. :func:`mig_lines` says how many, for the
grid's layout planner.

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
from gputop.cells import cell_len, ljust, truncate
from gputop.engine.gpu_health import Verdict, assess
from gputop.engine.history import History
from gputop.engine.model import GpuSample, GpuState, MigDevice
from gputop.ui import text
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.line import Line
from gputop.ui.spark import GpuSparks, chart
from gputop.units import Level


class Density(StrEnum):
    """How much room a panel gets: bordered 5 lines, 2 lines, or 1 line."""

    FULL = "full"
    COMPACT = "compact"
    MINI = "mini"


PANEL_HEIGHT = {Density.FULL: 7, Density.COMPACT: 2, Density.MINI: 1}
VALUE_WIDTH = 14  # "60.0/80.0 GiB"
LABEL_WIDTH = 5  # "UTIL "
BAR_MAX = 20  # a bordered panel's bar: past this the sparkline gets the width
SUMMARY_SPARK_MIN = 10  # the summary line's sparkline: only with this much room left
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
    out = f"{out} · {short_name(sample.name)}"
    out = f"{out} · MIG" if sample.mig_mode else out
    if sample.state is GpuState.OK and sample.stale_s is not None:
        out += f" · STALE {max(0.0, sample.stale_s):.0f} s"  # read before the driver crashed
    health = assess(sample)
    if health.verdict not in (Verdict.OK, Verdict.UNKNOWN):  # "unknown" is no news on a panel
        verdict = health.verdict.value
        out += f" · {verdict.upper()}{health.tag[len(verdict) :]}"  # RESET NEEDED: Xid 79
    return out


def mig_lines(sample: GpuSample | None, density: Density) -> int:
    """Lines a panel adds under its readings for the GPU's MIG devices: in a bordered panel one
    per MIG device (one saying there is none, for a GPU in MIG mode without any), in the dense
    rows one for all; none for a GPU not in MIG mode, or one the panel shows no readings of."""
    if sample is None or sample.state is not GpuState.OK:
        return 0
    count = len(sample.mig_devices)
    if not count and not sample.mig_mode:
        return 0
    return max(1, count) if density is Density.FULL else 1


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
    chart_rows: reactive[int] = reactive(1)  # lines of each sparkline (full density)

    @dataclass
    class Selected(Message):
        """The user asked for this GPU's detail screen."""

        index: int

    def __init__(self, index: int, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.index = index
        self.index_width = 1  # digits of the grid's largest index: one- and two-line rows align
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

    def watch_chart_rows(self) -> None:
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
        mig = mig_lines(sample, self.density)
        if self.density is Density.FULL:
            lines = self._full(sample, width)
            if mig:
                lines += self._mig_full(sample, width)
            return lines
        lines = [self._summary(sample, width)]
        if self.density is Density.COMPACT:
            lines.append(self._details(sample, width))
        if mig:
            lines.append(self._mig_compact(sample, width))
        return lines

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
        bar_width: int,
        label: str,
        fraction: float | None,
        value: str,
        spark: str,
        bar_style: Style,
    ) -> Line:
        line = Line()
        line.append(f"{label:<{LABEL_WIDTH}}", self._style("label"))
        line.append(text.bar(fraction, bar_width), self._style("bar") + bar_style)
        line.append(f" {value:>{VALUE_WIDTH}} ")
        line.append(spark, self._style("spark"))
        return line

    def _chart_line(self, bar_width: int, spark: str) -> Line:
        """A chart line under a bar line: blank up to where the chart starts."""
        line = Line(" " * (LABEL_WIDTH + bar_width + VALUE_WIDTH + 2))
        line.append(spark, self._style("spark"))
        return line

    def _sparklines(
        self, width: int, top_memory: float | None, rows: int = 1
    ) -> tuple[list[str], list[str]]:
        """The utilisation and memory sparklines, ``width`` wide and ``rows`` lines each."""
        if self.history is None or width <= 0:
            return [""] * rows, [""] * rows
        sparks = self.sparks
        sparks.update(self.history, width)
        if rows <= 1:
            return [sparks.util.text(100.0)], [sparks.memory.text(top_memory)]
        return (
            chart(sparks.util.peaks(), 100.0, rows),
            chart(sparks.memory.peaks(), top_memory, rows),
        )

    def _full(self, s: GpuSample, width: int) -> list[Line]:
        bar_w, spark_w = bar_split(width)
        rows = max(1, self.chart_rows)
        util_spark, mem_spark = self._sparklines(spark_w, s.memory_total_bytes or None, rows)
        util = self._bar_line(
            bar_w,
            "UTIL",
            None if s.utilization_gpu_percent is None else s.utilization_gpu_percent / 100,
            units.percent(s.utilization_gpu_percent),
            util_spark[0],
            _PLAIN,
        )
        mem_frac = units.memory_fraction(s.memory_used_bytes, s.memory_total_bytes)
        mem = self._bar_line(
            bar_w,
            "MEM",
            mem_frac,
            units.gib_pair(s.memory_used_bytes, s.memory_total_bytes),
            mem_spark[0],
            self._level_style(
                units.memory_level(s.memory_used_bytes, s.memory_total_bytes), quiet_warn=True
            ),
        )
        return [
            util,
            *(self._chart_line(bar_w, r) for r in util_spark[1:]),
            mem,
            *(self._chart_line(bar_w, r) for r in mem_spark[1:]),
            self._thermal(s),
            self._clocks(s),
            self._bus(s),
        ]

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
        name = truncate(name, 14)  # in cells: a CJK name must not push the bars right
        cuda = f":c{s.cuda_index}" if s.cuda_index not in (None, s.index) else ""
        digits = self.index_width
        index = f"{s.index:>{digits}}{cuda}"
        line = Line()
        line.append(f"{index:<{2 * digits + 3}}", self._style("label"))
        line.append(ljust(name, 15))
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
        room = width - cell_len(line.plain) - 1
        if room >= SUMMARY_SPARK_MIN:  # the utilisation trend, in what the line leaves
            util_spark, _ = self._sparklines(room, None)
            line.append(" ")
            line.append(util_spark[0], self._style("spark"))
        return line

    def _details(self, s: GpuSample, width: int) -> Line:
        line = Line(" " * (2 * self.index_width + 2))
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

    def _mig_full(self, s: GpuSample, width: int) -> list[Line]:
        """One line per MIG device, its bar under the GPU's memory bar:
        ``0/1  ████▌     29.7/39.5 GiB 3g.40gb UTIL N/A``."""
        if not s.mig_devices:
            return [Line("MIG mode: no MIG devices", self._style("dim"))]
        bar_w, _ = bar_split(width)
        return [self._mig_line(m, bar_w) for m in s.mig_devices]

    def _mig_line(self, m: MigDevice, bar_w: int) -> Line:
        used, total = m.memory_used_bytes, m.memory_total_bytes
        line = Line()
        line.append(f"{m.label:<{LABEL_WIDTH - 1}} ", self._style("label"))
        level = self._level_style(units.memory_level(used, total), quiet_warn=True)
        line.append(text.bar(units.memory_fraction(used, total), bar_w), self._style("bar") + level)
        line.append(f" {units.gib_pair(used, total):>{VALUE_WIDTH}} ")
        line.append(m.profile or units.NA)
        line.append(" UTIL ", self._style("label"))
        line.append(units.percent(m.utilization_gpu_percent))
        return line

    def _mig_compact(self, s: GpuSample, width: int) -> Line:
        """All MIG devices on one line, as many as fit, then how many did not:
        ``MIG util N/A  0/1 3g.40gb 30/40G · 0/5 2g.20gb 14/20G · +2``."""
        line = Line(" " * (2 * self.index_width + 2))
        line.append("MIG ", self._style("label"))
        migs = s.mig_devices
        if not migs:
            line.append("mode on, no MIG devices", self._style("dim"))
            return line
        quiet = all(m.utilization_gpu_percent is None for m in migs)
        if quiet:  # the drivers to date: said once, not per device
            line.append(f"util {units.NA}  ", self._style("dim"))
        used = cell_len(line.plain)
        for i, m in enumerate(migs):
            piece = f"{m.label} {m.profile or units.NA} {gib_short(m)}"
            if not quiet:
                piece += f" {units.percent(m.utilization_gpu_percent)}"
            if i:
                piece = " · " + piece
            rest = len(migs) - i - 1
            more = f" · +{rest}" if rest else ""
            if i and used + cell_len(piece) + cell_len(more) > width:
                line.append(f" · +{len(migs) - i}", self._style("dim"))
                break
            line.append(piece)
            used += cell_len(piece)
        return line


def gib_short(m: MigDevice) -> str:
    """A MIG device's memory in whole GiB, for the dense rows: ``"30/40G"``."""
    used, total = m.memory_used_bytes, m.memory_total_bytes
    if used is None or total is None:
        return f"{units.short_size(used)}/{units.short_size(total)}"
    return f"{used / units.GiB:.0f}/{total / units.GiB:.0f}G"


def bar_split(width: int) -> tuple[int, int]:
    """(bar, sparkline) cells of a bordered panel's UTIL and MEM lines ``width`` cells wide: the
    bar a third of what the label and value leave (6 to BAR_MAX), the sparkline the rest."""
    rest = width - LABEL_WIDTH - VALUE_WIDTH - 2
    bar = max(6, min(BAR_MAX, rest // 3))
    return bar, max(0, rest - bar)


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
