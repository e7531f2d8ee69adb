"""One GPU in depth: plotext charts of its history and every field of its latest sample."""

from __future__ import annotations

from dataclasses import fields

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Static

from gputop import units
from gputop.engine.gpu_health import assess
from gputop.engine.history import History
from gputop.engine.model import GpuSample, Snapshot
from gputop.ui.widgets.footer import Footer
from gputop.ui.widgets.gpu_panel import title
from gputop.units import GiB

# gputop.ui.widgets.plot (textual_plotext and plotext: about 40 ms of imports) is loaded when a
# detail screen is first opened, not before the dashboard's first frame.

# (widget id, title, unit, {series label: (metric, scale)}, fixed top or None)
CHARTS: tuple[tuple[str, str, str, dict[str, tuple[str, float]], float | None], ...] = (
    (
        "util",
        "Utilisation",
        "%",
        {"gpu": ("utilization_gpu_percent", 1), "memory": ("utilization_memory_percent", 1)},
        100.0,
    ),
    ("memory", "Memory used", "GiB", {"used": ("memory_used_bytes", 1 / GiB)}, None),
    ("temp", "Temperature", "°C", {"temp": ("temperature_c", 1)}, None),
    ("power", "Power", "W", {"draw": ("power_draw_mw", 1 / 1000)}, None),
    (
        "clocks",
        "Clocks",
        "MHz",
        {"SM": ("clock_sm_mhz", 1), "memory": ("clock_memory_mhz", 1)},
        None,
    ),
    (
        "pcie",
        "PCIe",
        "MB/s",
        # NVML's KB/s are KiB/s: MB/s as gputop.units.pcie_mb_per_s counts them
        {"rx": ("pcie_rx_kbps", 1 / units.KiB), "tx": ("pcie_tx_kbps", 1 / units.KiB)},
        None,
    ),
)
# The History metrics the charts plot, each once: read together on every tick.
CHART_METRICS = tuple(dict.fromkeys(m for *_, series, _ in CHARTS for m, _ in series.values()))
WIDE_MIN_COLUMNS = 160  # room for 2 chart columns beside the 76-column field list


def field_lines(sample: GpuSample) -> Text:
    """The GPU's health verdict with its evidence, then every field of the sample as
    'name  value' lines (N/A for None)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    health = assess(sample)
    out.append(f"{'health':<32}", "bold")
    out.append(f"{health.verdict.value}\n")
    for reason in health.reasons:  # what was read, what it means, what to do
        out.append(f"  {reason.evidence}: {reason.meaning}; {reason.advice}\n")
    for f in fields(sample):
        if f.name in ("processes", "extra", "unavailable"):  # the last two: query-only readings
            continue
        value = getattr(sample, f.name)
        if f.name == "stale_s" and value is None:
            continue  # only a GPU that did not answer has an age to show
        if value is None:
            shown = units.NA
        elif isinstance(value, tuple):
            shown = ", ".join(str(v) for v in value) or "none"
        else:
            shown = str(value)
        out.append(f"{f.name:<32}", "bold")
        out.append(f"{shown}\n")
    out.append(f"{'processes':<32}", "bold")
    out.append(", ".join(str(p.pid) for p in sample.processes) or "none")
    return out


class GpuDetailScreen(Screen[None]):
    """Charts and fields of one GPU; redraws itself on every snapshot of the app."""

    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("left,[", "step(-1)", "Prev GPU"),
        Binding("right,]", "step(1)", "Next GPU"),
    ]

    def __init__(self, gpu_index: int, history: History) -> None:
        super().__init__()
        self.gpu_index = gpu_index
        self.history = history
        self.interval_s = 1.0
        self.snapshot: Snapshot | None = None

    def compose(self) -> ComposeResult:
        from gputop.ui.widgets.plot import HistoryPlot

        yield Static(Text(f"GPU {self.gpu_index}"), id="detail-title")
        with Horizontal(id="detail-body"):
            with VerticalScroll(id="detail-charts"):
                with Grid(id="charts"):
                    for chart_id, name, unit, _, _ in CHARTS:
                        yield HistoryPlot(name, unit, id=f"chart-{chart_id}")
                yield Static(id="fields-below", classes="fields")
            with VerticalScroll(id="fields-side"):
                yield Static(id="fields", classes="fields")
        yield Footer()

    def on_mount(self) -> None:
        app = self.app
        self.watch(app, "interval_s", self._set_interval)
        self.watch(app, "snapshot", self.show)  # draws the newest snapshot at once

    def _set_interval(self, interval_s: float) -> None:
        self.interval_s = interval_s  # the charts' time axis follows from the next snapshot

    def on_resize(self) -> None:
        self.set_class(self.size.width < WIDE_MIN_COLUMNS, "-narrow")

    def action_step(self, delta: int) -> None:
        snapshot = self.snapshot
        if snapshot is None:
            return
        indices = [g.index for g in snapshot.gpus]
        if self.gpu_index in indices:
            pos = (indices.index(self.gpu_index) + delta) % len(indices)
            self.gpu_index = indices[pos]
        self.show(snapshot)

    def show(self, snapshot: Snapshot | None) -> None:
        """Redraw from this snapshot and the history."""
        from gputop.ui.widgets.plot import HistoryPlot

        if snapshot is None or not self.is_current:  # none yet, or popped: being removed
            return
        self.snapshot = snapshot
        sample = snapshot.gpu(self.gpu_index)
        head = self.query_one("#detail-title", Static)
        if sample is None:
            head.update(Text(f"GPU {self.gpu_index} is not in the latest snapshot"))
            return
        state = "" if sample.state.value == "ok" else f"  {sample.state.value.upper()}"
        state = state.replace("-", " ")  # NOT RESPONDING
        head.update(Text(f"{title(sample)}  {sample.uuid or ''}{state}"))
        # One read of the history for every chart: they all end at the same sample, even
        # while the sampler thread appends.
        _, columns = self.history.tail(sample.index, CHART_METRICS, self.history.maxlen)
        values = dict(zip(CHART_METRICS, columns, strict=True))
        for chart_id, _, _, metrics, top in CHARTS:
            series = {
                label: [None if v is None else v * scale for v in values[metric]]
                for label, (metric, scale) in metrics.items()
            }
            if chart_id == "memory" and sample.memory_total_bytes:
                top = sample.memory_total_bytes / GiB
            self.query_one(f"#chart-{chart_id}", HistoryPlot).set_series(
                series, interval_s=self.interval_s, top=top
            )
        lines = field_lines(sample)
        self.query_one("#fields", Static).update(lines)
        self.query_one("#fields-below", Static).update(lines)
