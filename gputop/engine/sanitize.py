"""One sanitiser for every string another user (or the driver) controls.

Command lines, process names, environments, user and host names are written by other users on
shared boxes; gputop is often run by root and prints them to a terminal, a CSV, a Prometheus label
or a log. A control character there can retitle or clear the terminal (``ESC ] 0 ;``, ``ESC [ 2 J``,
the C1 ``CSI`` U+009B), a newline can forge a log line or a CSV row, a bidi override can make a
command read backwards, and an invisible character can make one name pass for another (a process
named ``s\\u200bsh`` reads ``ssh``). So each such string is cleaned once, where it enters the model
(the process reader, the driver layer, the environment reader, the fleet client), and every view
prints it as it is.

Unsafe characters are shown, not dropped, so the user sees that something was there:
``\\n``, ``\\t``, ``\\r`` and ``\\x1b`` for C0/DEL/C1 controls; ``\\u202e`` for bidi and
line-separator controls, every other format character (Unicode category Cf: zero-width spaces and
joiners, the BOM, the soft hyphen, tags, invisible operators) and every other default-ignorable
character (variation selectors, the combining grapheme joiner, Hangul fillers); ``\\U000e0041``
past the BMP; and ``\\xff`` for a byte that was not valid UTF-8 (Python decodes those to lone
surrogates U+DC80..U+DCFF).

Variation selectors are escaped too, even the emoji one (U+FE0F) after an emoji: they are
invisible, so ``s\\ufe0fsh`` would read ``ssh``; the supplementary ones (U+E0100..U+E01EF) are
the known way to hide bytes in text; and U+FE0F makes a character two cells wide in some
terminals and one in others, so no column could be measured right. The emoji itself stays.
"""

from __future__ import annotations

import functools
import re
import unicodedata

# C0 controls (tab and newline too: one cell, one line), DEL, C1 controls; the bidi embeddings,
# overrides, isolates and marks; the Unicode line and paragraph separators; lone surrogates.
UNSAFE_CHARS = (
    "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
)
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt, 15.1): what a renderer draws
# as nothing. unicodedata does not carry the property, so it is listed here; most are format
# characters (Cf) too, which _full_pattern() takes from unicodedata, but these are not: the
# combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian free variation
# selectors, variation selectors (Mn, Lo) and reserved code points (Cn).
IGNORABLE_CHARS = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
# The interlinear annotation characters (Cf, not default-ignorable): they hide the text between
# them in some renderers.
ANNOTATION_CHARS = "\ufff9-\ufffb"
# Known at import, so that text without a format character pays nothing for the scan below.
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}{IGNORABLE_CHARS}{ANNOTATION_CHARS}]")

# The planes where Unicode has format characters (BMP, SMP, tags); the others hold ideographs,
# private use or nothing yet.
_FORMAT_PLANES = (range(0x0000, 0x20000), range(0xE0000, 0xF0000))


@functools.cache
def _format_ranges() -> str:
    """Every format (Cf) character unicodedata knows, as a regex class body (~30 ms, once)."""
    spans: list[list[int]] = []
    for plane in _FORMAT_PLANES:
        for code in plane:
            if unicodedata.category(chr(code)) == "Cf":
                if spans and spans[-1][1] == code - 1:
                    spans[-1][1] = code
                else:
                    spans.append([code, code])
    return "".join(f"{chr(a)}-{chr(b)}" if a != b else chr(a) for a, b in spans)


@functools.cache
def _full_pattern() -> re.Pattern[str]:
    """_UNSAFE and every format character: for text that is not plainly printable."""
    return re.compile(f"[{UNSAFE_CHARS}{IGNORABLE_CHARS}{ANNOTATION_CHARS}{_format_ranges()}]")


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
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"  # as Python writes it: "\ue0041" would read as U+E004 and a "1"


def _unsafe_in(text: str) -> re.Pattern[str] | None:
    """The pattern that finds what must be escaped in ``text``; None when nothing must be.

    Runs for every command line, name and environment value each tick, so it answers in C:
    ASCII text is unsafe only if not printable (C0 and DEL); other text is checked against the
    lists above, and against unicodedata's format characters only when ``isprintable()`` says
    that some character is a control, format, separator, surrogate, private-use or unassigned
    one.
    """
    if text.isascii():
        return None if text.isprintable() else _UNSAFE
    if text.isprintable():  # no Cc, Cf, Cs, Co, Cn, Zl, Zp, nor a space but U+0020
        return None if _UNSAFE.search(text) is None else _UNSAFE
    full = _full_pattern()
    return None if full.search(text) is None else full


def clean(text: str) -> str:
    """``text`` with every control, C1, bidi, format, invisible and surrogate character written
    as an escape."""
    if text.isascii() and text.isprintable():  # the usual case, inline: nothing to copy
        return text
    pattern = _unsafe_in(text)
    return text if pattern is None else pattern.sub(_visible, text)


def clean_optional(text: str | None) -> str | None:
    """:func:`clean`, passing ``None`` through."""
    return None if text is None else clean(text)


def is_clean(text: str) -> bool:
    """True when ``text`` holds no character :func:`clean` would escape."""
    return _unsafe_in(text) is None


def json_escape(match: re.Match[str]) -> str:
    """The matched character as JSON's ``\\uXXXX`` escape (a surrogate pair past the BMP)."""
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


@functools.cache
def _json_pattern() -> re.Pattern[str]:
    """What :func:`clean` escapes but the C0 controls, which json.dumps escapes itself (and
    whose newlines ``indent`` puts between values)."""
    return re.compile("[" + _full_pattern().pattern[1:-1].replace("\x00-\x1f", "", 1) + "]")


def json_safe(document: str) -> str:
    """A JSON text from ``json.dumps(..., ensure_ascii=False)`` with the unsafe rest escaped.

    json.dumps escapes C0 controls itself; this writes the others (DEL, C1, bidi, separators,
    format and invisible characters, lone surrogates) as ``\\uXXXX``, which JSON allows anywhere
    they can occur (inside strings), so the document stays valid and equal.
    """
    if document.isascii():
        if "\x7f" not in document:
            return document
    elif _unsafe_in(document.replace("\n", "")) is None:  # indent's line breaks are no harm
        return document
    return _json_pattern().sub(json_escape, document)
