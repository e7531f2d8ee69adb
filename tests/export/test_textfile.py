"""--textfile: node_exporter's textfile collector never sees a half-written gputop.prom."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gputop.engine.model import Snapshot
from gputop.errors import UsageError
from gputop.export.prom import TEXTFILE_NAME, SnapshotCollector, TextfileWriter, make_registry
from tests.fakes import make_gpu, make_snapshot

SMALL = make_snapshot(gpus=tuple(make_gpu(i) for i in range(2)))
LARGE = make_snapshot(gpus=tuple(make_gpu(i) for i in range(32)))  # ~50 kB of text


class Flipping:
    """A sampler stand-in whose latest snapshot the writer thread swaps."""

    def __init__(self) -> None:
        self.latest: Snapshot = SMALL
        self.errors = 0
        self.restarts = 0


def _check_complete(text: str) -> int:
    """Parse the whole file; return how many GPUs it describes."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "gputop_info" in families, "file ends before its last family"
    assert text.endswith("\n")
    return len(families["DCGM_FI_DEV_GPU_UTIL"].samples)


def test_reader_never_sees_a_half_written_file(tmp_path: Path) -> None:
    holder = Flipping()
    writer = TextfileWriter(tmp_path, make_registry(SnapshotCollector(holder)))
    writer.write()
    done = threading.Event()
    seen: list[int] = []
    errors: list[Exception] = []

    def read_loop() -> None:
        while not done.is_set():
            try:
                seen.append(_check_complete(writer.path.read_text()))
            except (AssertionError, KeyError, ValueError, OSError) as exc:  # for the test thread
                errors.append(exc)
                return

    reader = threading.Thread(target=read_loop, daemon=True)
    reader.start()
    for i in range(100):
        holder.latest = LARGE if i % 2 else SMALL
        writer.write()
    done.set()
    reader.join(10)
    assert not errors, errors[0]
    assert len(seen) > 5
    assert set(seen) <= {2, 32}
    assert [p.name for p in tmp_path.iterdir()] == [TEXTFILE_NAME]  # no temp files left


def test_textfile_folder_must_exist(tmp_path: Path) -> None:
    registry = make_registry(SnapshotCollector())
    with pytest.raises(UsageError, match="not a directory"):
        TextfileWriter(tmp_path / "missing", registry)


def test_unwritable_textfile_is_one_line_error(tmp_path: Path) -> None:
    registry = make_registry(SnapshotCollector())
    writer = TextfileWriter(tmp_path, registry)
    (tmp_path / TEXTFILE_NAME).mkdir()  # rename over a directory fails, even for root
    with pytest.raises(UsageError, match="cannot write") as info:
        writer.write()
    assert "\n" not in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == [TEXTFILE_NAME]  # temp file cleaned up
