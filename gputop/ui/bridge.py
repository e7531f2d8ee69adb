"""The app's link to the engine: the sampler it drives (real or a test's) and who the user is."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from typing import Protocol

from gputop.engine.history import History
from gputop.engine.model import Snapshot
from gputop.engine.source import Source


class SamplerLike(Protocol):
    """What the app needs from gputop.engine.sampler.Sampler (tests may pass their own)."""

    interval_s: float
    paused: bool

    @property
    def history(self) -> History:
        """The one history: the sampler records each fresh snapshot; the UI only reads it."""
        ...

    def start(self) -> None: ...

    def stop(self, timeout: float = 1.0) -> None: ...


SamplerFactory = Callable[[Source, Callable[[Snapshot], None], float], SamplerLike]


def default_sampler(
    source: Source, on_snapshot: Callable[[Snapshot], None], interval_s: float
) -> SamplerLike:
    """The real sampler, scanning the source's device folder for holders (asked of the source
    when first needed: a driver process may still be starting)."""
    from gputop.engine.sampler import Sampler

    return Sampler(source, on_snapshot=on_snapshot, interval_s=interval_s)


def current_user() -> str:
    """The effective user's name (as psutil reports process owners)."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())
