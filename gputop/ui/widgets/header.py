"""The one-line header: host, driver, CUDA, GPU count, interval, last sample time, markers.

Painted through a cached Line strip (see gputop.ui.paint): it changes every tick (the sample
time), and Textual's rich-text pipeline cost more than the rest of it.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gputop import units
from gputop.engine.model import Snapshot
from gputop.ui import text
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.line import Line


class HeaderBar(FramedLines, Widget):
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

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._styles: dict[str, Style] = {}
        self._painted: tuple[object, int, Strip] | None = None

    def notify_style_update(self) -> None:
        self._styles.clear()
        self._painted = None
        super().notify_style_update()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            resolved = self.rich_style if name == "base" else self.get_component_rich_style(name)
            style = self._styles[name] = resolved
        return style

    def render(self) -> Text:
        """The header as rich Text (what the painted line shows)."""
        return self.line().to_text()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0:
            return Strip.blank(width, self._style("base"))
        line = self.line()
        key = line.key()
        painted = self._painted
        if painted is not None and painted[0] == key and painted[1] == width:
            return painted[2]
        strip = line.to_strip(width, self._style("base"))
        self._painted = (key, width, strip)
        return strip

    def line(self) -> Line:
        """The header's text and styles."""
        marker = self._style("header-bar--marker")
        out = Line()
        out.append(" gputop ", self._style("header-bar--title"))
        snap = self.snapshot
        # Markers first: at 80 columns the tail of the line may be cut, never these.
        if self.stale_s is not None:
            out.append(f" STALE {self.stale_s:.0f} s ", self._style("header-bar--stale"))
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
            f" {sys.hostname}  driver {sys.driver_version or units.NA}"
            f"  CUDA {sys.cuda_driver_version or units.NA}  {gpus}"
            f"  every {self.interval_s:g}s  {text.clock_time(snap.taken_at_wall)}"
        )
        return out
