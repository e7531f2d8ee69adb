"""Painting machinery: faster paths through Textual for what the dashboard repaints every tick.

What each module saves. The figures are docs/performance.md's and the modules' own
docstrings'; those come from ``make bench`` on the project's 2-core CI-class VM with the
simulated 8-GPU ``dgx`` scenario (40 processes) in a 200x60 tmux at a 1 s interval, where the whole
dashboard costs 0.70-0.80 % of one core.

- ``framed_lines``: :class:`FramedLines` joins each changed content row into a border and padding
  cut once from Textual's own render, instead of sending every refreshed line through Textual's
  styles pipeline (about 50 µs a line, ~80 lines a second: it was most of the dashboard's CPU).
- ``bare_strip``: rows without a Strip's seven caches (a third of its build cost). Textual's
  ``Strip.divide`` made every painted row a reference cycle (about 1,200 objects a second on
  ``dgx``, a young collection every few seconds); with bare strips the collector no longer runs
  at steady state.
- ``line``: :class:`Line`, text pieces with styles, instead of a Rich Text per panel line, whose
  building, cutting and rendering had cost more than everything else the panels did.
- ``driver``: :class:`CalmLinuxDriver`, whose input thread sleeps in ``select()`` instead of
  waking ten times a second.

Re-measure with ``make bench`` (everything) or ``python -m bench ui`` (the dashboard's CPU and RSS
in tmux, its first frame, the UI thread's time per snapshot). The VM's speed drifts by 10-15 %
within an hour: compare several runs. With ``GPUTOP_PLAIN_TEXTUAL=1`` set the same commands measure
Textual's own paths (bench ui passes it on to the dashboard it starts in tmux).

Two of these paths use private Textual names, all of them in gputop.ui.textual_private, each
feature-tested at import with Textual's public path as the fallback. Each is kept because it pays
at least 0.1 % of a core or 10 % of a tick (issue 36: ``bench ui``, dgx in a 200x60 tmux at 1 s,
on a 2-core VM shared with other work, so noisy: medians of 3 interleaved runs each way, and
threads' CPU over 30 s from /proc's schedstat, which the bench's 0.05 % steps cannot resolve):

- bare strips (``Strip``'s slots): the headless tick 10.9 ms with, 12.8 ms without (15 %); the
  UI thread 0.85 % of a core with, 0.95 % without.
- the calm input thread (``textual._xterm_parser``, the parser's ``_timeout_time``): Textual's
  own input thread costs 0.12 % of a core (ten wake-ups a second); the calm one, nothing.

Deleted, because they paid less or not at all: the quiet refresh (``Widget._set_dirty``,
``Screen._dirty_widgets``, ``Screen._compositor``: the UI thread 0.87 % of a core with it, 0.92 %
without, the tick 10.9 ms with, 10.8 ms without), and the driver's ``_file``, ``_app``,
``_debug``, ``_mouse``, ``_auto_restart`` and ``_writer_thread`` (no speed at stake: each has a
public way, see ``driver``). ``GPUTOP_PLAIN_TEXTUAL=1`` takes every fallback at once: Textual's
input thread, its full render path, ordinary Strips.
"""

from __future__ import annotations

import os

PLAIN_TEXTUAL_ENV = "GPUTOP_PLAIN_TEXTUAL"


def plain_requested(value: str | None) -> bool:
    """Whether an environment value asks for Textual's own paths (set, and not "" or "0")."""
    return value is not None and value.strip() not in ("", "0")


# Read once, here; the paint modules look at it on each use, so tests may monkeypatch it.
PLAIN_TEXTUAL: bool = plain_requested(os.environ.get(PLAIN_TEXTUAL_ENV))
