"""The interactive Textual dashboard (`gputop` with no arguments)."""

from __future__ import annotations

import argparse
import os

from gputop.errors import UsageError


def run_dashboard(args: argparse.Namespace) -> int:
    """Open the source the options ask for (the demo when there is no driver) and run the app.

    A too-small terminal is not an error: the app says so until the window is resized.
    ``--no-color`` sets NO_COLOR for this process, which Textual honours natively.
    """
    from textual.theme import BUILTIN_THEMES

    from gputop.source import source_from_args
    from gputop.ui.app import make_app

    if getattr(args, "no_color", False):
        os.environ["NO_COLOR"] = "1"
    theme = getattr(args, "theme", None)
    if theme is not None and theme not in BUILTIN_THEMES:
        known = ", ".join(sorted(BUILTIN_THEMES))
        raise UsageError(f"unknown theme {theme!r}; known: {known}")
    source = source_from_args(args, fallback_to_demo=True)
    try:
        app = make_app(
            source,
            interval_s=getattr(args, "interval", 1.0),
            readonly=getattr(args, "readonly", False),
            audit_log=getattr(args, "audit_log", None),
            theme=theme,
        )
        app.run()
    finally:
        source.close()
    return 0


__all__ = ["run_dashboard"]
