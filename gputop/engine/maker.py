"""Constructors for the frozen, slotted dataclasses made by the hundred every tick.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (the class's
own ``__setattr__`` refuses); a ProcessRow costs about 3 µs that way. The slots' own setters,
found once, make the same object in about 2 µs. It pays where every entry and row is made anew
each tick: at 5,000 GPU processes whose readings all move, `bench gpu_procs` measured about
half the sampler's tick with it. So the driver's entries (engine/nvml/processes.py) and the
rows (engine/enrich.py) are made here; nothing else is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
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
