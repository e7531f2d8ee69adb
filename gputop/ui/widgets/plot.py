"""A history chart: a textual-plotext plot of one or two series against seconds ago."""

from __future__ import annotations

from textual_plotext import PlotextPlot


class HistoryPlot(PlotextPlot):
    """Plots named series (oldest first, one point per tick); gaps (None) are skipped."""

    def __init__(self, title: str, unit: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.title = title
        self.unit = unit
        self._series: dict[str, list[float | None]] = {}
        self._interval_s = 1.0
        self._top: float | None = None

    def on_unmount(self) -> None:
        # PlotextPlot subscribes to theme changes on mount and never unsubscribes; the signal's
        # callback holds the plot, so each GPU detail screen's six plots stayed alive until the
        # theme changed (textual-plotext 1.0.1).
        self.app.theme_changed_signal.unsubscribe(self)

    def set_series(
        self,
        series: dict[str, list[float | None]],
        *,
        interval_s: float = 1.0,
        top: float | None = None,
    ) -> None:
        """Replace the data; redraws only when it changed."""
        if series == self._series and interval_s == self._interval_s and top == self._top:
            return
        self._series, self._interval_s, self._top = series, interval_s, top
        self._draw()
        self.refresh()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(f"{self.title} ({self.unit})" if self.unit else self.title)
        plotted: list[float] = []
        for name, values in self._series.items():
            n = len(values)
            points = [
                (-(n - 1 - i) * self._interval_s, v) for i, v in enumerate(values) if v is not None
            ]
            if points:
                xs, ys = zip(*points, strict=True)
                plt.plot(list(xs), list(ys), label=name if len(self._series) > 1 else None)
                plotted.extend(ys)
        if not plotted:
            plt.title(f"{self.title}: no data (N/A on this GPU)")
        if self._top is not None:
            plt.ylim(0, self._top)
        elif plotted:
            flat = flat_range(min(plotted), max(plotted))
            if flat is not None:
                plt.ylim(*flat)
        plt.xlabel("seconds ago")


def flat_range(low: float, high: float) -> tuple[float, float] | None:
    """The y range for data that does not vary (``low == high``), or None when it does.

    plotext centres such data in a range of its own: -1 to 1 for all zeros (negative ticks for
    PCIe throughput or power), 0.5 to 1.5 times the value otherwise. Here the axis starts at 0:
    0 to 1 for zeros, 0 to twice the value (the line in the middle) for anything else.
    """
    if low != high:
        return None
    if low == 0:
        return (0.0, 1.0)
    return (0.0, 2 * low) if low > 0 else (2 * low, 0.0)
