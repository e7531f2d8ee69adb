"""History: bounded ring buffers, aligned series, peaks, flat memory over a long run."""

from __future__ import annotations

import threading
import tracemalloc
from dataclasses import replace

import pytest

from gputop.engine.history import METRICS, History
from gputop.engine.model import ProcessRow, ProcInfo, ProcState, Snapshot
from tests.fakes import GiB, lost_gpu, make_gpu, make_snapshot


def _snap(seq: int, used_gib: int = 20, gpus: int = 2) -> Snapshot:
    return make_snapshot(
        seq, gpus=tuple(make_gpu(i, memory_used_bytes=used_gib * GiB) for i in range(gpus))
    )


def _with_process(snap: Snapshot, pid: int, created: float, used: int) -> Snapshot:
    row = ProcessRow(
        pid=pid,
        info=ProcInfo(pid=pid, create_time=created),
        states=(ProcState.ACTIVE,),
        used_memory_bytes=used,
    )
    return replace(snap, processes=(row,))


def test_bounded_and_oldest_first() -> None:
    h = History(maxlen=3)
    for seq in range(1, 6):
        h.append(_snap(seq, used_gib=seq))
    assert len(h) == 3
    assert h.times() == [1_700_000_003.0, 1_700_000_004.0, 1_700_000_005.0]
    assert h.series(0, "memory_used_bytes") == [3 * GiB, 4 * GiB, 5 * GiB]
    assert h.gpu_peak_memory_bytes(0) == 5 * GiB  # peaks outlive the window


def test_series_aligned_with_times_when_a_gpu_is_lost() -> None:
    h = History(maxlen=10)
    h.append(_snap(1))
    h.append(make_snapshot(2, gpus=(make_gpu(0), lost_gpu(1))))
    h.append(make_snapshot(3, gpus=(make_gpu(0, temperature_c=None),)))
    assert h.series(1, "temperature_c") == [60, None, None]
    assert h.series(0, "temperature_c") == [60, 60, None]
    assert h.series(7, "power_draw_mw") == [None, None, None]
    assert len(h.times()) == 3


@pytest.mark.parametrize("metric", METRICS)
def test_every_metric_is_a_gpu_field(metric: str) -> None:
    h = History()
    gpu = make_gpu(0)
    h.append(make_snapshot(1, gpus=(gpu,)))
    assert h.series(0, metric) == [getattr(gpu, metric)]


def test_unknown_metric() -> None:
    with pytest.raises(ValueError, match="unknown metric 'fan'"):
        History().series(0, "fan")


def test_process_peak_is_per_identity() -> None:
    h = History()
    h.append(_with_process(_snap(1), 10, 1.0, 5 * GiB))
    h.append(_with_process(_snap(2), 10, 1.0, 2 * GiB))
    h.append(_with_process(_snap(3), 10, 2.0, GiB))  # PID 10 reused by another process
    assert h.process_peak_memory_bytes(10, 1.0) == 5 * GiB
    assert h.process_peak_memory_bytes(10, 2.0) == GiB
    assert h.process_peak_memory_bytes(11, 1.0) is None


def test_old_process_peaks_are_forgotten() -> None:
    h = History(maxlen=5)
    for seq in range(1, 40):
        h.append(_with_process(_snap(seq), 1000 + seq, float(seq), GiB))
    assert h.tracked_processes() <= 2 * 5
    assert h.process_peak_memory_bytes(1039, 39.0) == GiB


def test_a_row_kept_longer_than_the_history_keeps_its_peak_and_new_rows_move_it() -> None:
    # The sampler hands History the very row object while a process is unchanged (issue 17):
    # History looks only at rows that are new objects, yet forgets nothing still listed.
    h = History(maxlen=5)
    kept = _with_process(_snap(1), 10, 1.0, 3 * GiB)
    for seq in range(1, 30):
        h.append(replace(kept, seq=seq))  # the same rows tuple, tick after tick
    assert h.process_peak_memory_bytes(10, 1.0) == 3 * GiB
    row = kept.processes[0]
    other = replace(row, pid=11, info=ProcInfo(pid=11, create_time=2.0))
    less = replace(row, used_memory_bytes=GiB)  # the same process, a new row
    h.append(replace(kept, processes=(less, other)))
    assert h.process_peak_memory_bytes(10, 1.0) == 3 * GiB
    more = replace(row, used_memory_bytes=4 * GiB)
    h.append(replace(kept, processes=(more, other)))
    assert h.process_peak_memory_bytes(10, 1.0) == 4 * GiB
    newcomer = replace(row, pid=12, info=ProcInfo(pid=12, create_time=3.0), used_memory_bytes=GiB)
    h.append(replace(kept, processes=(newcomer, other)))  # another process in the same place
    assert h.process_peak_memory_bytes(12, 3.0) == GiB
    assert h.process_peak_memory_bytes(10, 1.0) == 4 * GiB
    for seq in range(40, 52):  # processes 10 and 12 gone for longer than the history
        h.append(replace(kept, seq=seq, processes=(other,)))
    assert h.process_peak_memory_bytes(10, 1.0) is None
    assert h.process_peak_memory_bytes(12, 3.0) is None
    assert h.process_peak_memory_bytes(11, 2.0) == 3 * GiB
    assert h.tracked_processes() == 1


def test_memory_flat_over_many_ticks() -> None:
    """A new process every tick (the worst case for peak tracking) still keeps memory flat."""
    h = History(maxlen=100)
    base = _snap(1)
    tracemalloc.start()
    try:
        for i in range(1000):
            h.append(_with_process(base, 5000 + i, float(i), GiB + i))
        early, _ = tracemalloc.get_traced_memory()
        for i in range(1000, 6000):
            h.append(_with_process(base, 5000 + i, float(i), GiB + i))
        late, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert late < early * 1.2 + 50_000
    assert h.tracked_processes() <= 200


def test_ten_minutes_of_eight_gpus_fit_in_half_a_mib() -> None:
    """The series are machine integers: a full history of a busy 8-GPU box (every value a
    large number) costs well under the ~1.8 MiB a dict of tuples of Python ints a tick did."""
    h = History()  # HISTORY_TICKS: ten minutes at 1 s
    gpus = [
        make_gpu(
            i,
            memory_used_bytes=40 * GiB + i,
            power_draw_mw=400_000 + i,
            clock_sm_mhz=1980 + i,
            clock_memory_mhz=2619 + i,
            pcie_rx_kbps=1_000_000 + i,
            pcie_tx_kbps=2_000_000 + i,
        )
        for i in range(8)
    ]
    snaps = [make_snapshot(seq, gpus=tuple(gpus)) for seq in range(h.maxlen + 50)]
    tracemalloc.start()
    try:
        for snap in snaps:
            h.append(snap)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 512 * 1024, held
    assert h.series(7, "pcie_tx_kbps")[-1] == 2_000_007 and len(h) == h.maxlen


def test_a_gpu_seen_late_has_none_before_and_wraps_with_the_ring() -> None:
    h = History(maxlen=4)
    h.append(make_snapshot(1, gpus=(make_gpu(0, temperature_c=50),)))
    h.append(make_snapshot(2, gpus=(make_gpu(0, temperature_c=51), make_gpu(3, temperature_c=70))))
    assert h.series(3, "temperature_c") == [None, 70]
    for seq in range(3, 8):
        h.append(make_snapshot(seq, gpus=(make_gpu(0, temperature_c=50 + seq),)))
    assert h.series(0, "temperature_c") == [54, 55, 56, 57]
    assert h.series(3, "temperature_c") == [None, None, None, None]  # its 70 left the window
    assert h.tail(0, ("temperature_c",), 2) == (7, [[56, 57]])


def test_tail_reads_the_newest_values_of_several_metrics_and_the_sample_count() -> None:
    history = History(maxlen=5)
    for i in range(8):
        gpu = make_gpu(0, utilization_gpu_percent=i, memory_used_bytes=100 * i)
        history.append(make_snapshot(i, gpus=(gpu,)))
    count, (util, memory) = history.tail(0, ("utilization_gpu_percent", "memory_used_bytes"), 3)
    assert count == history.count == 8
    assert util == [5, 6, 7] and memory == [500, 600, 700]
    assert history.tail(0, ("utilization_gpu_percent",), 50)[1][0] == [3, 4, 5, 6, 7]  # bounded
    assert history.tail(9, ("utilization_gpu_percent",), 2)[1][0] == [None, None]  # unknown GPU
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        history.tail(0, ("nope",), 1)


def test_reads_are_whole_while_another_thread_appends() -> None:
    """The sampler appends on its thread while the UI reads: each read sees one moment."""
    history = History(maxlen=50)
    done = threading.Event()

    def sampler() -> None:
        for i in range(3000):
            gpu = make_gpu(0, utilization_gpu_percent=i % 100, memory_used_bytes=i)
            history.append(make_snapshot(i + 1, gpus=(gpu,)))
        done.set()

    thread = threading.Thread(target=sampler)
    thread.start()
    metrics = ("utilization_gpu_percent", "memory_used_bytes")
    last = reads = 0
    while not done.is_set() or reads == 0:
        count, (util, memory) = history.tail(0, metrics, 50)
        assert len(memory) == min(count, 50) and count >= last
        assert memory == list(range(count - len(memory), count))  # the newest, no gap
        assert util == [m % 100 for m in memory]  # both columns from the same ticks
        last, reads = count, reads + 1
    thread.join()
    assert history.count == 3000
