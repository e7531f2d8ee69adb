"""Textual's Footer, without the keys each recompose used to leave behind.

Textual's Footer rebuilds its keys whenever the bindings change (a screen opened or closed, the
focus moved), and each key watches the Footer's ``compact``; Textual forgets a removed key's
watch only when ``compact`` changes, which it never does here, so every rebuild kept its old keys
(each help screen opened and closed left 13 behind: 130 after ten). The watches of
removed keys are dropped after each rebuild (Textualize/textual#6666; see
gputop.ui.textual_private). Every screen of gputop uses this Footer.
"""

from __future__ import annotations

from textual.widgets import Footer as TextualFooter

from gputop.ui import paint
from gputop.ui.textual_private import prune_closed_watchers


class Footer(TextualFooter):
    """Textual's Footer; after each recompose, its removed keys are let go."""

    async def recompose(self) -> None:
        await super().recompose()
        if not paint.PLAIN_TEXTUAL:
            prune_closed_watchers(self)
