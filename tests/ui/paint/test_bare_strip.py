"""bare_strip: behaves as a Textual Strip, and painting it leaves no cycle for the collector."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gputop.ui import paint
from gputop.ui.paint.bare_strip import SUPPORTED, bare_strip

SEGMENTS = [Segment("GPU ", Style(bold=True)), Segment("98%", Style(color="red")), Segment("  ")]


@pytest.fixture
def no_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_the_installed_textual_is_supported() -> None:
    assert SUPPORTED  # else every row silently takes the slower, cyclic path


def test_a_bare_strip_paints_like_a_strip() -> None:
    bare, plain = bare_strip(list(SEGMENTS), 9), Strip(list(SEGMENTS), 9)
    console = Console()
    assert bare.render(console) == plain.render(console)
    assert (bare.text, bare.cell_length) == (plain.text, plain.cell_length)
    assert list(bare.crop(2, 6)) == list(plain.crop(2, 6))
    assert [list(s) for s in bare.divide([4, 9])] == [list(s) for s in plain.divide([4, 9])]
    assert list(bare.adjust_cell_length(12)) == list(plain.adjust_cell_length(12))
    assert list(bare.apply_style(Style(italic=True))) == list(plain.apply_style(Style(italic=True)))


@pytest.mark.parametrize(("make", "cyclic"), [(bare_strip, False), (Strip, True)])
def test_a_row_cut_at_its_end_by_the_compositor_is_freed_at_once(
    no_gc: None, make: Callable[[list[Segment], int], Strip], cyclic: bool
) -> None:
    strip = make(list(SEGMENTS), 9)
    strip.divide([9])  # what the compositor does with every full-width row it paints
    strip.crop(0, 9)
    del strip
    assert (gc.collect() > 0) is cyclic


def test_the_plain_switch_builds_textuals_own_strips(
    no_gc: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paint, "PLAIN_TEXTUAL", True)  # GPUTOP_PLAIN_TEXTUAL=1
    strip = bare_strip(list(SEGMENTS), 9)
    assert type(strip) is Strip and list(strip) == SEGMENTS and strip.cell_length == 9
    strip.divide([9])
    del strip
    assert gc.collect() > 0  # an ordinary Strip, caches (and the compositor's cycle) included
