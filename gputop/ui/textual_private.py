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

Kept because without it memory grows with every screen opened (``python -m bench leaks``):

- watchers of removed nodes (Textualize/textual#6666, open): ``self.watch(other, ...)`` and
  ``data_bind`` leave ``(node, callback)`` on the watched object's ``__watchers``, which Textual
  prunes of closed nodes (``_closing``) only when that attribute changes again. Every Footer
  recompose (each screen opened or closed) left its old keys on the Footer, and each GPU detail
  screen stayed on the app until ``--interval`` changed. :func:`prune_closed_watchers` applies
  Textual's own filter at once. Fallback: the leak, as upstream.
- the styles cache's colour pairs (Textualize/textual#6665, open): ``StylesCache.get_inner_outer``
  is an ``lru_cache(1024)`` on an instance method, so its keys keep up to 1,024 widgets'
  StylesCaches, each with its rendered lines, alive after the widgets are gone (17 for each help
  screen opened). :func:`stop_styles_cache_leak` keys the same cache by the two colours alone.
  Fallback: the leak, as upstream.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rich.segment import Segment
from textual.dom import DOMNode
from textual.message import Message
from textual.reactive import reactive
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


# --- watchers of removed nodes ----------------------------------------------------------------

_WATCHERS = "__watchers"  # Reactive's table on the watched object: {attribute: [(node, callback)]}


class _Watched(DOMNode):
    value = reactive(0)


def _watchers_fit() -> bool:
    """A watch lands in the watched object's table as ``(node, callback)``; a node has
    ``_closing``."""
    try:
        watched, watcher = _Watched(), DOMNode()

        def callback() -> None:
            pass

        watcher.watch(watched, "value", callback, init=False)
        table = getattr(watched, _WATCHERS)
        return table == {"value": [(watcher, callback)]} and watcher._closing is False
    except Exception:  # noqa: BLE001 - another shape: no pruning, Textual's behaviour
        return False


PRUNE_WATCHERS: bool = _watchers_fit()
"""Whether :func:`prune_closed_watchers` can prune (else the watchers stay, as in Textual)."""


def prune_closed_watchers(node: DOMNode) -> int:
    """Drop from ``node``'s watchers those of closed (removed) nodes; how many were dropped.

    The filter Textual applies itself when a watched attribute changes
    (``Reactive._check_watchers``), applied now: until then each entry keeps a removed node, and
    all it refers to, alive.
    """
    table: dict[str, list[tuple[Any, Any]]] | None = getattr(node, _WATCHERS, None)
    if not PRUNE_WATCHERS or not table:
        return 0
    dropped = 0
    for entries in table.values():
        kept = [(watcher, callback) for watcher, callback in entries if not watcher._closing]
        dropped += len(entries) - len(kept)
        entries[:] = kept
    return dropped


# --- the styles cache's colour pairs -----------------------------------------------------------

try:  # textual>=8,<9
    from textual._styles_cache import StylesCache as _StylesCache
except ImportError:  # pragma: no cover - a Textual that moved it
    _StylesCache = None  # type: ignore[assignment,misc]


def _inner_outer_method() -> Callable[..., Any] | None:
    """Textual's ``get_inner_outer`` when it is the leaking shape: an lru_cache on a function of
    ``(self, base_background, background)`` that does not use ``self``."""
    if _StylesCache is None:
        return None
    method = _StylesCache.__dict__.get("get_inner_outer")
    wrapped = getattr(method, "__wrapped__", None)
    if not callable(method) or not hasattr(method, "cache_info") or wrapped is None:
        return None
    code = getattr(wrapped, "__code__", None)
    if code is None or code.co_argcount != 3:
        return None
    import dis  # loaded already: dataclasses imports inspect, which imports it

    first = code.co_varnames[0]
    if any(
        i.opname.startswith("LOAD_FAST") and i.argval == first for i in dis.get_instructions(code)
    ):
        return None  # it reads its first argument: not ours to drop
    return wrapped  # type: ignore[no-any-return]


_ORIGINAL_INNER_OUTER = _inner_outer_method()
STYLES_CACHE_FIX: bool = _ORIGINAL_INNER_OUTER is not None
"""Whether :func:`stop_styles_cache_leak` can replace the method (else Textual's stays)."""


@functools.lru_cache(1024)
def _inner_outer(base_background: Any, background: Any) -> Any:
    assert _ORIGINAL_INNER_OUTER is not None
    return _ORIGINAL_INNER_OUTER(None, base_background, background)


def _get_inner_outer(self: Any, base_background: Any, background: Any) -> Any:
    return _inner_outer(base_background, background)


def stop_styles_cache_leak() -> bool:
    """Make ``StylesCache.get_inner_outer`` cache by its two colours only (the same answers,
    computed by Textual's own function); True when it now does."""
    if not STYLES_CACHE_FIX:
        return False
    _StylesCache.get_inner_outer = _get_inner_outer  # type: ignore[method-assign,assignment]
    return True
