"""The driver process's message format: whole snapshots survive the pipe, bad streams do not."""

from __future__ import annotations

import os
import struct
from dataclasses import replace

import pytest

from gputop import sim
from gputop.engine.model import GpuProcess, ProcessType
from gputop.engine.nvml import NvmlSource
from gputop.engine.wire import Interner, Sender, WireError, dumps, receive


def test_a_whole_snapshot_crosses_the_pipe_unchanged() -> None:
    sim.install("dgx", sim.ManualClock(30.0))
    try:
        source = NvmlSource(simulated=True, environ={})
        snap = source.snapshot()
        source.close()
    finally:
        sim.uninstall()
    read_end, write_end = os.pipe()
    try:
        Sender(write_end).send(("snap", 7, snap))
        os.close(write_end)
        kind, seq, got = receive(read_end) or ("", 0, None)
        assert (kind, seq) == ("snap", 7)
        assert got == snap  # every field, every GPU, every process
        assert got.gpus[0].processes[0].type is snap.gpus[0].processes[0].type
        assert receive(read_end) is None  # the writer has gone: end of file, not an error
    finally:
        os.close(read_end)


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack("!I", 2**31) + b"x",  # a length no message has
        struct.pack("!I", 5) + b"hello",  # not a pickle
        struct.pack("!I", len(dumps(("x",))) - 1) + dumps(("x",))[:-1],  # cut short
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


def test_the_interner_keeps_equal_entries_of_consecutive_readings_the_same_objects() -> None:
    # Issue 17: the sampler keeps a row whose driver entries are the last reading's objects.
    idle = GpuProcess(pid=10, gpu_index=0, type=ProcessType.COMPUTE, used_memory_bytes=1 << 30)
    busy = replace(idle, pid=11, sm_util_percent=40)
    interner = Interner((GpuProcess,))

    def over_the_pipe(*entries: GpuProcess) -> tuple[GpuProcess, ...]:
        read_end, write_end = os.pipe()
        try:
            Sender(write_end).send(("snap", 1, entries))
            message = receive(read_end, interner)
        finally:
            os.close(read_end)
            os.close(write_end)
        assert message is not None
        interner.next_reading()
        return message[2]

    first = over_the_pipe(idle, busy)
    second = over_the_pipe(idle, replace(busy, sm_util_percent=41))
    assert second[0] is first[0] and second[0] == idle
    assert second[1] is not first[1] and second[1].sm_util_percent == 41
    over_the_pipe(busy)
    third = over_the_pipe(idle)  # two readings later: the old object is forgotten (bounded)
    assert third[0] == idle and third[0] is not first[0]
