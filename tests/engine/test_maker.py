"""slot_maker: the hot-path constructors make exactly what the dataclass __init__ makes."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.engine.maker import slot_maker
from gputop.engine.model import GpuProcess, ProcessRow, ProcessType, ProcInfo, ProcState


def _distinct_values(cls: type) -> dict[str, object]:
    """A value per field, each different, so that a field set into another's slot shows."""
    return {f.name: (f.name, i) for i, f in enumerate(dataclasses.fields(cls))}


@pytest.mark.parametrize("cls", [ProcessRow, GpuProcess])
def test_it_makes_what_init_makes(cls: type) -> None:
    values = _distinct_values(cls)
    made, init = slot_maker(cls)(**values), cls(**values)
    assert type(made) is cls
    assert made == init
    assert hash(made) == hash(init)
    assert all(getattr(made, name) == value for name, value in values.items())
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.pid = 1  # still frozen


def test_every_field_must_be_given() -> None:
    make = slot_maker(GpuProcess)
    with pytest.raises(TypeError):
        make(pid=1, gpu_index=0, type=ProcessType.COMPUTE)  # no defaults: none forgotten
    with pytest.raises(TypeError):
        make(**_distinct_values(GpuProcess), extra=1)
    with pytest.raises(TypeError):
        make(*_distinct_values(GpuProcess).values())  # keywords only


def test_only_for_classes_whose_init_only_sets() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived:
        a: int
        b: int = dataclasses.field(init=False, default=0)

    for cls in (Checked, Unslotted, Derived):
        with pytest.raises(TypeError):
            slot_maker(cls)
    assert slot_maker(ProcInfo)(**_distinct_values(ProcInfo)) == ProcInfo(
        **_distinct_values(ProcInfo)
    )
    row = slot_maker(ProcessRow)(**{**_distinct_values(ProcessRow), "states": (ProcState.ACTIVE,)})
    assert row.state is ProcState.ACTIVE
