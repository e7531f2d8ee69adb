"""Strips for rows that are rebuilt every tick, without Textual's per-strip caches.

A Textual ``Strip`` makes seven small caches when built (a third of its cost), and
``Strip.divide`` stores ``[self]`` in one of them when the compositor cuts a row at its own end,
which it does for every full-width row it paints. That makes each painted row a reference cycle
only the garbage collector frees: about 80 rows (and ~1,200 objects) a second on the dgx demo,
and a young collection every few seconds. Our rows are cached by the widgets themselves, so they
get one shared cache that keeps nothing: no cycle, and cheaper to build.

Building a Strip by hand fills its private slots (gputop.ui.textual_private, feature-tested at
import); with another Textual, or ``GPUTOP_PLAIN_TEXTUAL=1`` (``gputop.ui.paint.PLAIN_TEXTUAL``),
Textual builds an ordinary Strip.
"""

from __future__ import annotations

from rich.segment import Segment
from textual.strip import Strip

from gputop.ui import paint, textual_private

SUPPORTED = textual_private.BARE_STRIP


def bare_strip(segments: list[Segment], cell_length: int) -> Strip:
    """A Strip of ``segments`` (exactly ``cell_length`` cells) that caches nothing of its own."""
    if not SUPPORTED or paint.PLAIN_TEXTUAL:
        return Strip(segments, cell_length)
    return textual_private.bare_strip(segments, cell_length)
