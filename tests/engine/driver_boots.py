"""Driver processes for tests (``DriverConfig.boot``): they run in a real child process.

Not a test module: gputop's driver process imports it from the installation folder.
"""

from __future__ import annotations

import os
import time

from gputop.engine import child
from gputop.engine.messages import PROTOCOL_VERSION, Hello, Start
from gputop.engine.model import SystemInfo
from gputop.engine.wire import Sender, receive
from gputop.sources import driver_process_main


def other_version() -> None:
    """A driver process of another gputop: it answers with a newer protocol, then waits."""
    replies = os.dup(1)
    os.dup2(2, 1)
    if isinstance(receive(0), Start):
        hello = Hello(
            version=PROTOCOL_VERSION + 1,
            simulated=True,
            dev_dir=os.devnull,
            system=SystemInfo(hostname="other"),
            gpus=(),
            pid=os.getpid(),
        )
        Sender(replies).send(hello)
    time.sleep(60)  # gputop must end it


def newer_serve() -> None:
    """gputop's own driver process, had its protocol moved on: it refuses gputop's Start."""
    child.PROTOCOL_VERSION = PROTOCOL_VERSION + 1
    driver_process_main()
