"""Unicode glyphs, or ASCII stand-ins when the output cannot carry them (no Textual here).

A terminal set to ISO-8859-1 or ASCII (``LANG=en_US.ISO-8859-1``, ``PYTHONIOENCODING=ascii``)
cannot show '→', '█' or '▁': Python either fails with UnicodeEncodeError or writes ``\\u2588``.
:func:`for_stream` picks a glyph set once for an output stream; :func:`translator` gives a
function turning any text into what an encoding can carry, one cell for one cell (for text
already laid out, such as a Textual frame).
"""

from __future__ import annotations

import codecs
import functools
import os
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import astuple, dataclass
from typing import IO


@dataclass(frozen=True, slots=True)
class Glyphs:
    """The few non-ASCII characters the views draw, or their ASCII stand-ins."""

    unicode: bool
    arrow: str  # NVML index -> CUDA index
    ellipsis: str  # text was cut here
    degree: str  # before "C"
    dot: str  # a separator, and a bar cell with no reading
    up: str
    down: str
    bar_full: str  # a whole bar cell
    bar_partials: str  # seven left-aligned eighths of a cell ("" when there are none)
    spark: str  # nine sparkline levels, empty to full


UNICODE = Glyphs(
    unicode=True,
    arrow="→",
    ellipsis="…",
    degree="°",
    dot="·",
    up="▲",
    down="▼",
    bar_full="█",
    bar_partials="▏▎▍▌▋▊▉",
    spark=" ▁▂▃▄▅▆▇█",
)
ASCII = Glyphs(
    unicode=False,
    arrow="->",
    ellipsis="...",
    degree="",
    dot=".",
    up="^",
    down="v",
    bar_full="#",
    bar_partials="",
    spark=" _.:-=+*#",
)

_UNICODE_CHARS = "".join(sorted({c for part in astuple(UNICODE)[1:] for c in part}))


def codec_name(encoding: str | None) -> str:
    """Python's canonical name for ``encoding`` ('UTF8' -> 'utf-8'); unknown ones are 'ascii'."""
    try:
        return codecs.lookup(encoding or "ascii").name
    except LookupError:
        return "ascii"


def can_encode(encoding: str, text: str = _UNICODE_CHARS) -> bool:
    """True when every character of ``text`` (by default every glyph of UNICODE) encodes."""
    try:
        text.encode(codec_name(encoding))
    except UnicodeEncodeError:
        return False
    return True


def for_encoding(encoding: str | None) -> Glyphs:
    """UNICODE when ``encoding`` carries all of its glyphs, else ASCII (latin-1 does not)."""
    return UNICODE if can_encode(encoding or "ascii") else ASCII


def locale_charset(environ: Mapping[str, str]) -> str | None:
    """The charset the environment's locale names (LC_ALL, then LC_CTYPE, then LANG), if any.

    ``en_US.ISO-8859-1`` -> 'latin-1'; ``C``, ``POSIX`` or a name without a charset -> None.
    """
    for name in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = environ.get(name)
        if value:
            _, dot, charset = value.partition(".")
            return codec_name(charset.partition("@")[0]) if dot else None
    return None


def output_encoding(stream: IO[str] | None, environ: Mapping[str, str] | None = None) -> str:
    """The encoding text written to ``stream`` can safely use.

    Python's own choice (the stream's encoding) unless the locale names another charset: a
    locale that is not installed (or UTF-8 mode) leaves Python writing UTF-8 to a terminal set
    to, say, ISO-8859-1. Then only ASCII is the same in both. PYTHONIOENCODING is an explicit
    choice the stream already follows.
    """
    env = os.environ if environ is None else environ
    written = codec_name(getattr(stream, "encoding", None) or "utf-8")
    if env.get("PYTHONIOENCODING", "").partition(":")[0]:
        return written
    declared = locale_charset(env)
    return written if declared is None or declared == written else "ascii"


def for_stream(stream: IO[str] | None, environ: Mapping[str, str] | None = None) -> Glyphs:
    """The glyph set for text written to ``stream`` (e.g. sys.stdout)."""
    return for_encoding(output_encoding(stream, environ))


# One-cell stand-ins for characters whose names say too little (box drawing and block elements
# are worked out from their names below; the shades are kept apart from the full block here).
_STAND_INS = {
    "…": ".",
    "·": ".",
    "•": "*",
    "°": " ",
    "→": ">",
    "←": "<",
    "↑": "^",
    "↓": "v",
    "▲": "^",
    "▼": "v",
    "▶": ">",
    "◀": "<",
    "▸": ">",
    "◂": "<",
    "▴": "^",
    "▾": "v",
    "►": ">",
    "◄": "<",
    "\u00d7": "x",
    "✓": "v",
    "✔": "v",
    "✗": "x",
    "✘": "x",
    "●": "o",
    "○": "o",
    "\u2014": "-",
    "\u2013": "-",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u00a0": " ",
    "░": ".",
    "▒": ":",
    "▓": "#",
}
_EIGHTHS = {"ONE EIGHTH": 1, "ONE QUARTER": 2, "THREE EIGHTHS": 3, "HALF": 4}
_EIGHTHS |= {"FIVE EIGHTHS": 5, "THREE QUARTERS": 6, "SEVEN EIGHTHS": 7}


def _box_stand_in(name: str) -> str:
    """'-', '=', '|', '+', '/', '\\' or 'X' for a BOX DRAWINGS character, by the arms it has."""
    if "DIAGONAL" in name:
        if "CROSS" in name:
            return "X"
        return "/" if "UPPER RIGHT TO LOWER LEFT" in name else "\\"
    words = set(name.split())
    arms = {w for w in words if w in ("UP", "DOWN", "LEFT", "RIGHT")}
    arms |= {"LEFT", "RIGHT"} if "HORIZONTAL" in words else set()
    arms |= {"UP", "DOWN"} if "VERTICAL" in words else set()
    if arms <= {"LEFT", "RIGHT"}:
        return "=" if "DOUBLE" in words and "DASH" not in words else "-"
    if arms <= {"UP", "DOWN"}:
        return "|"
    return "+"


def _block_stand_in(name: str) -> str:
    """A stand-in for a block element: sparkline levels for lower blocks, '|' or '#' for sides."""
    eighths = next((n for words, n in _EIGHTHS.items() if words in name), 8)
    if name.startswith("LOWER"):
        return ASCII.spark[eighths]
    if name.startswith(("LEFT", "RIGHT")):
        return "|" if eighths < 4 else "#"
    if name.startswith("UPPER"):
        return "-" if eighths < 4 else '"'
    return "#"  # quadrants and the like


def stand_in(char: str) -> str:
    """ASCII for ``char`` filling as many cells as it does ('' for a zero-width character)."""
    if char in _STAND_INS:
        return _STAND_INS[char]
    name = unicodedata.name(char, "")
    if name.startswith("BOX DRAWINGS"):
        return _box_stand_in(name.removeprefix("BOX DRAWINGS "))
    if 0x2580 <= ord(char) <= 0x259F:
        return _block_stand_in(name)
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return ""
    if unicodedata.east_asian_width(char) in ("W", "F"):
        return "??"
    base = unicodedata.normalize("NFKD", char)[:1]  # 'é' -> 'e'
    return base if base.isascii() and base.isprintable() else "?"


class _StandIns(dict[int, str]):
    """A str.translate() table that works out (and remembers) each character it first meets."""

    def __init__(self, encoding: str) -> None:
        super().__init__()
        self.encoding = encoding

    def __missing__(self, code: int) -> str:
        char = chr(code)
        try:
            char.encode(self.encoding)
            replacement = char
        except UnicodeEncodeError:
            replacement = stand_in(char)
        self[code] = replacement
        return replacement


@functools.cache
def translator(encoding: str) -> Callable[[str], str] | None:
    """A function making text safe for ``encoding`` cell for cell; None when all is safe (UTF-8).

    Characters the encoding can carry are kept; the others become ASCII stand-ins of the same
    width (box drawing '-', '|', '+'; blocks '#', '_', '.'; arrows '>'; anything else '?').
    """
    name = codec_name(encoding)
    if name in ("utf-8", "utf-16", "utf-32", "gb18030"):  # every character fits: no cost at all
        return None
    table = _StandIns(name)

    def translate(text: str) -> str:
        return text if text.isascii() else text.translate(table)

    return translate


def safe_text(text: str, encoding: str) -> str:
    """``text`` as ``encoding`` can carry it (stand-ins for the rest), for one-shot output."""
    translate = translator(encoding)
    return text if translate is None else translate(text)
