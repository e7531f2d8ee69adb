"""Why the driver process died, in one line, from its exit status and what it wrote on stderr.

The driver process runs with faulthandler on, so a crash inside libnvidia-ml leaves a Python
traceback on its stderr; the innermost frames name the NVML call it died in.
"""

from __future__ import annotations

import re
import signal

from gputop.engine.sanitize import clean

# faulthandler's frame lines: '  File "/x/pynvml.py", line 123 in nvmlDeviceGetPowerUsage'
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]*)", line \d+ in (?P<func>\S+)\s*$')
# Python files at the driver boundary: a crash with one of these innermost is the driver's.
# (engine/nvml.py: the driver layer's file before it became a package; its ctypes calls are
# now made in engine/nvml/pynvml_private.py.)
_BOUNDARY = (
    "pynvml.py",
    "engine/nvml.py",
    "engine/nvml/pynvml_private.py",
    "engine/nvml/calls.py",
    "sim/library.py",
)


def signal_name(number: int) -> str:
    """SIGSEGV for 11, or 'signal 99' for one without a name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def crashed_call(stderr_text: str) -> tuple[bool, str | None]:
    """(died at the driver boundary, the NVML function it died in) from a faulthandler dump.

    The dump lists the crashing thread's frames innermost first; the NVML function is the
    outermost of the innermost run of pynvml frames (pynvml's public function, not its helpers).
    """
    frames: list[tuple[str, str]] = []
    block = _last_dump(stderr_text)
    for line in block.splitlines():
        match = _FRAME.match(line)
        if match:
            frames.append((match["file"].replace("\\", "/"), match["func"]))
        elif frames:
            break  # the first thread's frames are the crashing one's
    if not frames:
        return False, None
    at_boundary = frames[0][0].endswith(_BOUNDARY)
    name: str | None = None
    for file, func in frames:
        if file.endswith("pynvml.py"):
            name = func
        elif name is not None:
            break
    if name is not None and name.startswith("_"):
        name = None  # a pynvml helper (library loading): no public call to name
    return at_boundary or name is not None, name


def _last_dump(text: str) -> str:
    """The crashing thread's part of the last dump (faulthandler lists it as the current one)."""
    at = text.rfind("Fatal Python error")
    text = text[at:] if at >= 0 else text
    current = text.find("Current thread")
    return text[current:] if current >= 0 else text


def describe_exit(returncode: int, stderr_text: str) -> str:
    """One line for the header: ``SIGSEGV in libnvidia-ml: nvmlDeviceGetPowerUsage``, ...

    ``returncode`` is Popen's: negative for a signal.
    """
    if returncode < 0:
        name = signal_name(-returncode)
        at_boundary, call = crashed_call(stderr_text)
        if call is not None:
            return f"{name} in libnvidia-ml: {call}"
        if at_boundary:
            return f"{name} in libnvidia-ml"
        return f"{name} in the driver process"
    last = [line for line in stderr_text.strip().splitlines() if line.strip()]
    tail = f": {clean(last[-1].strip())[:120]}" if last else ""
    return f"driver process exited with status {returncode}{tail}"
