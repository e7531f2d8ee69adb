"""Naming a driver crash from faulthandler's dump, and naming the call a thread is stuck in."""

from __future__ import annotations

import threading
import time

import pynvml

from gputop import sim
from gputop.engine.crash import crashed_call, describe_exit
from gputop.engine.in_flight import in_flight
from gputop.engine.nvml import NvmlSource

DUMP = """\
Fatal Python error: Segmentation fault

Thread 0x00007fa6f67f56c0 (most recent call first):
  File "/x/gputop/engine/child.py", line 112 in watchdog
  File "/usr/lib/python3.11/threading.py", line 982 in run

Current thread 0x00007fa6f7dcab80 (most recent call first):
  File "/x/site-packages/pynvml.py", line 1021 in _nvmlCheckReturn
  File "/x/site-packages/pynvml.py", line 3965 in nvmlDeviceGetPowerUsage
  File "/x/gputop/engine/nvml.py", line 82 in _read
  File "/x/gputop/engine/nvml.py", line 327 in _read_gpu
  File "<string>", line 1 in <module>
"""


def test_the_crashing_threads_public_nvml_call_is_named() -> None:
    assert crashed_call(DUMP) == (True, "nvmlDeviceGetPowerUsage")
    assert describe_exit(-11, DUMP) == "SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage"


def test_a_crash_in_our_own_ctypes_call_is_still_the_drivers() -> None:
    dump = DUMP.replace('  File "/x/site-packages/pynvml.py", line 1021 in _nvmlCheckReturn\n', "")
    dump = dump.replace(
        '  File "/x/site-packages/pynvml.py", line 3965 in nvmlDeviceGetPowerUsage\n', ""
    )
    assert crashed_call(dump) == (True, None)
    assert describe_exit(-11, dump) == "SIGSEGV in libnvidia-ml"


def test_a_crash_elsewhere_and_other_ends() -> None:
    elsewhere = 'Fatal Python error: Aborted\n\nCurrent thread 0x1:\n  File "/x/y.py", line 1 in f'

    assert describe_exit(-6, elsewhere) == "SIGABRT in the driver process"
    assert describe_exit(-9, "") == "SIGKILL in the driver process"
    assert describe_exit(-99, "") == "signal 99 in the driver process"
    said = describe_exit(1, "Traceback ...\nRuntimeError: boom\x1b[31m\n")
    assert said == "driver process exited with status 1: RuntimeError: boom\\x1b[31m"
    assert "\x1b" not in said  # a control character never reaches the header


def test_the_call_a_thread_hangs_in_is_named_by_the_driver_layer() -> None:
    lib = sim.install(sim.load_scenario("dgx"))
    try:
        source = NvmlSource(simulated=True, environ={})
        gate = threading.Event()
        lib.blocked["nvmlDeviceGetTemperature"] = gate
        reader = threading.Thread(target=source.snapshot, daemon=True)
        reader.start()
        end = time.monotonic() + 5
        call = gpu = None
        while time.monotonic() < end and call is None:
            call, gpu = in_flight().get(reader.ident or 0, (None, None))
            time.sleep(0.01)
        gate.set()
        reader.join(5)
        assert call == "nvmlDeviceGetTemperature"
        assert gpu == 0
        assert threading.get_ident() not in in_flight()  # this thread is in no NVML call
        assert reader.ident not in in_flight()  # nor is the reader, once out of the driver
        source.close()
    finally:
        sim.uninstall()
        assert pynvml.nvmlLib is None
