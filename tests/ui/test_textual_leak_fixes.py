"""The two Textual leak fixes in gputop.ui.textual_private: they fit the pinned Textual, give
Textual's own answers, and do nothing where Textual's shape is not the one they know."""

from __future__ import annotations

import gc
import weakref

import pytest
from textual._styles_cache import StylesCache
from textual.color import Color
from textual.dom import DOMNode
from textual.reactive import reactive

from gputop.ui import textual_private as tp


class _Watched(DOMNode):
    value = reactive(0)


def test_both_fit_the_pinned_textual() -> None:
    assert tp.PRUNE_WATCHERS
    assert tp.STYLES_CACHE_FIX


def test_watchers_of_closed_nodes_are_dropped_and_the_others_kept() -> None:
    watched, gone, here = _Watched(), DOMNode(), DOMNode()
    gone.watch(watched, "value", lambda: None, init=False)
    here.watch(watched, "value", lambda: None, init=False)
    gone._closing = True  # as Textual marks a removed node
    assert tp.prune_closed_watchers(watched) == 1
    assert [node for node, _ in getattr(watched, "__watchers")["value"]] == [here]
    assert tp.prune_closed_watchers(watched) == 0


def test_without_the_known_shape_nothing_is_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    watched, gone = _Watched(), DOMNode()
    gone.watch(watched, "value", lambda: None, init=False)
    gone._closing = True
    monkeypatch.setattr(tp, "PRUNE_WATCHERS", False)
    assert tp.prune_closed_watchers(watched) == 0
    assert len(getattr(watched, "__watchers")["value"]) == 1


def test_the_colour_pairs_are_textuals_and_keep_no_styles_cache() -> None:
    original = tp._ORIGINAL_INNER_OUTER
    assert original is not None
    assert tp.stop_styles_cache_leak()
    base, background = Color(10, 20, 30), Color(200, 100, 50, 0.5)
    cache = StylesCache()
    assert cache.get_inner_outer(base, background) == original(None, base, background)
    gone = weakref.ref(cache)
    del cache
    gc.collect()
    assert gone() is None  # Textual's own method kept it, as a key of its cache


def test_a_textual_whose_method_reads_its_first_argument_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import functools

    @functools.lru_cache(4)
    def get_inner_outer(cls: object, base: object, background: object) -> object:
        return (cls, base, background)

    monkeypatch.setattr(
        tp, "_StylesCache", type("Shaped", (), {"get_inner_outer": get_inner_outer})
    )
    assert tp._inner_outer_method() is None
