"""The driver process's message format: whole snapshots survive the pipe, bad streams do not."""

from __future__ import annotations

import os
import struct

import pytest

from gputop import sim
from gputop.engine.nvml import NvmlSource
from gputop.engine.wire import Sender, WireError, dumps, receive


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
