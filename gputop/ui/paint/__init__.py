"""Painting machinery: faster paths through Textual for what the dashboard repaints every tick.

What each module saves. The figures are the README's (Performance) and the modules' own
docstrings'; the README's come from ``make bench`` on the project's 2-core CI-class VM with the
simulated 8-GPU ``dgx`` scenario (40 processes) in a 200x60 tmux at a 1 s interval, where the whole
dashboard costs 0.70-0.80 % of one core.

- ``framed_lines``: :class:`FramedLines` joins each changed content row into a border and padding
  cut once from Textual's own render, instead of sending every refreshed line through Textual's
  styles pipeline (about 50 µs a line, ~80 lines a second: it was most of the dashboard's CPU). Its
  quiet refresh hands a changed row straight to the screen, skipping two message rounds per
  widget per tick (about 0.03 % of a core).
- ``bare_strip``: rows without a Strip's seven caches (a third of its build cost). Textual's
  ``Strip.divide`` made every painted row a reference cycle (about 1,200 objects a second on
  ``dgx``, a young collection every few seconds); with bare strips the collector no longer runs
  at steady state.
- ``line``: :class:`Line`, text pieces with styles, instead of a Rich Text per panel line, whose
  building, cutting and rendering had cost more than everything else the panels did.
- ``driver``: :class:`CalmLinuxDriver`, whose input thread sleeps in ``select()`` instead of
  waking ten times a second: 0.15 % of a core.

Re-measure with ``make bench`` (everything) or ``python -m bench ui`` (the dashboard's CPU and RSS
in tmux, its first frame, the UI thread's time per snapshot). The VM's speed drifts by 10-15 %
within an hour: compare several runs. With ``GPUTOP_PLAIN_TEXTUAL=1`` set the same commands measure
Textual's own paths (the tmux run sees it only if no tmux server was running yet).

Each path uses private Textual names, feature-detected at import (or looked up with a default)
with Textual's public path as the fallback: ``textual._parser`` / ``textual._xterm_parser`` and the
parser's ``_timeout_time``, the driver's ``_debug`` and ``_file`` (driver); ``Widget._set_dirty``,
``Screen._dirty_widgets`` and ``Screen._compositor`` (framed_lines: ``refresh()``); the slots of
``Strip`` (bare_strip: an ordinary ``Strip``). ``GPUTOP_PLAIN_TEXTUAL=1`` takes every fallback at
once: Textual's input thread, its full render path and ``refresh()``, ordinary Strips.
"""

from __future__ import annotations

import os

PLAIN_TEXTUAL_ENV = "GPUTOP_PLAIN_TEXTUAL"


def plain_requested(value: str | None) -> bool:
    """Whether an environment value asks for Textual's own paths (set, and not "" or "0")."""
    return value is not None and value.strip() not in ("", "0")


# Read once, here; the paint modules look at it on each use, so tests may monkeypatch it.
PLAIN_TEXTUAL: bool = plain_requested(os.environ.get(PLAIN_TEXTUAL_ENV))
