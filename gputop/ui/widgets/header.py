"""The one-line header: host, driver, CUDA, GPU count, interval, last sample time, markers.

Painted through a cached Line strip (see gputop.ui.paint): it changes every tick (the sample
time), and Textual's rich-text pipeline cost more than the rest of it.

While the snapshot carries a ``driver_note`` (the driver process crashed, a call hangs) the header
shows it in the STALE marker's alarm style, right after that marker. It is fitted to the width:
the title gives way first, then the host facts, then the note's last words; the STALE marker and
the note's first words stay on screen at every width the dashboard draws at.
"""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.style import Style
from rich.text import Text
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gputop import units
from gputop.engine.model import Snapshot
from gputop.ui import text
from gputop.ui.paint.framed_lines import FramedLines
from gputop.ui.paint.line import ELLIPSIS, Line

TITLE = " gputop "
NOTE_MIN_CELLS = 24  # the note keeps at least this much, markers or not
WORD_CUT_MAX_LOSS = 12  # cells a cut may give back to end after a whole word, not mid-word


class HeaderBar(FramedLines, Widget):
    """Shows facts from the latest snapshot (never the wall clock) and the app's state markers."""

    COMPONENT_CLASSES = {"header-bar--title", "header-bar--marker", "header-bar--stale"}
    DEFAULT_CSS = "HeaderBar { height: 1; }"

    snapshot: reactive[Snapshot | None] = reactive(None)
    stale_s: reactive[float | None] = reactive(None)
    interval_s: reactive[float] = reactive(1.0)
    paused: reactive[bool] = reactive(False)
    readonly: reactive[bool] = reactive(False)
    # The snapshot's driver_note, set with it: a stale re-send equals the reading it re-sends
    # (driver_note is not compared), so the snapshot alone would not repaint the note.
    driver_note: reactive[str | None] = reactive(None)

    def watch_stale_s(self, stale_s: float | None) -> None:
        self.set_class(stale_s is not None, "-stale")

    def watch_driver_note(self, note: str | None) -> None:
        self.set_class(bool(note and note.strip()), "-driver-note")

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
        """The header as rich Text (what the painted line shows, before the cut at its end)."""
        return self.line(self.size.width or None).to_text()

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if y != 0:
            return Strip.blank(width, self._style("base"))
        line = self.line(width)
        key = line.key()
        painted = self._painted
        if painted is not None and painted[0] == key and painted[1] == width:
            return painted[2]
        strip = line.to_strip(width, self._style("base"))
        self._painted = (key, width, strip)
        return strip

    def line(self, width: int | None = None) -> Line:
        """The header's text and styles, fitted to ``width`` cells when given.

        What does not fit is cut at the end of the line (see Line.to_strip); a driver note makes
        room for itself first by dropping the title and then by losing its own last words.
        """
        marker = self._style("header-bar--marker")
        alarm = self._style("header-bar--stale")
        snap = self.snapshot
        stale = None if self.stale_s is None else f" STALE {self.stale_s:.0f} s "
        labels = [
            f" {label} "
            for shown, label in (
                (snap is not None and snap.system.simulated, "DEMO"),
                (self.paused, "PAUSED"),
                (self.readonly, "READONLY"),
            )
            if shown
        ]
        note = one_line(self.driver_note or "") or None
        show_title = True
        cut = False  # the note lost words: it ends the line, no host facts after its '…'
        if note is not None and width is not None:
            # The markers stay whole; the note takes what is left, down to NOTE_MIN_CELLS.
            fixed = sum(cell_len(piece) + 1 for piece in (stale, *labels) if piece)
            room = width - fixed - 3  # the note's two padding blanks and the blank after it
            if cell_len(TITLE) + cell_len(note) > room:
                show_title = False  # the title gives way before the note's words
            else:
                room -= cell_len(TITLE)
            fitted = fit(note, max(NOTE_MIN_CELLS, room))
            cut, note = fitted != note, fitted
        # Markers (and the note) first: at 80 columns the tail of the line may be cut, never these.
        out = Line()
        if show_title:
            out.append(TITLE, self._style("header-bar--title"))
        if stale is not None:
            out.append(stale, alarm)
            out.append(" ")
        if note is not None:
            out.append(f" {note} ", alarm)
            out.append(" ")
        for label in labels:
            out.append(label, marker)
            out.append(" ")
        if snap is None:
            out.append(" waiting for the first sample…")
            return out
        if cut:
            return out
        sys = snap.system
        gpus = f"{len(snap.gpus)} GPU{'s' if len(snap.gpus) != 1 else ''}"
        out.append(
            f" {sys.hostname}  driver {sys.driver_version or units.NA}"
            f"  CUDA {sys.cuda_driver_version or units.NA}  {gpus}"
            f"  every {self.interval_s:g}s  {text.clock_time(snap.taken_at_wall)}"
        )
        return out


def one_line(note: str) -> str:
    """The note with every run of whitespace as one blank (it is sanitised: this is belt only)."""
    return " ".join(note.split())


def fit(note: str, cells: int) -> str:
    """``note`` in at most ``cells`` cells: whole, or cut after a word (or mid-word) with '…'."""
    if cell_len(note) <= cells:
        return note
    if cells <= len(ELLIPSIS):
        return ELLIPSIS[:cells]
    budget = cells - cell_len(ELLIPSIS)
    kept: list[str] = []
    used = 0
    for char in note:
        used += get_character_cell_size(char)
        if used > budget:
            break
        kept.append(char)
    head = "".join(kept)
    space = head.rfind(" ")
    mid_word = note[len(head)].isalnum()  # else the cut falls between words already
    if mid_word and space >= 0 and cell_len(head[space:]) <= WORD_CUT_MAX_LOSS:
        head = head[:space]
    return head.rstrip(" -:,;(\u2013\u2014") + ELLIPSIS  # no dangling dash or colon
