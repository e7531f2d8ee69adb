"""sanitize: every control, C1, bidi and surrogate character is shown as an escape, never sent."""

from __future__ import annotations

import json

import pytest

from gputop.engine.sanitize import clean, clean_optional, is_clean, json_safe

UNSAFE = [
    *map(chr, range(0x00, 0x20)),
    "\x7f",
    *map(chr, range(0x80, 0xA0)),
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
    "\u2028",
    "\u2029",
    "\ud800",
    "\udfff",
    "\udcff",
]


@pytest.mark.parametrize("char", UNSAFE, ids=lambda c: f"U+{ord(c):04X}")
def test_every_unsafe_character_is_written_as_an_escape(char: str) -> None:
    out = clean(f"a{char}b")
    assert out.startswith("a\\") and out.endswith("b")
    assert out.isascii() and out.isprintable()
    assert is_clean(out) and not is_clean(char)


def test_the_escapes_say_what_was_there() -> None:
    assert clean("\x1b]0;OWNED\x07") == "\\x1b]0;OWNED\\x07"
    assert clean("\x9b2J") == "\\x9b2J"
    assert clean("\u202eevil") == "\\u202eevil"
    assert clean("two\nlines\tand\rback") == "two\\nlines\\tand\\rback"
    # A byte that was not UTF-8 reaches Python as a lone surrogate; show the byte.
    assert clean(b"bad\xff".decode("utf-8", "surrogateescape")) == "bad\\xff"


def test_ordinary_text_is_returned_as_it_is() -> None:
    for text in ("python train.py --lr=3e-4", "é 日本語 🚀", "C:\\path\\x1b", "", "a" * 10_000):
        assert clean(text) is text  # not even copied
    assert clean_optional(None) is None


def test_clean_is_idempotent() -> None:
    nasty = "".join(UNSAFE) + "tail"
    assert clean(clean(nasty)) == clean(nasty)


def test_json_safe_escapes_what_json_dumps_leaves_raw_and_stays_equal() -> None:
    value = {"cmd": "x\x9b31m\u202e\u2028\x7f\udcff \x1b é"}
    raw = json.dumps(value, ensure_ascii=False)
    safe = json_safe(raw)
    assert json.loads(safe) == value
    for char in ("\x9b", "\u202e", "\u2028", "\x7f", "\udcff", "\x1b"):
        assert char not in safe
    assert "é" in safe  # readable text stays readable
    safe.encode("utf-8")  # a lone surrogate would not even encode
