"""Which CUDA device index each NVML GPU gets in a CUDA program started from this shell (pure).

NVML numbers GPUs by PCI bus id. CUDA first orders them by ``CUDA_DEVICE_ORDER``:

- ``PCI_BUS_ID``: by PCI domain, bus, device, function (what NVML and nvidia-smi use).
- ``FASTEST_FIRST`` (the default, also for unknown values): CUDA's own heuristic, which NVIDIA
  does not document. gputop approximates it as: higher compute capability first, then (where
  known) more multiprocessors, then higher maximum SM clock, ties kept in PCI bus order. On a
  box of one GPU model this is exactly PCI bus order, which is what CUDA does there.

Then ``CUDA_VISIBLE_DEVICES`` keeps and renumbers only the devices it names, in its order.
Entries are comma separated, surrounding whitespace ignored, and each is one of:

- an index into the order above, read like C's ``strtoul`` as CUDA does (``"1"``, ``"+1"``, and
  ``"1gpu"`` all mean 1);
- a GPU UUID as nvidia-smi prints it (``GPU-8932f937-d72c-...``), or any prefix of it long
  enough to name one GPU (``GPU-8932f937``); matched without regard to case. As a convenience
  gputop also accepts a prefix without ``GPU-`` when it does not start with a digit (one that
  does is an index, as in CUDA);
- a MIG device: ``MIG-<mig uuid>`` (as ``nvidia-smi -L`` prints it; a unique prefix will do)
  or the old form ``MIG-GPU-<gpu uuid>/<gi>/<ci>``. It is that MIG device (see
  :func:`cuda_mig_index_map`) on its GPU, which gputop shows with the same CUDA index, and the
  list ends after it (CUDA enumerates a single MIG instance only). A MIG UUID no GPU has is
  invalid; so is an old-form entry whose GPU instance and compute instance its GPU does not
  have, when its MIG devices are known (when they are not, the entry names the GPU). GPUs in
  MIG mode are otherwise treated as whole GPUs.

As in CUDA, the first invalid entry (negative, empty, garbage, an index out of range, an unknown
or ambiguous UUID) ends the list: the entries before it stay visible (``0,2,-1,1`` shows 0 and
2). A device named twice hides every device (CUDA reports no device then; PyTorch's
``_parse_visible_devices`` documents the same). Unset means all devices; set but empty, none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

FASTEST_FIRST = "FASTEST_FIRST"
PCI_BUS_ID = "PCI_BUS_ID"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigKey:
    """One MIG device of a GPU in MIG mode, as CUDA_VISIBLE_DEVICES can name it."""

    uuid: str  # "MIG-..."
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceKey:
    """What cuda_index_map needs to know of one NVML device (the optional fields refine order)."""

    index: int  # NVML index
    uuid: str | None = None
    pci_bus_id: str | None = None
    compute_capability: tuple[int, int] | None = None
    multiprocessor_count: int | None = None
    clock_sm_max_mhz: int | None = None
    mig_devices: tuple[MigKey, ...] = ()  # in MIG mode: its MIG devices, where known


def parse_pci_bus_id(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """``"00000000:07:00.0"`` -> (domain, bus, device, function); None when unparseable."""
    if not bus_id:
        return None
    try:
        domain, bus, rest = bus_id.strip().split(":")
        device, function = rest.split(".")
        return (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return None


def _pci_key(device: DeviceKey) -> tuple[int, tuple[int, int, int, int], int]:
    parsed = parse_pci_bus_id(device.pci_bus_id)
    # Devices without a readable bus id sort after the others, by NVML index.
    return (0, parsed, device.index) if parsed else (1, (0, 0, 0, 0), device.index)


def _speed_key(device: DeviceKey) -> tuple[tuple[int, int], int, int]:
    return (
        device.compute_capability or (0, 0),
        device.multiprocessor_count or 0,
        device.clock_sm_max_mhz or 0,
    )


def cuda_order(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> list[DeviceKey]:
    """The devices in CUDA's enumeration order before CUDA_VISIBLE_DEVICES is applied."""
    by_bus = sorted(devices, key=_pci_key)
    if environ.get("CUDA_DEVICE_ORDER", FASTEST_FIRST).strip().upper() == PCI_BUS_ID:
        return by_bus
    # sorted() is stable: equally fast devices keep PCI bus order.
    return sorted(by_bus, key=_speed_key, reverse=True)


@dataclass(frozen=True, slots=True)
class _Entry:
    kind: str  # "index", "uuid" or "mig"
    value: str  # the index as text, or the lower-cased UUID prefix


def _strtoul(text: str) -> int | None:
    """The leading decimal number of text as C's strtoul reads it; None when there is none."""
    sign = text[:1] if text[:1] in "+-" else ""
    digits = ""
    for char in text[len(sign) :]:
        if not char.isdigit():
            break
        digits += char
    if not digits:
        return None
    value = int(digits)
    return -value if sign == "-" else value


def _parse_entry(raw: str) -> _Entry | None:
    """One CUDA_VISIBLE_DEVICES entry, or None when it is syntactically invalid."""
    text = raw.strip()
    lowered = text.lower()
    if lowered.startswith("mig-"):
        return _Entry("mig", lowered[4:])
    if lowered.startswith("gpu-"):
        return _Entry("uuid", lowered) if len(lowered) > 4 else None
    if text[:1].isdigit() or text[:1] in ("+", "-"):
        number = _strtoul(text)
        return None if number is None or number < 0 else _Entry("index", str(number))
    if text and all(c in "0123456789abcdef-" for c in lowered):
        return _Entry("uuid", "gpu-" + lowered)  # an abbreviated UUID without "GPU-"
    return None


def _match_uuid(prefix: str, ordered: Sequence[DeviceKey]) -> DeviceKey | None:
    hits = [d for d in ordered if d.uuid and d.uuid.lower().startswith(prefix)]
    return hits[0] if len(hits) == 1 else None  # unknown or ambiguous: invalid


_Resolved = tuple[DeviceKey, MigKey | None]


def _match_mig(prefix: str, ordered: Sequence[DeviceKey]) -> _Resolved | None:
    """The GPU and MIG device whose MIG UUID starts with ``mig-<prefix>`` (unique), if any."""
    hits = [
        (d, m) for d in ordered for m in d.mig_devices if m.uuid.lower().startswith("mig-" + prefix)
    ]
    return hits[0] if len(hits) == 1 else None


def _match_legacy(value: str, ordered: Sequence[DeviceKey]) -> _Resolved | None:
    """``gpu-<uuid>/<gi>/<ci>``: the GPU, and its MIG device with those ids where known."""
    uuid, _, ids = value.partition("/")
    device = _match_uuid(uuid, ordered)
    if device is None:
        return None
    if not device.mig_devices:
        return device, None  # its MIG devices are not known: the entry names the GPU
    gi_text, _, ci_text = ids.partition("/")
    gi, ci = _strtoul(gi_text), _strtoul(ci_text)
    for mig in device.mig_devices:
        if (mig.gpu_instance_id, mig.compute_instance_id) == (gi, ci):
            return device, mig
    return None


def _resolve(entry: _Entry, ordered: Sequence[DeviceKey]) -> _Resolved | None:
    if entry.kind == "index":
        position = int(entry.value)
        return (ordered[position], None) if position < len(ordered) else None
    if entry.kind == "uuid":
        device = _match_uuid(entry.value, ordered)
        return None if device is None else (device, None)
    if entry.value.startswith("gpu-"):  # legacy MIG-GPU-<uuid>/<gi>/<ci>
        return _match_legacy(entry.value, ordered)
    return _match_mig(entry.value, ordered) if entry.value else None


def _visible(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> list[_Resolved]:
    """The devices a CUDA program would see, in CUDA index order, each with the MIG device
    that it is in that program (None: the whole GPU)."""
    ordered = cuda_order(devices, environ)
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return [(d, None) for d in ordered]
    entries: list[_Entry] = []
    for raw in visible.split(","):
        entry = _parse_entry(raw)
        if entry is None:
            break
        entries.append(entry)
    if len(set(entries)) != len(entries):
        return []  # the same entry twice: CUDA sees no device at all
    chosen: list[_Resolved] = []
    for entry in entries:
        resolved = _resolve(entry, ordered)
        if resolved is None:
            break
        if any(resolved[0] == device for device, _ in chosen):
            return []  # two entries naming one device, e.g. "0,GPU-<uuid of 0>"
        chosen.append(resolved)
        if entry.kind == "mig":
            break  # CUDA enumerates a single MIG instance
    return chosen


def visible_devices(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> list[DeviceKey]:
    """The devices a CUDA program would see, in CUDA index order."""
    return [device for device, _ in _visible(devices, environ)]


def cuda_index_map(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> dict[int, int]:
    """NVML index -> CUDA index; NVML devices a CUDA program would not see are absent.

    A GPU whose MIG device CUDA_VISIBLE_DEVICES names has that device's CUDA index.
    """
    return {d.index: i for i, (d, _) in enumerate(_visible(devices, environ))}


def cuda_mig_index_map(devices: Sequence[DeviceKey], environ: Mapping[str, str]) -> dict[str, int]:
    """MIG device UUID -> CUDA index, for the MIG device CUDA_VISIBLE_DEVICES names (if any)."""
    return {m.uuid: i for i, (_, m) in enumerate(_visible(devices, environ)) if m is not None}
