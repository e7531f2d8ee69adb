"""sanitize: characters a terminal draws as nothing (zero-width, BOM, soft hyphen, tags, variation
selectors, fillers, every format character) are shown as escapes, so ``s\\u200bsh`` never reads
``ssh``; readable text, CJK and combining accents stay as they are, and cost no copy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata

import pytest

from gputop.engine.proc_lookup import environment, read_proc
from gputop.engine.sanitize import clean, is_clean, json_safe

# Unicode 15.1's Default_Ignorable_Code_Point (DerivedCoreProperties.txt), written out here
# from the standard, not from the module under test.
DEFAULT_IGNORABLE = [
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x061C, 0x061C),  # Arabic letter mark
    (0x115F, 0x1160),  # Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),  # Khmer inherent vowels
    (0x180B, 0x180F),  # Mongolian free variation selectors and vowel separator
    (0x200B, 0x200F),  # zero-width space, non-joiner, joiner; LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated formats
    (0x3164, 0x3164),  # Hangul filler
    (0xFE00, 0xFE0F),  # variation selectors 1-16
    (0xFEFF, 0xFEFF),  # byte order mark / zero-width no-break space
    (0xFFA0, 0xFFA0),  # halfwidth Hangul filler
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tags, variation selectors 17-256, reserved
]
IGNORABLE = [chr(c) for lo, hi in DEFAULT_IGNORABLE for c in range(lo, hi + 1)]
FORMAT = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]


def escaped(char: str) -> bool:
    """``clean`` writes ``char`` as an escape, in ASCII text and in CJK text alike."""
    for text in (f"a{char}b", f"用{char}户", char):
        out = clean(text)
        if char in out or "\\" not in out or not out.isprintable() or is_clean(text):
            return False
        if not is_clean(out):
            return False
    return True


def test_every_default_ignorable_character_is_escaped() -> None:
    assert [f"U+{ord(c):04X}" for c in IGNORABLE if not escaped(c)] == []


def test_every_format_character_unicodedata_knows_is_escaped() -> None:
    assert len(FORMAT) > 150  # Python's database is in use, not an empty list
    assert [f"U+{ord(c):04X}" for c in FORMAT if not escaped(c)] == []


def test_the_escapes_name_the_character_as_python_writes_it() -> None:
    assert clean("s\u200bsh") == "s\\u200bsh"
    assert clean("\ufeffpython") == "\\ufeffpython"
    assert clean("ad\u00admin") == "ad\\xadmin"  # soft hyphen, a Latin-1 code point
    assert clean("root\U000e0072\U000e006f") == "root\\U000e0072\\U000e006f"  # tags
    assert clean("\u3164") == "\\u3164" and clean("\u115f\u1160") == "\\u115f\\u1160"
    assert clean("x\u034fy") == "x\\u034fy"
    assert clean("\ufff9hidden\ufffb") == "\\ufff9hidden\\ufffb"  # interlinear annotation
    assert clean("a\u180eb") == "a\\u180eb" and clean("\u2060\u2064") == "\\u2060\\u2064"


def test_variation_selectors_are_escaped_even_after_an_emoji() -> None:
    # Invisible, a width terminals disagree on, and a known way to hide bytes: the emoji stays.
    assert clean("❤\ufe0f") == "❤\\ufe0f"
    assert clean("s\ufe0fsh") == "s\\ufe0fsh"
    assert clean("葛\U000e0100") == "葛\\U000e0100"


@pytest.mark.parametrize(
    "text",
    [
        "python train.py --lr=3e-4",
        "用户名 训练任务",
        "e\u0301 Z\u0334\u0322\u031balgo",  # combining marks draw on the character before them
        "é 日本語 🚀 données",
        "한국어 ㅎ",
        "\u2800",  # a braille blank is a printed character
    ],
)
def test_readable_text_is_kept_as_it_is_and_not_copied(text: str) -> None:
    assert clean(text) is text and is_clean(text)


def test_spaces_and_private_use_are_no_format_characters() -> None:
    # Not printable to Python (so they take the slow check), but drawn: kept.
    for text in ("a\u00a0b", "\u3000x", "\ue000", "a\u2003b"):
        assert clean(text) == text and is_clean(text)


def test_clean_is_idempotent_on_everything_it_escapes() -> None:
    nasty = "".join(IGNORABLE[:600] + FORMAT) + "用户\u0301 tail"
    once = clean(nasty)
    assert clean(once) == once and is_clean(once)


def test_json_safe_escapes_the_invisible_and_stays_equal() -> None:
    value = {"cmd": "s\u200bsh\ufeff\u00ad\U000e0041\ufe0f 用户", "user": "\u3164"}
    safe = json_safe(json.dumps(value, ensure_ascii=False, indent=2))
    assert json.loads(safe) == value  # past the BMP as a surrogate pair, as JSON writes it
    assert "\\udb40\\udc41" in safe
    for char in ("\u200b", "\ufeff", "\u00ad", "\U000e0041", "\ufe0f", "\u3164"):
        assert char not in safe
    assert "用户" in safe and "\n" in safe  # readable text, and indent's line breaks, stay


# Renames itself to argv[1] (PR_SET_NAME), says so, and waits.
RENAME = """
import ctypes, sys, time
ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
print("ready", flush=True)
time.sleep(60)
"""


def test_a_real_process_named_s_zwsp_sh_reads_as_escaped() -> None:
    name = "s\u200bsh"
    env = {**os.environ, "GPUTOP_TAGGED": "ok\U000e0041\U000e007f", "\ufeffBOM": "1"}
    proc = subprocess.Popen(
        [name, "-S", "-c", RENAME, name, "--user=ro\u00adot"],
        executable=sys.executable,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        info = read_proc(proc.pid, fresh=True)
        assert info.name == "s\\u200bsh"  # comm, from the kernel
        assert info.cmdline[0] == "s\\u200bsh" and info.cmdline[-1] == "--user=ro\\xadot"
        assert "\u200b" not in info.command
        shown = environment(proc.pid)
        assert shown["GPUTOP_TAGGED"] == "ok\\U000e0041\\U000e007f"
        assert shown["\\ufeffBOM"] == "1"
    finally:
        proc.kill()
        proc.wait()
