"""One sanitiser for every string another user (or the driver) controls.

Command lines, process names, environments, user and host names are written by other users on
shared boxes; gputop is often run by root and prints them to a terminal, a CSV, a Prometheus label
or a log. A control character there can retitle or clear the terminal (``ESC ] 0 ;``, ``ESC [ 2 J``,
the C1 ``CSI`` U+009B), a newline can forge a log line or a CSV row, a bidi override can make a
command read backwards. So each such string is cleaned once, where it enters the model (the
process reader, the driver layer, the environment reader), and every view prints it as it is.

Unsafe characters are shown, not dropped, so the user sees that something was there:
``\\n``, ``\\t``, ``\\r`` and ``\\x1b`` for C0/DEL/C1 controls, ``\\u202e`` for bidi and
line-separator controls, and ``\\xff`` for a byte that was not valid UTF-8 (Python decodes those
to lone surrogates U+DC80..U+DCFF).
"""

from __future__ import annotations

import re

# C0 controls (tab and newline too: one cell, one line), DEL, C1 controls; the bidi embeddings,
# overrides, isolates and marks; the Unicode line and paragraph separators; lone surrogates.
UNSAFE_CHARS = (
    "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
)
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")


_SHORT = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}  # as Python and shells write them


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte, as os.fsdecode() hands it over
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with every control, C1, bidi and surrogate character written as an escape."""
    if _UNSAFE.search(text) is None:  # the usual case: nothing to copy
        return text
    return _UNSAFE.sub(_visible, text)


def clean_optional(text: str | None) -> str | None:
    """:func:`clean`, passing ``None`` through."""
    return None if text is None else clean(text)


def is_clean(text: str) -> bool:
    """True when ``text`` holds no character :func:`clean` would escape."""
    return _UNSAFE.search(text) is None


# What json.dumps(ensure_ascii=False) leaves raw that a terminal or a log reader must not get:
# DEL, C1, bidi and separator controls, and lone surrogates (not even encodable as UTF-8).
_JSON_UNSAFE = re.compile(
    "[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]"
)


def json_safe(document: str) -> str:
    """A JSON text from ``json.dumps(..., ensure_ascii=False)`` with the unsafe rest escaped.

    json.dumps escapes C0 controls itself; this writes the others as ``\\uXXXX``, which JSON
    allows anywhere they can occur (inside strings), so the document stays valid and equal.
    """
    if _JSON_UNSAFE.search(document) is None:
        return document
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
