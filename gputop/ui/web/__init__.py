"""`gputop web` and `gputop fleet --web`: the dashboards served to a browser by textual-serve.

:mod:`gputop.ui.web.server` (aiohttp and textual-serve: the optional ``web`` extra, imported
only when serving) and :mod:`gputop.ui.web.token` (the token every request needs). The server
itself draws nothing and reads no driver: each browser session is a dashboard process of its
own, run with Textual's web driver.
"""

from __future__ import annotations

# Where a session finds the command line it runs (JSON), read by gputop.cli.web_session: a
# session's arguments never pass through the shell textual-serve starts it with.
ARGV_ENV = "GPUTOP_WEB_ARGV"

__all__ = ["ARGV_ENV"]
