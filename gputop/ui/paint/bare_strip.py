"""Strips for rows that are rebuilt every tick, without Textual's per-strip caches.

A Textual ``Strip`` makes seven small caches when built (a third of its cost), and
``Strip.divide`` stores ``[self]`` in one of them when the compositor cuts a row at its own end,
which it does for every full-width row it paints. That makes each painted row a reference cycle
only the garbage collector frees: about 80 rows (and ~1,200 objects) a second on the dgx demo,
and a young collection every few seconds. Our rows are cached by the widgets themselves, so they
get one shared cache that keeps nothing: no cycle, and cheaper to build.

Building a Strip by hand sets its private slots; it is done only while ``Strip.__slots__`` are
exactly the ones filled here (``SUPPORTED``, checked at import), and never when
``GPUTOP_PLAIN_TEXTUAL=1`` (``gputop.ui.paint.PLAIN_TEXTUAL``): otherwise Textual builds an
ordinary Strip.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.strip import Strip

from gputop.ui import paint


class _KeepNothing:
    """Stands in for a Strip's caches: every lookup misses, every store is dropped."""

    __slots__ = ()

    def get(self, key: object, default: Any = None) -> Any:
        return default

    def __setitem__(self, key: object, value: object) -> None:
        pass


_KEEP_NOTHING = _KeepNothing()
_CACHES = (
    "_divide_cache",
    "_crop_cache",
    "_style_cache",
    "_filter_cache",
    "_line_length_cache",
    "_crop_extend_cache",
    "_offsets_cache",
)
_OTHERS = ("_segments", "_cell_length", "_render_cache", "_link_ids", "_cell_count")
# Built by hand only while Strip has exactly the fields we fill; otherwise Textual builds it.
SUPPORTED = set(getattr(Strip, "__slots__", ())) == {*_CACHES, *_OTHERS}


def bare_strip(segments: list[Segment], cell_length: int) -> Strip:
    """A Strip of ``segments`` (exactly ``cell_length`` cells) that caches nothing of its own."""
    if not SUPPORTED or paint.PLAIN_TEXTUAL:
        return Strip(segments, cell_length)
    strip: Any = Strip.__new__(Strip)
    strip._segments = segments
    strip._cell_length = cell_length
    strip._render_cache = strip._link_ids = strip._cell_count = None
    for name in _CACHES:
        setattr(strip, name, _KEEP_NOTHING)
    return strip  # type: ignore[no-any-return]
