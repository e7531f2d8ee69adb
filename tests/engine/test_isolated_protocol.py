"""The typed conversation with real driver processes: its version, and the call it names.

Each test starts a real driver process: one that speaks another protocol version (a mixed
installation), or gputop's own on a simulated box whose driver call hangs.
"""

from __future__ import annotations

import textwrap
import threading
import time
from pathlib import Path

import pytest

from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.messages import PROTOCOL_VERSION
from gputop.engine.model import GpuState, Snapshot
from gputop.errors import DriverError
from tests.processes import gone_within

BOX = """
name = "protocol"
[[gpu]]
name = "NVIDIA H100 80GB HBM3"
count = 3
"""


def _one_line_error(boot: str, tmp_path: Path) -> tuple[DriverError, int | None]:
    path = tmp_path / "box.toml"
    path.write_text(BOX, encoding="utf-8")
    source = IsolatedSource(DriverConfig(scenario=str(path), boot=boot))
    pid = source.pid
    try:
        with pytest.raises(DriverError) as refused:
            source.wait_ready(20)
    finally:
        source.close()
    return refused.value, pid


def test_a_driver_process_of_another_version_is_one_clear_error(tmp_path: Path) -> None:
    error, pid = _one_line_error("tests.engine.driver_boots:other_version", tmp_path)
    assert type(error) is DriverError  # not a crash: no restart, no backoff
    said = str(error)
    assert said == (
        f"the driver process speaks protocol {PROTOCOL_VERSION + 1}, gputop {PROTOCOL_VERSION}: "
        "two gputop installations are mixed"
    )
    assert pid is not None and gone_within(pid, 3)  # it waited for 60 s: gputop ended it


def test_a_driver_process_refuses_a_start_of_another_version(tmp_path: Path) -> None:
    error, pid = _one_line_error("tests.engine.driver_boots:newer_serve", tmp_path)
    assert type(error) is DriverError
    assert str(error) == (
        f"gputop and its driver process speak different protocols ({PROTOCOL_VERSION} and "
        f"{PROTOCOL_VERSION + 1}): two gputop installations are mixed"
    )
    assert "\n" not in str(error)
    assert pid is not None and gone_within(pid, 3)


def test_a_call_hanging_in_the_driver_process_is_named_with_its_gpu(tmp_path: Path) -> None:
    path = tmp_path / "box.toml"
    path.write_text(
        BOX
        + textwrap.dedent("""
            [[fault]]
            call = "nvmlDeviceGetPowerUsage"
            kind = "hang"
            gpu = 2
            after_s = 2.0
            until_s = 5.0
        """),
        encoding="utf-8",
    )
    source = IsolatedSource(DriverConfig(scenario=str(path)))
    try:
        source.snapshot()
        done: list[Snapshot] = []
        note = None
        end = time.monotonic() + 10
        while note is None and time.monotonic() < end:
            # snapshot() waits out the hang; the driver process's watchdog names it meanwhile.
            reader = threading.Thread(target=lambda: done.append(source.snapshot()), daemon=True)
            reader.start()
            while reader.is_alive() and time.monotonic() < end:
                said = source.driver_note or ""
                if "nvml" in said:  # before the watchdog has spoken: "the NVIDIA driver ..."
                    note = said
                    break
                time.sleep(0.05)
        assert note is not None, "the hung call was never named"
        assert note.startswith("nvmlDeviceGetPowerUsage (GPU 2) not answering for ")
        reader.join(10)
        assert not reader.is_alive() and source.driver_note is None  # the hang ended
    finally:
        source.close()
    assert [g.state for g in done[-1].gpus] == [GpuState.OK] * 3
