"""Process lists on the driver pipe as changes (issue 17): whole again on gputop's end, with the
unchanged entries (and unchanged lists) the very objects they were."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace

import pytest

from gputop import sim
from gputop.engine.isolated import DriverConfig, IsolatedSource
from gputop.engine.messages import Reading
from gputop.engine.model import GpuProcess, GpuSample, ProcessType, Snapshot, SystemInfo
from gputop.engine.process_delta import (
    DeltaError,
    ListChange,
    ListDecoder,
    ListEncoder,
    with_processes,
)
from gputop.engine.wire import Sender, dumps, receive


def _entry(pid: int, gpu: int = 0, used_mib: int = 100, sm: int | None = 0) -> GpuProcess:
    return GpuProcess(
        pid=pid,
        gpu_index=gpu,
        type=ProcessType.COMPUTE,
        used_memory_bytes=used_mib << 20,
        sm_util_percent=sm,
    )


def _snap(*lists: tuple[GpuProcess, ...]) -> Snapshot:
    return Snapshot(
        seq=1,
        taken_at_wall=0.0,
        taken_at_mono=0.0,
        system=SystemInfo(hostname="box"),
        gpus=tuple(GpuSample(index=i, processes=p) for i, p in enumerate(lists)),
    )


def _over_the_pipe(encoder: ListEncoder, decoder: ListDecoder, snap: Snapshot) -> Snapshot:
    read_end, write_end = os.pipe()
    try:
        shell, lists = encoder.encode(snap)
        Sender(write_end).send(Reading(1, shell, lists))
        message = receive(read_end)
    finally:
        os.close(read_end)
        os.close(write_end)
    assert isinstance(message, Reading)
    return decoder.decode(message.shell, message.lists)


def test_lists_come_back_whole_through_adds_changes_and_leavers() -> None:
    encoder, decoder = ListEncoder(), ListDecoder()
    a, b, c = _entry(10), _entry(11, sm=40), _entry(12, gpu=1)
    steps = [
        _snap((a, b), (c,)),
        _snap((a, replace(b, sm_util_percent=41)), (c,)),  # a value moved
        _snap((_entry(9), a, replace(b, sm_util_percent=41)), ()),  # one came, one GPU emptied
        _snap((a,), (_entry(12, gpu=1, used_mib=5),)),  # two left, one came back changed
        _snap((replace(a, used_memory_bytes=None), _entry(8)), (_entry(12, gpu=1),)),
    ]
    for snap in steps:
        got = _over_the_pipe(encoder, decoder, snap)
        assert got == snap
        assert [[p.pid for p in g.processes] for g in got.gpus] == [
            [p.pid for p in g.processes] for g in snap.gpus
        ]


def test_unchanged_entries_and_lists_are_the_objects_of_the_last_reading() -> None:
    # The sampler keeps a row whose driver entries are the last reading's objects.
    encoder, decoder = ListEncoder(), ListDecoder()
    idle, busy = _entry(10), _entry(11, sm=40)
    first = _over_the_pipe(encoder, decoder, _snap((idle, busy), (_entry(20, gpu=1),)))
    # Equal but new objects, as a driver without the reader's own reuse makes them.
    second = _over_the_pipe(
        encoder,
        decoder,
        _snap((replace(idle), replace(busy, sm_util_percent=41)), (_entry(20, gpu=1),)),
    )
    assert second.gpus[0].processes[0] is first.gpus[0].processes[0]
    assert second.gpus[0].processes[1].sm_util_percent == 41
    assert second.gpus[1].processes is first.gpus[1].processes  # nothing changed: the same list


def test_only_what_changed_crosses_the_pipe() -> None:
    encoder = ListEncoder()
    workers = tuple(_entry(1000 + i, used_mib=200 + i % 700) for i in range(5000))
    whole = len(dumps(encoder.encode(_snap(workers))))
    moved = list(workers)
    moved[7] = replace(moved[7], sm_util_percent=30)
    shell, lists = encoder.encode(_snap(tuple(moved)))
    assert lists == (ListChange(changed=(moved[7],)),)
    assert len(dumps((shell, lists))) < whole / 100
    assert encoder.encode(_snap(tuple(moved)))[1] == (ListChange(),)  # the same tuple again


def test_with_processes_keeps_every_other_field_as_it_was() -> None:
    # A distinct value in every field (stale_s too, which == does not compare).
    values = {f.name: f"value {n}" for n, f in enumerate(dataclasses.fields(GpuSample))}
    gpu = GpuSample(**values)  # type: ignore[arg-type]  # types do not matter to a copy
    listed = (_entry(1),)
    copy = with_processes(gpu, listed)
    assert type(copy) is GpuSample
    assert copy.processes is listed
    assert {name: getattr(copy, name) for name in values} == {**values, "processes": listed}
    assert copy == replace(gpu, processes=listed)


def test_the_shell_takes_the_requests_seq() -> None:
    shell, _ = ListEncoder().encode(_snap((_entry(1),)), seq=7)
    assert shell.seq == 7
    assert shell.gpus[0].processes == ()


def test_a_list_with_a_pid_twice_goes_whole() -> None:
    encoder, decoder = ListEncoder(), ListDecoder()
    twice = (_entry(5), _entry(5, used_mib=7))
    for snap in (_snap(twice), _snap(twice), _snap((_entry(5),)), _snap(twice)):
        assert _over_the_pipe(encoder, decoder, snap) == snap


def test_a_change_that_does_not_fit_is_an_error() -> None:
    with pytest.raises(DeltaError):  # a change to a list never sent
        ListDecoder().decode(_snap(()), (ListChange(),))
    decoder = ListDecoder()
    decoder.decode(_snap((_entry(1),)), ((_entry(1),),))
    with pytest.raises(DeltaError):  # a PID in the order that was never sent
        decoder.decode(_snap(()), (ListChange(order=(1, 2)),))
    with pytest.raises(DeltaError):  # lists for another number of GPUs
        decoder.decode(_snap((), ()), ((),))


def test_the_driver_process_sends_unchanged_entries_once() -> None:
    # The real driver process on a scenario whose memory is flat: consecutive snapshots hand the
    # sampler the same entry objects for processes whose readings did not move.
    source = IsolatedSource(DriverConfig(demo="dgx"))
    try:
        first, second = source.snapshot(), source.snapshot()
    finally:
        source.close()
    pairs = [
        (a, b)
        for g1, g2 in zip(first.gpus, second.gpus, strict=True)
        for a, b in zip(g1.processes, g2.processes, strict=False)
        if a == b
    ]
    assert pairs and all(a is b for a, b in pairs)
    assert sum(len(g.processes) for g in second.gpus) == sum(len(g.processes) for g in first.gpus)


def test_the_encoder_is_fed_by_the_readers_own_reuse() -> None:
    # NvmlSource hands back the last snapshot's entry for unchanged readings, and the last
    # tuple when a whole list is unchanged, so the encoder needs no comparisons for them.
    from gputop.engine.nvml import NvmlSource

    clock = sim.ManualClock(30.0)
    sim.install("dgx", clock)
    try:
        source = NvmlSource(simulated=True, environ={})
        first = source.snapshot()
        second = source.snapshot()  # the same scenario time: every reading the same
        source.close()
    finally:
        sim.uninstall()
    for g1, g2 in zip(first.gpus, second.gpus, strict=True):
        assert g2.processes is g1.processes


def test_the_readers_partial_lists_are_what_a_fresh_reader_reads() -> None:
    # NvmlSource makes anew only the entries whose utilisation moved while the contexts and
    # memory stay (issue 17); processes that come and go, a C+G process and a GPU whose lists
    # never move are read in full or kept. Each step equals a reader with no memory of its own.
    from gputop.engine.nvml import NvmlSource
    from gputop.sim.scenario import Scenario

    busy = {"base": 40, "amp": 30, "period": 7}
    box = Scenario.from_dict(
        {
            "gpu": [
                {
                    "processes": [
                        {"pid": 10 + i, "used_memory_mib": 100 + i, "sm_util": busy if i % 3 else 0}
                        for i in range(9)
                    ]
                    + [
                        {"pid": 50, "start_s": 4, "end_s": 9, "sm_util": busy},
                        {"pid": 60, "type": "compute+graphics", "sm_util": busy},
                    ]
                },
                {"processes": [{"pid": 70, "used_memory_mib": {"base": 500, "amp": 50}}]},
                {"processes": [{"pid": 80, "used_memory_mib": 300, "sm_util": 0}]},
            ]
        }
    )
    clock = sim.ManualClock(0.0)
    sim.install(box, clock)
    try:
        kept = NvmlSource(simulated=True, environ={})
        last = kept.snapshot()
        for step in range(1, 13):
            clock.set(float(step))
            now = kept.snapshot()
            fresh = NvmlSource(simulated=True, environ={})
            whole = fresh.snapshot()
            fresh.close()
            for g_now, g_whole, g_last in zip(now.gpus, whole.gpus, last.gpus, strict=True):
                assert g_now.processes == g_whole.processes
                before = {p.pid: p for p in g_last.processes}
                for p in g_now.processes:
                    if before.get(p.pid) == p:
                        assert before[p.pid] is p  # unchanged: the very entry
            assert now.gpus[2].processes is last.gpus[2].processes
            last = now
        kept.close()
    finally:
        sim.uninstall()
