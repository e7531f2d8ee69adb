"""`gputop export` on a driver that cannot be used, as a real process.

At start: the driver's own line and exit 2, before anything listens or is written. Later (the
driver goes away): /metrics keeps answering with gputop_driver_up 0 and no GPU series presented
as current. A driver slow to open: the exporter starts after a bounded wait and says so.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop.commands.export import OPEN_WAIT_S
from tests.export.conftest import REPO, SERVING, http_get, samples, stop_process

SCENARIOS = Path(__file__).parent / "scenarios"
INIT_FAILURES = {
    "driver_not_loaded": "the NVIDIA kernel driver is not loaded (is this a GPU machine?). "
    "Try: gputop --demo",
    "lib_rm_version_mismatch": "NVIDIA driver/library version mismatch: the driver was upgraded "
    "without a reboot (reboot, or reload the nvidia kernel modules)",
    "no_permission": "no permission to use the NVIDIA driver (check access to /dev/nvidia*)",
}
NO_LIBRARY_MESSAGE = "NVIDIA driver not found (libnvidia-ml.so.1). Try: gputop --demo"
# Loaded by every Python process started with this PYTHONPATH, the driver process too: pynvml
# cannot load libnvidia-ml, as on a machine without the driver (even on a GPU box).
NO_LIBRARY_SITE = """
import pynvml
_real = pynvml.CDLL
def _no_nvml(name, *args, **kwargs):
    if "nvidia-ml" in str(name):
        raise OSError(str(name) + ": cannot open shared object file")
    return _real(name, *args, **kwargs)
pynvml.CDLL = _no_nvml
"""


def env(extra_path: Path | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("GPUTOP")}
    path = str(REPO) if extra_path is None else f"{extra_path}{os.pathsep}{REPO}"
    return {**base, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def export(*args: str, environ: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", "export", *args],
        cwd=REPO,
        env=environ or env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A loopback port held by the test: an exporter that binds before it checks the driver
    fails on it with "address already in use" instead of the driver's reason."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def init_failing(tmp_path: Path, init_error: str) -> Path:
    path = tmp_path / f"{init_error}.toml"
    path.write_text(f'name = "broken"\ninit_error = "{init_error}"\n\n[[gpu]]\n')
    return path


@pytest.mark.parametrize("mode", ["listen", "textfile"])
@pytest.mark.parametrize("init_error", sorted(INIT_FAILURES))
def test_a_driver_that_cannot_open_is_one_line_and_exit_2(
    init_error: str, mode: str, tmp_path: Path
) -> None:
    scenario = init_failing(tmp_path, init_error)
    out = tmp_path / "textfile"
    out.mkdir()
    with busy_port() as port:
        where = ["--listen", f"127.0.0.1:{port}"] if mode == "listen" else ["--textfile", str(out)]
        started = time.monotonic()
        result = export("--scenario", str(scenario), "--interval", "1", *where)
        took_s = time.monotonic() - started
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"gputop: {INIT_FAILURES[init_error]}\n"
    assert result.stdout == ""  # never "serving ..." nor "writing ..."
    assert list(out.iterdir()) == []  # no gputop.prom, no temporary file
    assert took_s < 30


@pytest.mark.parametrize("mode", ["listen", "textfile"])
def test_no_nvidia_library_is_one_line_and_exit_2(mode: str, tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(NO_LIBRARY_SITE)
    with busy_port() as port:
        where = (
            ["--listen", f"127.0.0.1:{port}"] if mode == "listen" else ["--textfile", str(tmp_path)]
        )
        result = export("--interval", "1", *where, environ=env(tmp_path))
    assert result.returncode == 2, result.stderr
    assert result.stderr == f"gputop: {NO_LIBRARY_MESSAGE}\n"  # never the demo in its place
    assert result.stdout == ""
    assert not (tmp_path / "gputop.prom").exists()


# -- a running exporter ----------------------------------------------------------------------------


class Exporter:
    """`gputop export --scenario F` on a free loopback port, as a real process."""

    def __init__(self, scenario: Path, *args: str) -> None:
        cmd = [sys.executable, "-m", "gputop", "export", "--scenario", str(scenario)]
        self.proc = subprocess.Popen(
            [*cmd, "--listen", "127.0.0.1:0", *args],
            cwd=REPO,
            env=env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the exporter prints it once it serves
        match = SERVING.search(line)
        if match is None:
            stop_process(self.proc)
            pytest.fail(f"exporter did not start: {line!r}")
        self.url = f"http://{match.group(1)}/metrics"

    def scrape_until(self, check: object, timeout_s: float) -> str:
        """Scrape until ``check(text)`` holds; the last scrape's text."""
        deadline = time.monotonic() + timeout_s
        while True:
            text = http_get(self.url)
            if check(text):  # type: ignore[operator]
                return text
            assert time.monotonic() < deadline, f"never true; last scrape:\n{text}"
            time.sleep(0.2)

    def stop(self) -> str:
        """Stop it (SIGTERM); its stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
        _, err = self.proc.communicate(timeout=15)
        return err


def driver_up(text: str) -> float:
    ((_, value),) = samples(text, "gputop_driver_up")
    return value


def gpu_families(text: str) -> set[str]:
    """Families with a series for some GPU that claims to be a current reading."""
    per_gpu = {"gputop_process_gpu_memory_bytes", "gputop_unattributed_memory_bytes"}
    return {
        f.name
        for f in text_string_to_metric_families(text)
        if f.samples and (f.name.startswith("DCGM_FI_") or f.name in per_gpu)
    }


def test_the_driver_going_away_mid_run_is_driver_up_0_and_no_current_gpu_series() -> None:
    exporter = Exporter(SCENARIOS / "driver_goes_away.toml", "--interval", "0.5")
    try:
        healthy = http_get(exporter.url)
        assert driver_up(healthy) == 1.0
        assert {"DCGM_FI_DEV_GPU_TEMP", "gputop_process_gpu_memory_bytes"} <= gpu_families(healthy)
        assert samples(healthy, "gputop_gpu_responding") == [
            ({"gpu": "0"}, 1.0),
            ({"gpu": "1"}, 1.0),
        ]
        # at 6 s every reading crashes the driver process, and so does reopening it
        gone = exporter.scrape_until(lambda t: driver_up(t) == 0.0, timeout_s=30)
        time.sleep(1.5)  # a restart or two later: still no GPU series
        later = http_get(exporter.url)
    finally:
        err = exporter.stop()
    for text in (gone, later):
        assert driver_up(text) == 0.0
        assert gpu_families(text) == set(), text
        assert [v for _, v in samples(text, "gputop_gpu_responding")] == [0.0, 0.0]
        assert [v for _, v in samples(text, "gputop_gpu_lost")] == [0.0, 0.0]  # not lost
    assert samples(later, "gputop_sampler_restarts_total")[0][1] >= 1.0
    lines = err.splitlines()
    assert lines[0].startswith("gputop: the NVIDIA driver cannot be read: DRIVER CRASHED (")
    assert lines[0].endswith("(gputop_driver_up 0)")
    assert "Traceback" not in err


def test_a_driver_slow_to_open_starts_the_exporter_and_says_so() -> None:
    started = time.monotonic()
    exporter = Exporter(SCENARIOS / "init_hangs.toml", "--interval", "0.5")
    waited_s = time.monotonic() - started
    try:
        first = http_get(exporter.url)
        assert driver_up(first) == 0.0
        assert gpu_families(first) == set() and samples(first, "gputop_gpu_responding") == []
        # nvmlInit returns at 8 s: the GPU's series come, the driver is up
        back = exporter.scrape_until(lambda t: driver_up(t) == 1.0, timeout_s=30)
        assert "DCGM_FI_DEV_GPU_TEMP" in gpu_families(back)
        time.sleep(1.5)  # the exporter looks every interval (0.5 s), then says it on stderr
    finally:
        err = exporter.stop()
    assert OPEN_WAIT_S <= waited_s < OPEN_WAIT_S + 10
    lines = err.splitlines()
    assert "nvmlInitWithFlags not answering" in lines[0]
    assert lines[0].endswith("; starting with gputop_driver_up 0")
    assert lines[-1] == "gputop: the NVIDIA driver answers again (gputop_driver_up 1)"
    assert "Traceback" not in err
