"""Messages that cross from the sampler thread into the app."""

from __future__ import annotations

from textual.message import Message

from gputop.engine.model import Snapshot


class SnapshotReady(Message):
    """A new snapshot from the sampler; a newer one replaces it while it is still queued."""

    def __init__(self, snapshot: Snapshot) -> None:
        super().__init__()
        self.snapshot = snapshot

    def can_replace(self, message: Message) -> bool:
        # Only the newest reading matters: a UI that fell behind skips straight to it.
        return isinstance(message, SnapshotReady)
