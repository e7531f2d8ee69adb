"""The one-line header: host, driver, CUDA, GPU count, interval, last sample time, markers.

Painted through a cached Line strip (see gputop.ui.paint): it changes every tick (the sample
time), and Textual's rich-text pipeline cost more than the rest of it.

While the snapshot carries a ``driver_note`` (the driver process crashed, a call hangs) the header
shows it in the STALE marker's alarm style, right after that marker. It is fitted to the width:
the title gives way first, then the host facts, then the note's last words; the STALE marker and
the note's first words stay on screen at every width the dashboard draws at.

Without a note the host facts are fitted too: the title, the CUDA version, the driver version, the
host name's end, the interval, the host name and the GPU count give way, in this order, so the
markers and the time of the last sample are always whole (at 80 columns, PAUSED and DEMO too).

STALE shows the app's stale_s: the time without a fresh sample, less the time spent paused.
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
HOST_MIN_CELLS = 8  # a host name cut to fit keeps this much (with its '…')
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
        """The header as rich Text (what the painted line shows, with every host fact: before
        the facts are fitted and the line is cut at its end)."""
        return self.line(self.size.width or None, fit_facts=False).to_text()

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

    def line(self, width: int | None = None, *, fit_facts: bool = True) -> Line:
        """The header's text and styles, fitted to ``width`` cells when given.

        What does not fit is cut at the end of the line (see Line.to_strip); a driver note makes
        room for itself first by dropping the title and then by losing its own last words. The
        host facts give way (:func:`fitted_facts`) unless ``fit_facts`` is false.
        """
        marker = self._style("header-bar--marker")
        alarm = self._style("header-bar--stale")
        snap = self.snapshot
        stale_s = self.stale_s
        stale = None if stale_s is None else f" STALE {stale_s:.0f} s "
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
        if stale is not None:
            out.append(stale, alarm)
            out.append(" ")
        if note is not None:
            out.append(f" {note} ", alarm)
            out.append(" ")
        for label in labels:
            out.append(label, marker)
            out.append(" ")
        facts: list[str] = []
        if snap is not None and not cut:
            facts = host_facts(snap, self.interval_s)
            if width is not None and fit_facts:
                room = width - cell_len(out.plain)
                if show_title and note is None and facts_cells(facts) > room - cell_len(TITLE):
                    show_title = False  # the title gives way before any fact (a note's
                    # title was settled above)
                if show_title:
                    room -= cell_len(TITLE)
                facts = fitted_facts(facts, room)
        if show_title:
            out.parts.insert(0, (TITLE, self._style("header-bar--title")))
        if snap is None:
            out.append(" waiting for the first sample…")
        elif facts:
            out.append(" " + "  ".join(facts))
        return out


def host_facts(snap: Snapshot, interval_s: float) -> list[str]:
    """Host, driver, CUDA, GPU count, interval and the time of the sample, as the header says
    them."""
    sys = snap.system
    gpus = f"{len(snap.gpus)} GPU{'s' if len(snap.gpus) != 1 else ''}"
    if snap.no_reading_yet:
        gpus = "? GPUs"  # not read yet: not "0 GPUs"
    return [
        sys.hostname,
        f"driver {sys.driver_version or units.NA}",
        f"CUDA {sys.cuda_driver_version or units.NA}",
        gpus,
        f"every {interval_s:g}s",
        text.clock_time(snap.taken_at_wall),
    ]


def facts_cells(facts: list[str]) -> int:
    """Cells the facts take on the header: a blank, then the facts two blanks apart."""
    return 1 + cell_len("  ".join(facts)) if facts else 0


def fitted_facts(facts: list[str], room: int) -> list[str]:
    """The facts of :func:`host_facts` in ``room`` cells: the CUDA version, the driver version,
    the host name's end, the interval, the host name and the GPU count give way, in this order;
    the time of the sample stays (cut at the end of the line only past all of them)."""
    host, driver, cuda, gpus, interval, clock = facts
    steps: list[list[str]] = [
        [host, driver, cuda, gpus, interval, clock],
        [host, driver, gpus, interval, clock],
        [host, gpus, interval, clock],
    ]
    for step in steps:
        if facts_cells(step) <= room:
            return step
    # The host name shrinks (never below HOST_MIN_CELLS), then goes, as do the rest.
    rest = facts_cells([gpus, interval, clock]) + 2
    if room - rest >= min(HOST_MIN_CELLS, cell_len(host)):
        return [fit(host, room - rest), gpus, interval, clock]
    for step in ([gpus, interval, clock], [gpus, clock], [clock]):
        if facts_cells(step) <= room:
            return step
    return [clock]


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
