"""The pipe between gputop and its driver process: length-prefixed pickles of messages.

Both ends are gputop's own code from the same installation, started by the same user, so pickle
carries the engine's dataclasses as they are (no schema to keep in step). What may be sent is
one of gputop.engine.messages' dataclasses; anything else read is a WireError.
"""

from __future__ import annotations

import dataclasses
import io
import operator
import os
import pickle
import struct
import threading
from collections.abc import Callable
from typing import Any

from gputop.engine.maker import field_names, from_values
from gputop.engine.messages import Message

_LENGTH = struct.Struct("!I")
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # a snapshot is tens of KiB; more means a broken stream


def rebuild(cls: type, values: tuple[Any, ...]) -> Any:
    """A slotted dataclass from its field values, without running its __init__.

    Unpickling a frozen dataclass the standard way looks its fields up again for every object
    (about 13 us each; a dgx snapshot has fifty): the slots' own setters, found once, do it in
    a fraction of that (gputop.engine.maker.from_values).
    """
    fields = len(field_names(cls))
    if len(values) != fields:
        raise WireError(f"{cls.__name__}: {len(values)} values for {fields} fields")
    return from_values(cls, values)


_GETTERS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _getter(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """All field values of a slotted dataclass in one C call, or None for any other class."""
    if cls not in _GETTERS:
        slotted = dataclasses.is_dataclass(cls) and hasattr(cls, "__slots__")
        names = field_names(cls) if slotted else ()
        # attrgetter of one name returns the value itself, not a 1-tuple: those few pickle
        # the standard way.
        _GETTERS[cls] = operator.attrgetter(*names) if len(names) > 1 else None
    return _GETTERS[cls]


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        getter = _getter(cls)
        if getter is None:
            return NotImplemented
        return rebuild, (cls, getter(obj))


def dumps(message: Message) -> bytes:
    """One message's bytes (slotted dataclasses in the compact form :func:`rebuild` reads)."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(message)
    return buffer.getvalue()


class WireError(Exception):
    """The other end sent something that is not a message (or too large to be one)."""


class Sender:
    """Writes whole messages to a file descriptor; several threads may share one."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._lock = threading.Lock()

    def send(self, message: Message) -> None:
        """Write one message; raises OSError (BrokenPipeError) when the reader is gone."""
        body = dumps(message)
        data = memoryview(_LENGTH.pack(len(body)) + body)
        with self._lock:
            while data:
                written = os.write(self.fd, data)
                data = data[written:]


def receive(fd: int) -> Message | None:
    """Read one message from ``fd``; None at end of file (the writer has gone)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {length} bytes")
    body = _read_exactly(fd, length)
    if body is None:
        return None
    try:
        message = pickle.loads(body)
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign stream: no message
        raise WireError(f"unreadable message: {type(exc).__name__}") from None
    if not isinstance(message, Message):
        raise WireError(f"not a message: {type(message).__name__}")
    return message


def _read_exactly(fd: int, size: int) -> bytes | None:
    parts: list[bytes] = []
    left = size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
