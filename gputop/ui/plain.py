"""Text that did not come from gputop's source, made safe for a widget: never read as markup.

Textual and Rich parse a ``str`` handed to Static, Label, Button, a border title, notify(), a
Rich Table or a DataTable cell as markup: ``[/]`` in a user name raises MarkupError, a clicked
``[@click=app.quit]`` runs an action, ``[link=x]root[/link]`` restyles the name and sends an
OSC 8 link. A rich :class:`~rich.text.Text` is shown as written. tests/ui/test_markup_rule.py
fails when a widget gets anything but a literal, a Text/Content or a str with ``markup=False``.
"""

from __future__ import annotations

from rich.console import JustifyMethod, OverflowMethod
from rich.style import Style
from rich.text import Text

from gputop.engine.sanitize import clean, is_clean


def plain(
    text: str,
    style: str | Style = "",
    *,
    justify: JustifyMethod | None = None,
    no_wrap: bool | None = None,
    overflow: OverflowMethod | None = None,
) -> Text:
    """``text`` as rich Text, shown as written, each line cleaned.

    The model's strings were cleaned where they entered; error texts and exception messages
    were not (a server's or the kernel's words), so a control or bidi character in any line is
    written as an escape here too. The line breaks themselves are kept.
    """
    if not is_clean(text):
        text = "\n".join(clean(line) for line in text.split("\n"))
    return Text(text, style=style, justify=justify, no_wrap=no_wrap, overflow=overflow)
