"""--textfile as root in a folder others can write: no planted link is followed; the same bytes
as prometheus_client's writer, readable by node_exporter (0644)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from gputop.errors import UsageError
from gputop.export import prom
from gputop.export.metrics import COUNTER_FIELDS
from gputop.export.prom import TEXTFILE_NAME, SnapshotCollector, TextfileWriter, make_registry
from tests.fakes import make_gpu, make_snapshot
from tests.planted import VICTIM_TEXT, as_user, nobody, their_folder, unchanged, victim_file


class Fixed:
    def __init__(self) -> None:
        self.latest = make_snapshot(gpus=(make_gpu(0), make_gpu(1)))
        self.errors = 0
        self.restarts = 0


@pytest.fixture
def folder() -> Iterator[Path]:
    with their_folder() as path:
        yield path


def _hostile_registry() -> CollectorRegistry:
    """Label values that need escaping, a UTF-8 one, and a label name only UTF-8 escaping keeps
    (write_to_textfile's; the default would write ``gpu_uuid``)."""
    registry = CollectorRegistry()
    gauge = Gauge("gputop_test", "a test", ["host", "gpu.uuid"], registry=registry)
    gauge.labels('a"b\\c\nd', "GPU-0").set(1.5)
    gauge.labels("ホスト€", "GPU-1").set(float("nan"))
    return registry


@pytest.mark.parametrize("registry", ["hostile", "snapshot"])
def test_the_same_bytes_as_prometheus_client(tmp_path: Path, registry: str) -> None:
    reg = (
        _hostile_registry()
        if registry == "hostile"
        # A stopped clock: both writers must see the same sample age.
        else make_registry(SnapshotCollector(Fixed(), clock=lambda: 1000.0))
    )
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir()
    theirs.mkdir()
    TextfileWriter(ours, reg).write()
    write_to_textfile(str(theirs / TEXTFILE_NAME), reg)
    mine, reference = (ours / TEXTFILE_NAME).read_bytes(), (theirs / TEXTFILE_NAME).read_bytes()
    # but dcgm-exporter's counters, typed counter under their exact names (prometheus-client
    # has them as gauges: it would rename a counter NAME_total)
    for field in COUNTER_FIELDS:
        gauge, counter = (f"# TYPE {field.name} {kind}\n".encode() for kind in ("gauge", "counter"))
        if gauge in reference:
            assert counter in mine
            reference = reference.replace(gauge, counter)
    assert mine == reference


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_node_exporter_can_read_it_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    writer = TextfileWriter(tmp_path, _hostile_registry())
    old = os.umask(umask)
    try:
        writer.write()
    finally:
        os.umask(old)
    info = (tmp_path / TEXTFILE_NAME).stat()
    assert stat.S_IMODE(info.st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == [TEXTFILE_NAME]


def test_a_link_at_the_temporary_name_is_not_followed(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    victim = victim_file(folder)
    before = victim.stat()
    names = iter(["planted", "fresh"])
    monkeypatch.setattr(prom.secrets, "token_hex", lambda _n: next(names))
    planted = folder / f"{TEXTFILE_NAME}.{os.getpid()}.planted"
    as_user(nobody(), lambda: os.symlink(victim, planted))
    writer = TextfileWriter(folder, _hostile_registry())
    writer.write()
    assert unchanged(victim, before) and victim.read_text() == VICTIM_TEXT
    assert planted.is_symlink()  # theirs: left alone
    written = folder / TEXTFILE_NAME
    assert not written.is_symlink() and b"gputop_test" in written.read_bytes()
    assert written.stat().st_uid == os.geteuid()
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [TEXTFILE_NAME, planted.name, "root-only"]
    )


def test_a_link_planted_as_gputop_prom_is_replaced_not_followed(folder: Path) -> None:
    victim = victim_file(folder)
    before = victim.stat()
    target = folder / TEXTFILE_NAME
    as_user(nobody(), lambda: os.symlink(victim, target))
    TextfileWriter(folder, _hostile_registry()).write()
    assert unchanged(victim, before) and victim.read_text() == VICTIM_TEXT
    assert not target.is_symlink() and stat.S_IMODE(target.stat().st_mode) == 0o644


def test_no_fresh_name_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prom.secrets, "token_hex", lambda _n: "taken")
    (tmp_path / f"{TEXTFILE_NAME}.{os.getpid()}.taken").write_text("")
    with pytest.raises(UsageError) as info:
        TextfileWriter(tmp_path, _hostile_registry()).write()
    assert str(info.value) == (
        f"--textfile: cannot write {tmp_path / TEXTFILE_NAME}: "
        "no fresh temporary name after 10 tries"
    )
