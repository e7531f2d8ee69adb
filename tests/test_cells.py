"""cells: widths, padding, cutting and scrolling in terminal cells (CJK two, combining marks none),
checked against Rich's own cutting, which Textual paints the dashboard by."""

from __future__ import annotations

import random

import pytest
from rich.cells import cell_len as rich_cell_len
from rich.cells import set_cell_size, split_text

from gputop import cells
from gputop.engine.sanitize import clean

CJK = "用户名训练"
MARKS = "Z\u0334\u0322\u031balgo"  # 8 characters, 5 cells
# What names are made of after clean(): ASCII, Latin, CJK (wide), Hangul, combining marks,
# fullwidth forms, emoji.
ALPHABET = "ab z.-_" + "éß" + CJK + "한글" + "\u0301\u0334\u0322" + "\uff21\uff22" + "🚀"


def samples(count: int = 400) -> list[str]:
    rng = random.Random(34)
    return [
        "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 24))) for _ in range(count)
    ]


def test_widths_are_rich_widths() -> None:
    assert cells.cell_len("python") == 6
    assert cells.cell_len(CJK) == 10
    assert cells.cell_len(MARKS) == 5
    assert cells.cell_len("\u0301" * 40) == 0
    for text in samples():
        assert clean(text) == text
        assert cells.cell_len(text) == rich_cell_len(text), text


def test_widths_of_joined_sequences_follow_rich() -> None:
    # Not clean text (clean() escapes joiners and VS16), but cell_len must not differ there.
    for text in ("👩\u200d💻 dev", "❤\ufe0f ok", "a\u200db"):
        assert cells.cell_len(text) == rich_cell_len(text), text


def test_measuring_keeps_no_string() -> None:
    """A dashboard's lines are new every second: measuring them must not grow Rich's cache of
    measured strings (4,096 of them, ~1.5 MiB, held for as long as gputop runs)."""
    from rich.cells import cached_cell_len

    assert rich_cell_len("UTIL █████▎ 55% ▅▆▆▆▅▄") == 22  # every character one cell
    before = cached_cell_len.cache_info().currsize
    for i in range(500):
        line = f"UTIL █████▎ {i:5d}% ▅▆▆▆▅▄"
        assert cells.cell_len(line) == len(line)
    assert cached_cell_len.cache_info().currsize == before


def test_pad_to_cells_never_cuts() -> None:
    assert cells.ljust("用户", 6) == "用户  " and cells.rjust("用户", 6) == "  用户"
    assert cells.ljust(MARKS, 7) == MARKS + "  "
    assert cells.ljust("用户名", 2) == "用户名"
    for text in samples():
        assert rich_cell_len(cells.ljust(text, 30)) == max(30, rich_cell_len(text))
        assert rich_cell_len(cells.rjust(text, 30)) == max(30, rich_cell_len(text))


def test_cut_keeps_the_longest_start_that_fits() -> None:
    assert cells.cut("用户名", 5) == "用户"  # never half a character
    assert cells.cut("用户名", 6) == "用户名"
    assert cells.cut(MARKS, 1) == "Z\u0334\u0322\u031b"  # the marks go with their Z
    assert cells.cut("abc", 0) == "" and cells.cut("abc", -3) == ""
    for text in samples():
        for width in range(0, 14):
            out = cells.cut(text, width)
            assert text.startswith(out)
            assert rich_cell_len(out) <= width
            rest = text[len(out) :]
            # Nothing more would fit, and no zero-width mark is left behind.
            assert not rest or rich_cell_len(out + rest[0]) > width


def test_truncate_ends_in_the_ellipsis_only_when_cut() -> None:
    assert cells.truncate("用户名用户名12", 8) == "用户名…"  # 7 cells: the 8th would split 用
    assert cells.truncate("用户名", 6) == "用户名"
    assert cells.truncate("alice", 3, "...") == "..."
    assert cells.truncate("alice", 2, "...") == ".."
    for text in samples():
        for width in range(1, 14):
            out = cells.truncate(text, width)
            assert rich_cell_len(out) <= width
            assert out == text or out.endswith("…")


def test_fit_is_exactly_the_width() -> None:
    for text in samples():
        for width in range(1, 14):
            assert rich_cell_len(cells.fit(text, width)) == width


@pytest.mark.parametrize("start", range(0, 12))
def test_window_is_what_rich_cuts_from_the_same_cells(start: int) -> None:
    for text in samples(150):
        for width in (1, 2, 5, 9):
            out = cells.window(text, start, width)
            assert rich_cell_len(out) == width, (text, start, width)
            # Rich: a split wide character is blanks (its split fails past the text's end)
            right = split_text(text, start)[1] if rich_cell_len(text) > start else ""
            assert out == set_cell_size(text if start == 0 else right, width), (text, start)


def test_window_blanks_a_wide_character_cut_by_either_edge() -> None:
    assert cells.window("用户名", 1, 4) == " 户 "
    assert cells.window("ab用", 0, 3) == "ab "
    assert cells.window("x" + MARKS, 1, 2) == "Z\u0334\u0322\u031ba"
    assert cells.window("plain", 2, 6) == "ain   "
