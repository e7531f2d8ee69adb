"""Glyph choice by encoding and locale, and the cell-for-cell ASCII translation."""

from __future__ import annotations

import io
import unicodedata

import pytest

from gputop import glyphs, units
from gputop.glyphs import ASCII, UNICODE


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("utf-8", UNICODE),
        ("UTF8", UNICODE),
        ("utf_16", UNICODE),
        ("ascii", ASCII),
        ("ANSI_X3.4-1968", ASCII),  # what nl_langinfo calls ASCII in the C locale
        ("latin-1", ASCII),  # has '°' and '·', not '→' or '█'
        ("ISO-8859-15", ASCII),
        ("cp1252", ASCII),
        ("no-such-codec", ASCII),
        (None, ASCII),
    ],
)
def test_the_glyph_set_follows_the_encoding(encoding: str | None, expected: object) -> None:
    assert glyphs.for_encoding(encoding) is expected


def test_the_ascii_set_is_ascii_and_the_sets_agree_in_shape() -> None:
    for value in (ASCII.arrow, ASCII.ellipsis, ASCII.degree, ASCII.dot, ASCII.spark):
        assert value.isascii()
    assert ASCII.bar_full.isascii() and ASCII.up.isascii() and ASCII.down.isascii()
    assert len(ASCII.spark) == len(UNICODE.spark) == 9
    assert len(UNICODE.bar_partials) == 7 and ASCII.bar_partials == ""


def stream(encoding: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding=encoding)


@pytest.mark.parametrize(
    ("encoding", "environ", "expected"),
    [
        ("utf-8", {"LANG": "en_US.UTF-8"}, "utf-8"),
        ("utf-8", {}, "utf-8"),
        ("utf-8", {"LANG": "C"}, "utf-8"),  # Python's own choice in the C locale (PEP 538)
        ("ascii", {"LANG": "en_US.UTF-8", "PYTHONIOENCODING": "ascii"}, "ascii"),
        ("latin-1", {"LANG": "en_US.ISO-8859-1"}, "iso8859-1"),
        # The locale is not installed (or UTF-8 mode): Python writes UTF-8, the terminal is not.
        ("utf-8", {"LANG": "en_US.ISO-8859-1"}, "ascii"),
        ("utf-8", {"LC_ALL": "de_DE.ISO-8859-15@euro", "LANG": "en_US.UTF-8"}, "ascii"),
        ("utf-8", {"LC_CTYPE": "en_US.UTF-8", "LANG": "en_US.ISO-8859-1"}, "utf-8"),
        # An explicit PYTHONIOENCODING wins over the locale.
        ("utf-8", {"LANG": "en_US.ISO-8859-1", "PYTHONIOENCODING": "utf-8"}, "utf-8"),
    ],
)
def test_the_output_encoding_weighs_the_stream_and_the_locale(
    encoding: str, environ: dict[str, str], expected: str
) -> None:
    assert glyphs.output_encoding(stream(encoding), environ) == expected


def test_for_stream_gives_ascii_for_an_ascii_stream() -> None:
    assert glyphs.for_stream(stream("ascii"), {}) is ASCII
    assert glyphs.for_stream(stream("utf-8"), {"LANG": "en_US.UTF-8"}) is UNICODE
    assert glyphs.for_stream(None, {}) is UNICODE


def test_no_translation_at_all_where_unicode_is_fine() -> None:
    assert glyphs.translator("utf-8") is None
    assert glyphs.translator("UTF8") is None
    assert glyphs.safe_text("61°C → █", "utf-8") == "61°C → █"


# What Textual writes for a rounded panel border with a title, a bar and a sparkline.
TEXTUAL_FRAME = (
    "\x1b[1;1H\x1b[38;2;80;80;80m╭─ GPU 0 · A100 ──────╮\x1b[0m"
    "\x1b[2;1H│ UTIL ████▌    61% ▁▂▃▄▅▆▇█ │"
    "\x1b[3;1H┣━━┳━━╋━━┫ ║═╔╗╚╝ ┆┊╌ ▔▏▕▎▊ ⭘ 68°C ↓2 ↑3 → … ▲▼"
    "\x1b[4;1H╰────────────────────╯\x1b[?25l"
)


def test_a_textual_frame_becomes_ascii_cell_for_cell() -> None:
    translate = glyphs.translator("ascii")
    assert translate is not None
    out = translate(TEXTUAL_FRAME)
    assert out.isascii()
    assert len(out) == len(TEXTUAL_FRAME)  # every cell stays where Textual put it
    assert out == (
        "\x1b[1;1H\x1b[38;2;80;80;80m+- GPU 0 . A100 ------+\x1b[0m"
        "\x1b[2;1H| UTIL #####    61% _.:-=+*# |"
        "\x1b[3;1H+--+--+--+ |=++++ ||- -|||# ? 68 C v2 ^3 > . ^v"
        "\x1b[4;1H+--------------------+\x1b[?25l"
    )


def test_latin1_keeps_what_it_can_carry() -> None:
    out = glyphs.safe_text("│ 68°C · café → █", "latin-1")
    assert out == "| 68°C · café > #"
    out.encode("latin-1")


def test_other_characters_keep_their_width() -> None:
    translate = glyphs.translator("ascii")
    assert translate is not None
    assert translate("训练.py") == "????.py"  # wide: two cells each
    assert translate("e\u0301t\u00e9") == "ete"  # a combining accent takes no cell
    assert translate("\u2003x\u00a0y") == " x y"
    assert translate("\U0001f525 \u2800") == "?? ?"  # emoji (wide), braille
    assert translate("\ud83d") == "?"  # a lone surrogate (from a bad file name)


@pytest.mark.parametrize(("first", "last"), [(0x2500, 0x257F), (0x2580, 0x259F)])
def test_every_box_drawing_and_block_character_has_a_one_cell_stand_in(
    first: int, last: int
) -> None:
    for code in range(first, last + 1):
        char = chr(code)
        stand_in = glyphs.stand_in(char)
        assert len(stand_in) == 1 and stand_in.isascii(), (unicodedata.name(char), stand_in)
        assert stand_in != "?", unicodedata.name(char)


@pytest.mark.parametrize(
    ("char", "expected"),
    [
        ("─", "-"),
        ("━", "-"),
        ("═", "="),
        ("╌", "-"),
        ("╴", "-"),
        ("│", "|"),
        ("┃", "|"),
        ("║", "|"),
        ("╷", "|"),
        ("┌", "+"),
        ("╭", "+"),
        ("╬", "+"),
        ("┤", "+"),
        ("\u2571", "/"),
        ("╲", "\\"),
        ("\u2573", "X"),
        ("█", "#"),
        ("▌", "#"),
        ("▏", "|"),
        ("▔", "-"),
        ("▀", '"'),
        ("▁", "_"),
        ("▄", "-"),
        ("░", "."),
        ("▚", "#"),
    ],
)
def test_stand_ins(char: str, expected: str) -> None:
    assert glyphs.stand_in(char) == expected


def test_temperature_without_a_degree_sign() -> None:
    assert units.temperature(61) == "61°C"
    assert units.temperature(61, ASCII.degree) == "61C"
    assert units.temperature(None, "") == "N/A"
