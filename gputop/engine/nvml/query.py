"""Readings a query asks for (gputop query): NVML calls named by gputop.engine.probes' tables.

The calls are named there as strings and made here only for the fields a query asked for.
Every answer is kept: a value, or why there is none (the driver's error, as Unavailable).
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable, Mapping
from typing import Any

import pynvml

from gputop.engine.in_flight import calling
from gputop.engine.model import Scalar, Unavailable
from gputop.engine.nvml.calls import MISSING, VALUE_MEMBERS
from gputop.engine.probes import TYPED, Probe
from gputop.engine.sanitize import clean

_UNAVAILABLE: dict[int, Unavailable] = {
    pynvml.NVML_ERROR_NOT_SUPPORTED: Unavailable.NOT_SUPPORTED,
    pynvml.NVML_ERROR_NO_PERMISSION: Unavailable.NO_PERMISSION,
    pynvml.NVML_ERROR_GPU_IS_LOST: Unavailable.GPU_LOST,
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: Unavailable.NOT_FOUND,
    getattr(pynvml, "NVML_ERROR_DEPRECATED", 26): Unavailable.DEPRECATED,
}


def _why(code: int) -> Unavailable:
    """An NVML return code in words (every code not named here is an unknown error)."""
    return _UNAVAILABLE.get(code, Unavailable.UNKNOWN)


def _const(arg: str | int) -> Any:
    """A probe argument: a pynvml constant by name, or the number itself."""
    return getattr(pynvml, arg) if isinstance(arg, str) else arg


class Asked:
    """The probes a query asked for, read for one GPU at a time (one driver call per source)."""

    def __init__(self, probes: Iterable[Probe], explain: Iterable[str]) -> None:
        self._probes = tuple(dict.fromkeys(probes))
        self._explain = tuple(a for a in dict.fromkeys(explain) if a in TYPED)

    def read(self, h: Any, values: Mapping[str, Any]) -> dict[str, Any]:
        """GpuSample's ``extra`` and ``unavailable`` for one GPU whose readings are ``values``."""
        # (key, probe, is an extra): an explained reading is on the sample already
        keyed = [(p.key, p, True) for p in self._probes]
        keyed += [(a, TYPED[a], False) for a in self._explain if values.get(a) is None]
        answers = self._field_values(h, [p for _, p, _ in keyed if p.field is not None])
        extra: list[tuple[str, Scalar]] = []
        unavailable: list[tuple[str, Unavailable]] = []
        for key, probe, is_extra in keyed:
            if probe.field is None and probe.source not in answers:
                answers[probe.source] = self._call(h, probe)
            answer = answers[probe.source if probe.field is None else probe.key]
            value = answer if isinstance(answer, Unavailable) else _part(answer, probe)
            if isinstance(value, Unavailable):
                unavailable.append((key, value))
            elif is_extra:
                extra.append((key, value))
        return {"extra": tuple(extra), "unavailable": tuple(unavailable)}

    @staticmethod
    def _call(h: Any, probe: Probe) -> Any:
        """The call's answer, or why there is none."""
        try:
            fn = getattr(pynvml, probe.call)
            if probe.out is not None:
                out = getattr(pynvml, probe.out)()
                if probe.version is not None:
                    out.version = getattr(pynvml, probe.version)
                with calling(probe.call):
                    fn(h, ctypes.byref(out))
                return out
            args = [_const(a) for a in probe.args]
            with calling(probe.call):
                return fn(h, *args) if probe.device else fn(*args)
        except pynvml.NVMLError as exc:
            return _why(exc.value)
        except MISSING:
            return Unavailable.NOT_FOUND

    @staticmethod
    def _field_values(h: Any, probes: list[Probe]) -> dict[Any, Any]:
        """Every wanted NVML field value in one call: value or Unavailable, by probe key."""
        wanted: dict[str, Any] = {}
        out: dict[Any, Any] = {}
        for p in probes:
            try:
                fid = getattr(pynvml, str(p.field))
                wanted[p.key] = (fid, getattr(pynvml, p.scope)) if p.scope else fid
            except AttributeError:
                out[p.key] = Unavailable.NOT_FOUND
        if not wanted:
            return out
        try:
            with calling("nvmlDeviceGetFieldValues"):
                results = pynvml.nvmlDeviceGetFieldValues(h, list(wanted.values()))
        except pynvml.NVMLError as exc:
            return {**out, **dict.fromkeys(wanted, _why(exc.value))}
        for name, v in zip(wanted, results, strict=True):
            if v.nvmlReturn != pynvml.NVML_SUCCESS:
                out[name] = _why(v.nvmlReturn)
            else:
                out[name] = getattr(v.value, VALUE_MEMBERS[v.valueType])
        return out


def _part(answer: Any, probe: Probe) -> Scalar | Unavailable:
    """The probe's value from a call's answer, as a plain int, float or str."""
    if probe.count:
        return len(answer)
    try:
        if isinstance(probe.part, int):
            answer = answer[probe.part]
        elif probe.part is not None:
            answer = _member(answer, probe.part)
    except MISSING:
        return Unavailable.NOT_FOUND
    try:
        return _scalar(answer)
    except (TypeError, ValueError):  # an answer of a shape this binding did not promise
        return Unavailable.UNKNOWN


def _member(struct: Any, name: str) -> Any:
    """A struct member; char members raw (pynvml's structs decode them as text, which fails)."""
    ctype = dict(type(struct)._fields_)[name]
    if ctype is ctypes.c_char or getattr(ctype, "_type_", None) in (ctypes.c_char, ctypes.c_uint8):
        where = getattr(type(struct), name)
        return ctypes.string_at(ctypes.addressof(struct) + where.offset, where.size)
    return getattr(struct, name)


def _scalar(value: Any) -> Scalar:
    """bytes: one byte as a number, text as text, anything else as 0x-hex (empty when all 0).

    None is a call that succeeded with nothing to return (nvmlDeviceValidateInforom): 1.
    """
    if value is None:
        return 1
    if isinstance(value, bytes):
        if len(value) == 1:
            return value[0]
        text = value.rstrip(b"\0")
        if text.isascii() and text.decode().isprintable():
            return clean(text.decode())
        return "0x" + value.hex().upper()
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, float) else int(value)
