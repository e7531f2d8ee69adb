"""The driver process's message format: every message survives the pipe, bad streams do not."""

from __future__ import annotations

import dataclasses
import os
import pickle
import struct

import pytest

from gputop import sim
from gputop.engine import messages
from gputop.engine.messages import (
    Bye,
    DriverConfig,
    Flush,
    Flushed,
    GpuRead,
    Hello,
    Message,
    OpenError,
    OpenFailed,
    Pids,
    PidsFailed,
    PidsRead,
    Probes,
    Read,
    ReadFailed,
    Reading,
    Slow,
    Start,
    TerminalGuard,
)
from gputop.engine.model import GpuSample, PidMemory, Snapshot, SystemInfo
from gputop.engine.nvml import NvmlSource
from gputop.engine.probes import Probe
from gputop.engine.process_delta import ListChange
from gputop.engine.wire import Sender, WireError, dumps, receive
from gputop.errors import DriverError, DriverMissing, UsageError


def _dgx_snapshot() -> Snapshot:
    sim.install("dgx", sim.ManualClock(30.0))
    try:
        source = NvmlSource(simulated=True, environ={})
        snap = source.snapshot()
        source.close()
    finally:
        sim.uninstall()
    return snap


def _through_a_pipe(*sent: Message) -> list[Message | None]:
    read_end, write_end = os.pipe()
    try:
        sender = Sender(write_end)
        for message in sent:
            sender.send(message)
        os.close(write_end)
        return [receive(read_end) for _ in range(len(sent) + 1)]
    finally:
        os.close(read_end)


def test_a_whole_snapshot_crosses_the_pipe_unchanged() -> None:
    snap = _dgx_snapshot()
    got = _through_a_pipe(Reading(7, snap, ()))
    assert got[0] == Reading(7, snap, ())  # every field, every GPU, every process
    assert isinstance(got[0], Reading)
    assert got[0].shell.gpus[0].processes[0].type is snap.gpus[0].processes[0].type
    assert got[1] is None  # the writer has gone: end of file, not an error


def _one_of_each() -> list[Message]:
    snap = _dgx_snapshot()
    gpu = snap.gpus[0]
    config = DriverConfig(scenario="/x/box.toml", counters=True, clock_origin_mono=12.5)
    return [
        Start(config, TerminalGuard(tty_fd=5, termios_attrs=[1, 2, [b"\x03"]], fault_fd=6)),
        Start(DriverConfig(demo="dgx", boot="tests.engine.x:main")),
        Read(3, skip=(1, 2), careful=True),
        Probes((Probe(call="nvmlDeviceGetClockInfo", args=("NVML_CLOCK_SM",)),), ("fan_percent",)),
        Pids(4, (1, 2, 3)),
        Flush(5),
        Bye(),
        Hello(
            version=messages.PROTOCOL_VERSION,
            simulated=True,
            dev_dir="/tmp/box/dev",
            system=SystemInfo(hostname="box", driver_version="550.54"),
            gpus=(GpuSample(index=0, name="H100"), GpuSample(index=1, name="H100")),
            pid=os.getpid(),
        ),
        OpenFailed(OpenError.MISSING, "no NVIDIA driver"),
        Reading(6, snap, (gpu.processes, ListChange(changed=gpu.processes[:1], gone=(9,)))),
        ReadFailed(7, "NVMLError_Unknown: boom"),
        GpuRead(8, gpu),
        PidsRead(9, PidMemory(taken_at_mono=1.5, by_gpu_bytes=((0, 1024), (3, 2048)))),
        PidsFailed(10, "NVMLError: lost"),
        Slow(11, "nvmlDeviceGetPowerUsage", 2, 0.75),
        Slow(0, None, None, 0.5),
        Flushed(12),
    ]


def test_every_kind_of_message_crosses_the_pipe_unchanged() -> None:
    sent = _one_of_each()
    kinds = {type(m) for m in sent}
    every = {c for c in vars(messages).values() if isinstance(c, type) and issubclass(c, Message)}
    assert kinds == every - {Message}  # a new message kind gets a case here
    got = _through_a_pipe(*sent)
    assert got == [*sent, None]
    assert [type(m) for m in got[:-1]] == [type(m) for m in sent]


def test_messages_are_frozen_slotted_dataclasses() -> None:
    for message in _one_of_each():
        assert dataclasses.is_dataclass(message) and not hasattr(message, "__dict__")
        field = next(iter(dataclasses.fields(message)), None)
        if field is not None:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(message, field.name, None)


def test_an_error_crosses_as_its_kind_and_comes_back_as_its_class() -> None:
    for exc, cls in [
        (DriverMissing("none"), DriverMissing),
        (DriverError("mismatch"), DriverError),
        (UsageError("bad scenario"), UsageError),
    ]:
        (got, _) = _through_a_pipe(OpenFailed(OpenError.of(exc), str(exc)))
        assert isinstance(got, OpenFailed)
        raised = got.error.error(got.message)
        assert type(raised) is cls and str(raised) == str(exc)


def test_something_that_is_not_a_message_is_refused() -> None:
    body = pickle.dumps(("snap", 1, None))  # the old tuple protocol
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, struct.pack("!I", len(body)) + body)
        os.close(write_end)
        with pytest.raises(WireError, match="not a message"):
            receive(read_end)
    finally:
        os.close(read_end)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack("!I", 2**31) + b"x",  # a length no message has
        struct.pack("!I", 5) + b"hello",  # not a pickle
        struct.pack("!I", len(dumps(Flush(1))) - 1) + dumps(Flush(1))[:-1],  # cut short
    ],
)
def test_a_broken_stream_is_an_error_not_a_message(garbage: bytes) -> None:
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, garbage)
        os.close(write_end)
        with pytest.raises(WireError):
            receive(read_end)
    finally:
        os.close(read_end)
