"""Constructors for the frozen, slotted dataclasses made by the hundred every tick.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (the class's
own ``__setattr__`` refuses); a ProcessRow costs about 3 µs that way. The slots' own setters,
found once, make the same object in about 2 µs. It pays where every entry and row is made anew
each tick: at 5,000 GPU processes whose readings all move, `bench gpu_procs` measured about
half the sampler's tick with it. So the driver's entries (engine/nvml/processes.py) and the
rows (engine/enrich.py) are made here, and the objects copied or unpickled field by field
(:func:`from_values`: engine/process_delta.py, engine/wire.py); nothing else is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")


def slot_maker(cls: type[T]) -> Callable[..., T]:
    """A function taking every field of ``cls`` by keyword (no defaults: each must be given)
    that returns the object its ``__init__`` would. Only for classes whose ``__init__`` does
    nothing else (no ``__post_init__``, no ``init=False`` fields)."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__}: not a slotted dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has __post_init__: its __init__ does more than set")
    fields = dataclasses.fields(cls)
    if any(not f.init for f in fields):
        raise TypeError(f"{cls.__name__} has fields its __init__ does not take")
    names = [f.name for f in fields]
    env: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    env.update({f"_set_{name}": getattr(cls, name).__set__ for name in names})
    lines = [f"def make(*, {', '.join(names)}):", "    o = _new(_cls)"]
    lines += [f"    _set_{name}(o, {name})" for name in names]
    lines.append("    return o")
    exec("\n".join(lines), env)  # field names are identifiers of our own classes
    make: Callable[..., T] = env["make"]
    make.__qualname__ = make.__name__ = f"make_{cls.__name__}"
    return make


_NAMES: dict[type, tuple[str, ...]] = {}
_SLOTS: dict[type, tuple[Any, ...]] = {}  # the class's slot descriptors, in field order


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of the dataclass ``cls``, in order (looked up once)."""
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def from_values(cls: type[T], values: Iterable[Any]) -> T:
    """A slotted dataclass from all its field values, in field order, without its __init__:
    what it would make, set through the slots' own setters (found once)."""
    slots = _SLOTS.get(cls)
    if slots is None:
        slots = _SLOTS[cls] = tuple(getattr(cls, name) for name in field_names(cls))
    obj: T = object.__new__(cls)
    for slot, value in zip(slots, values, strict=True):
        slot.__set__(obj, value)
    return obj
