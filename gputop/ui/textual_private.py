"""Every private Textual name gputop uses, and nothing else: the one module that may use them.

Each use is feature-tested here at import (the name is there with the shape it is used with);
where a test fails, the caller takes Textual's public path, as it does with
``GPUTOP_PLAIN_TEXTUAL=1`` (``gputop.ui.paint.PLAIN_TEXTUAL``). tests/test_private_names.py
keeps Textual's private names out of every other module.

Kept because ``make bench`` shows each pays at least 0.1 % of a core or 10 % of a tick (the
numbers are in gputop.ui.paint's docstring):

- the calm input thread (gputop.ui.paint.driver): Textual's escape-sequence parser
  (``textual._xterm_parser.XTermParser``, ``textual._parser.ParseError``) and whether it waits
  on a lone Esc (its ``_timeout_time``). Fallback: Textual's own input thread.
- bare strips (gputop.ui.paint.bare_strip): a ``Strip`` built by filling its ``__slots__``.
  Fallback: ``Strip(segments, cell_length)``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from rich.segment import Segment
from textual.message import Message
from textual.strip import Strip


class InputParser(Protocol):
    """What the calm input thread asks of Textual's parser."""

    def feed(self, data: str) -> Iterable[Message]: ...

    def tick(self) -> Iterable[Message]: ...


# --- the calm input thread ------------------------------------------------------------------

try:  # textual>=8,<9 has it here (pyproject pins that range)
    from textual._parser import ParseError as _ParseError
    from textual._xterm_parser import XTermParser as _XTermParser
except ImportError:  # pragma: no cover - a Textual that moved it
    _XTermParser = None  # type: ignore[assignment,misc]
    _ParseError = EOFError  # type: ignore[assignment,misc]

# What a parser may raise when it is told the input has ended.
INPUT_END_ERRORS: tuple[type[Exception], ...] = (EOFError, _ParseError)


def _parser_fits() -> bool:
    """A new parser waits on nothing; after a lone Esc it waits on a timeout (``_timeout_time``)."""
    if _XTermParser is None:
        return False
    try:
        parser: Any = _XTermParser(False)
        idle = parser._timeout_time is None
        list(parser.feed("\x1b"))
        return idle and isinstance(parser._timeout_time, float) and callable(parser.tick)
    except Exception:  # noqa: BLE001 - a parser of another shape: Textual's own thread then
        return False


CALM_INPUT: bool = _parser_fits()
"""Whether the calm input thread can run (else Textual's own input thread reads the keys)."""


def xterm_parser(debug: bool) -> InputParser:
    """Textual's parser of terminal input into key, mouse and paste events (needs CALM_INPUT)."""
    assert _XTermParser is not None
    return _XTermParser(debug)


def parser_pending(parser: InputParser) -> bool:
    """True while the parser waits on a timeout (a lone Esc becomes a key only after it)."""
    return parser._timeout_time is not None  # type: ignore[attr-defined]


# --- bare strips ------------------------------------------------------------------------------


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

BARE_STRIP: bool = set(getattr(Strip, "__slots__", ())) == {*_CACHES, *_OTHERS}
"""Whether ``Strip`` has exactly the fields :func:`bare_strip` fills (else build a Strip)."""


def bare_strip(segments: list[Segment], cell_length: int) -> Strip:
    """A Strip of ``segments`` whose caches keep nothing (needs BARE_STRIP)."""
    strip: Any = Strip.__new__(Strip)
    strip._segments = segments
    strip._cell_length = cell_length
    strip._render_cache = strip._link_ids = strip._cell_count = None
    for name in _CACHES:
        setattr(strip, name, _KEEP_NOTHING)
    return strip  # type: ignore[no-any-return]
