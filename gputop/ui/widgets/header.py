"""The one-line header: host, driver, CUDA, GPU count, interval, last sample time, markers."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from gputop.model import Snapshot
from gputop.ui import text


class HeaderBar(Widget):
    """Shows facts from the latest snapshot (never the wall clock) and the app's state markers."""

    COMPONENT_CLASSES = {"header-bar--title", "header-bar--marker", "header-bar--stale"}
    DEFAULT_CSS = "HeaderBar { height: 1; }"

    snapshot: reactive[Snapshot | None] = reactive(None)
    stale_s: reactive[float | None] = reactive(None)
    interval_s: reactive[float] = reactive(1.0)
    paused: reactive[bool] = reactive(False)
    readonly: reactive[bool] = reactive(False)

    def watch_stale_s(self, stale_s: float | None) -> None:
        self.set_class(stale_s is not None, "-stale")

    def render(self) -> Text:
        marker = self.get_component_rich_style("header-bar--marker")
        out = Text(no_wrap=True, overflow="ellipsis")
        out.append(" gputop ", self.get_component_rich_style("header-bar--title"))
        snap = self.snapshot
        # Markers first: at 80 columns the tail of the line may be cut, never these.
        if self.stale_s is not None:
            out.append(
                f" STALE {self.stale_s:.0f} s ", self.get_component_rich_style("header-bar--stale")
            )
            out.append(" ")
        for shown, label in (
            (snap is not None and snap.system.simulated, "DEMO"),
            (self.paused, "PAUSED"),
            (self.readonly, "READONLY"),
        ):
            if shown:
                out.append(f" {label} ", marker)
                out.append(" ")
        if snap is None:
            out.append(" waiting for the first sample…")
            return out
        sys = snap.system
        gpus = f"{len(snap.gpus)} GPU{'s' if len(snap.gpus) != 1 else ''}"
        out.append(
            f" {sys.hostname}  driver {sys.driver_version or text.NA}"
            f"  CUDA {sys.cuda_driver_version or text.NA}  {gpus}"
            f"  every {self.interval_s:g}s  {text.clock_time(snap.taken_at_wall)}"
        )
        return out
