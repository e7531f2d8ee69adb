"""`gputop --once` text on model fakes: every flag, colour, width, LOST/ERROR, N/A."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from gputop.commands.once import OnceOptions, render_once
from gputop.engine.model import GpuSample, GpuState
from tests.commands.helpers import (
    ESC,
    enriched_snapshot,
    gpu_lines,
    nvml_procs,
    row,
    single_gpu_snapshot,
)
from tests.fakes import GiB, lost_gpu, make_gpu, make_snapshot

WIDE = 400
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def once(snapshot: object, **flags: object) -> str:
    flags.setdefault("width", WIDE)
    return render_once(snapshot, OnceOptions(**flags))  # type: ignore[arg-type]


def test_header_and_one_line_per_gpu() -> None:
    snap = make_snapshot()
    text = once(snap)
    lines = text.splitlines()
    assert text.endswith("\n")
    assert len(lines) == 3
    assert lines[0].startswith(snap.system.hostname)
    assert "550.54.15" in lines[0] and "CUDA 12.4" in lines[0]
    assert "DEMO" not in lines[0]
    assert lines[1].startswith("[0] NVIDIA A100-SXM4-80GB | ")
    assert lines[2].startswith("[1] NVIDIA A100-SXM4-80GB | ")


def test_gpu_line_readings() -> None:
    gpu = make_gpu(0, temperature_c=61, utilization_gpu_percent=85, memory_used_bytes=61234 * 2**20)
    line = gpu_lines(once(single_gpu_snapshot(gpu)))[0]
    assert "| 61°C,  85 % | 61234 / 81920 MiB |" in line


def test_demo_marker_when_simulated() -> None:
    snap = make_snapshot()
    snap = replace(snap, system=replace(snap.system, simulated=True))
    assert "DEMO" in once(snap).splitlines()[0]


def test_stale_marker() -> None:
    snap = replace(make_snapshot(), stale_s=75.0)
    assert "STALE 1m15s" in once(snap).splitlines()[0]


def test_driver_only_processes_show_pid_and_memory() -> None:
    # Snapshot.processes empty: the GPU's own NVML list is used (18 GiB for pid 4242).
    for flags in ({}, {"show_cmd": True, "show_user": True, "show_pid": True}):
        line = gpu_lines(once(make_snapshot(), **flags))[0]
        assert line.endswith("| 4242(18432M)")


@pytest.mark.parametrize(
    ("flags", "gpu1_tokens"),
    [
        ({}, "alice(10240M) bob(4096M) carol(N/A)[holder] (+5120M unattributed)"),
        ({"show_user": True}, "alice(10240M) bob(4096M) carol(N/A)[holder]"),
        ({"show_cmd": True}, "python(10240M) serve(4096M) dataloader(N/A)[holder]"),
        ({"show_pid": True}, "alice/1001(10240M) bob/2002(4096M) carol/3003(N/A)[holder]"),
        (
            {"show_cmd": True, "show_user": True, "show_pid": True},
            "alice:python/1001(10240M) bob:serve/2002(4096M) carol:dataloader/3003(N/A)[holder]",
        ),
        ({"show_cmd": True, "show_pid": True}, "python/1001(10240M) serve/2002(4096M)"),
    ],
)
def test_process_flags(flags: dict[str, bool], gpu1_tokens: str) -> None:
    lines = gpu_lines(once(enriched_snapshot(), **flags))
    assert gpu1_tokens in lines[1]


def test_multi_gpu_process_shows_each_gpus_share() -> None:
    lines = gpu_lines(once(enriched_snapshot()))
    # 1001 uses 30 GiB in all: 20480 MiB on GPU 0 and 10240 MiB on GPU 1 (NVML's per-GPU figures).
    assert lines[0].endswith("| alice(20480M)")
    assert "alice(10240M)" in lines[1]
    assert "bob" not in lines[0] and "carol" not in lines[0]


def test_process_on_several_gpus_not_listed_by_nvml_has_no_share() -> None:
    gpu0 = make_gpu(0, processes=())
    snap = replace(make_snapshot(gpus=(gpu0,)), processes=(row(7, (0, 1), memory=GiB),))
    assert gpu_lines(once(snap))[0].endswith("| alice(N/A)")


def test_unknown_user_and_name() -> None:
    rows = (row(5, (0,), user=None, name="python"), row(6, (0,), user=None, name=None, cmdline=()))
    snap = replace(make_snapshot(gpus=(make_gpu(0, processes=()),)), processes=rows)
    line = gpu_lines(once(snap, show_cmd=True, show_user=True))[0]
    assert "?:python(18432M)" in line
    assert line.endswith(" 6(18432M)")  # nothing known but the PID


def test_name_falls_back_to_argv0() -> None:
    rows = (row(5, (0,), name=None, cmdline=("/opt/bin/trainer", "--x")),)
    snap = replace(make_snapshot(gpus=(make_gpu(0, processes=()),)), processes=rows)
    assert "trainer(18432M)" in once(snap, show_cmd=True)


@pytest.mark.parametrize(
    ("flag", "present", "absent"),
    [
        ("show_fan", "60°C,  40 %,  50 %", "60°C,  50 %"),
        ("show_power", "50 %, 250 / 400 W |", "50 % | 20480"),
    ],
)
def test_fan_and_power_flags(flag: str, present: str, absent: str) -> None:
    with_flag = gpu_lines(once(make_snapshot(), **{flag: True}))[0]
    without = gpu_lines(once(make_snapshot()))[0]
    assert present in with_flag
    assert absent in without and present not in without


def test_all_none_gpu_shows_na() -> None:
    snap = single_gpu_snapshot(GpuSample(index=0))
    line = gpu_lines(once(snap, show_fan=True, show_power=True))[0]
    assert line.startswith("[0] N/A")
    assert line.count("N/A") == 8  # name, temp, fan, util, power x2, memory x2
    assert line.endswith("N/A /   N/A MiB")


def test_lost_gpu_says_lost_and_others_still_render() -> None:
    snap = make_snapshot(gpus=(make_gpu(0), lost_gpu(1)))
    lines = gpu_lines(once(snap, show_fan=True, show_power=True))
    assert "LOST (GPU is lost)" in lines[1]
    assert lines[1].startswith("[1] ")
    assert "°C" not in lines[1] and "MiB" not in lines[1]
    assert "60°C" in lines[0]


def test_error_gpu() -> None:
    gpu = GpuSample(index=0, state=GpuState.ERROR, error="Unknown Error", name="Tesla T4")
    line = gpu_lines(once(single_gpu_snapshot(gpu)))[0]
    assert line.startswith("[0] Tesla T4")
    assert "ERROR (Unknown Error)" in line


def test_cuda_index_shown_only_when_it_differs() -> None:
    same = once(make_snapshot())
    assert "→" not in same
    gpus = (make_gpu(0, cuda_index=None), make_gpu(1, cuda_index=0), make_gpu(2, cuda_index=1))
    lines = gpu_lines(once(make_snapshot(gpus=gpus)))
    assert [line.split(" ")[0] for line in lines] == ["[0→-]", "[1→0]", "[2→1]"]


def test_unknown_cuda_indices_are_not_shown() -> None:
    gpus = (make_gpu(0, cuda_index=None), make_gpu(1, cuda_index=None))
    assert "→" not in once(make_snapshot(gpus=gpus))


def test_names_are_aligned() -> None:
    gpus = (make_gpu(0, name="Tesla T4"), make_gpu(1))
    lines = gpu_lines(once(make_snapshot(gpus=gpus)))
    assert lines[0].index("|") == lines[1].index("|")
    assert lines[0].index("MiB") == lines[1].index("MiB")


def test_no_gpus() -> None:
    text = once(make_snapshot(gpus=()))
    assert gpu_lines(text) == ["no NVIDIA GPU found"]


def test_no_colour_has_no_escape_codes() -> None:
    text = once(enriched_snapshot(simulated=True), show_fan=True, show_power=True, color=False)
    assert ESC not in text


def test_colour_has_escape_codes_and_same_text() -> None:
    flags = {"show_fan": True, "show_power": True, "show_cmd": True, "show_pid": True}
    plain = once(enriched_snapshot(), **flags)
    coloured = once(enriched_snapshot(), color=True, **flags)
    assert ESC in coloured
    assert ANSI.sub("", coloured) == plain


@pytest.mark.parametrize(
    ("temperature", "style"),
    [(40, "32"), (80, "33"), (86, "91"), (95, "1;31")],
)
def test_temperature_colour_follows_slowdown_threshold(temperature: int, style: str) -> None:
    gpu = make_gpu(0, temperature_c=temperature, temperature_slowdown_c=90)
    text = once(single_gpu_snapshot(gpu), color=True)
    assert f"\x1b[{style}m{temperature}°C\x1b[0m" in text


def test_memory_colour_follows_fraction() -> None:
    gpu = make_gpu(0, memory_used_bytes=78 * GiB, memory_total_bytes=80 * GiB)
    text = once(single_gpu_snapshot(gpu), color=True)
    assert "\x1b[1;31m79872 / 81920 MiB\x1b[0m" in text


def test_stuck_process_is_marked_in_colour() -> None:
    text = once(enriched_snapshot(), color=True)
    assert "\x1b[1;31m[holder]\x1b[0m" in text


def many_processes_snapshot() -> object:
    procs = nvml_procs(0, *((10_000 + i, 1000 + i) for i in range(30)))
    gpus = (make_gpu(0, processes=procs), lost_gpu(1), GpuSample(index=2))
    snap = make_snapshot(gpus=gpus)
    rows = tuple(row(10_000 + i, (0,), memory=None) for i in range(30))
    return replace(snap, processes=rows, system=replace(snap.system, simulated=True))


@pytest.mark.parametrize("width", [20, 40, 60, 80, 100, 132])
@pytest.mark.parametrize("color", [False, True])
def test_every_line_fits_the_width(width: int, color: bool) -> None:
    text = render_once(
        many_processes_snapshot(),  # type: ignore[arg-type]
        OnceOptions(
            show_cmd=True,
            show_pid=True,
            show_user=True,
            show_fan=True,
            show_power=True,
            color=color,
            width=width,
        ),
    )
    lines = ANSI.sub("", text).splitlines()
    assert len(lines) == 4
    assert all(len(line) <= width for line in lines), [len(line) for line in lines]
    assert "…" in lines[1]  # 30 processes never fit


def test_truncated_process_list_says_how_many_are_left() -> None:
    lines = gpu_lines(once(many_processes_snapshot(), width=120))
    shown = lines[0].count("alice(")
    match = re.search(r"…\+(\d+)$", lines[0])
    assert match is not None and shown >= 1
    assert shown + int(match.group(1)) == 30


def test_narrow_width_shortens_the_name_but_keeps_the_readings() -> None:
    line = gpu_lines(once(make_snapshot(), width=60))[0]
    assert len(line) <= 60
    assert "…" in line.split("|")[0]  # the name was shortened
    assert "20480 / 81920 MiB" in line


def test_width_none_uses_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "50")
    text = render_once(many_processes_snapshot(), OnceOptions())  # type: ignore[arg-type]
    assert all(len(line) <= 50 for line in text.splitlines())
    monkeypatch.setenv("COLUMNS", "300")
    text = render_once(enriched_snapshot(), OnceOptions())
    assert "(+5120M unattributed)" in text


def two_process_snapshot() -> object:
    gpu = make_gpu(0, processes=nvml_procs(0, (1, 1000), (2, 2000)))
    rows = (row(1, (0,)), row(2, (0,), user="bob"))
    return replace(make_snapshot(gpus=(gpu,)), processes=rows)


def test_first_process_without_the_count_when_only_that_fits() -> None:
    full = gpu_lines(once(two_process_snapshot()))[0]
    assert full.endswith("| alice(1000M) bob(2000M)")
    head = full.index(" alice(")
    line = gpu_lines(once(two_process_snapshot(), width=head + len(" alice(1000M) …")))[0]
    assert line.endswith("| alice(1000M) …")
    line = gpu_lines(once(two_process_snapshot(), width=head + len(" alice(1000M) …+1")))[0]
    assert line.endswith("| alice(1000M) …+1")


def test_first_process_cut_when_it_does_not_fit_whole() -> None:
    full = gpu_lines(once(two_process_snapshot()))[0]
    head = full.index(" alice(")
    line = gpu_lines(once(two_process_snapshot(), width=head + 10))[0]
    assert line.endswith("| alice(10…")
    assert len(line) == head + 10
