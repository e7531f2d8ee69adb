"""The driver layer (gputop.engine.nvml) on the simulated library: the real pynvml underneath."""

from __future__ import annotations

import dataclasses
import os
import random
from typing import Any

import pynvml
import pytest

from gputop import sim
from gputop.engine.model import GpuSample, GpuState, ProcessType
from gputop.engine.nvml import NvmlSource
from gputop.engine.nvml.calls import text
from gputop.engine.nvml.pynvml_private import ListBuffers, ProcessInfoV2
from gputop.errors import DriverError, UsageError
from gputop.sim.scenario import DEFAULT_READINGS, Scenario, Wave, load_scenario

MiB = 1024 * 1024

# Identity fields read even when every reading is unsupported.
IDENTITY = {
    "index",
    "state",
    "error",
    "cuda_index",
    "uuid",
    "name",
    "pci_bus_id",
    "minor_number",
    "processes",
    "mig_devices",  # a list, like processes: empty when there are none
    "extra",  # a query's extra readings and why some are missing: empty unless one asks
    "unavailable",
    "process_list_error",  # not a reading: why the list is unknown (asserted below)
}


def one_gpu(**gpu: Any) -> dict[str, Any]:
    return {"name": "t", "gpu": [{"name": "NVIDIA Test GPU", **gpu}]}


def everything_unsupported() -> dict[str, Any]:
    gpu: dict[str, Any] = dict.fromkeys(DEFAULT_READINGS, "unsupported")
    gpu.update(
        persistence="unsupported",
        mig="unsupported",
        serial="unsupported",
        compute_capability=None,
        unsupported=[
            "nvmlDeviceRegisterEvents",
            "nvmlDeviceGetMemoryInfo",
            "nvmlDeviceGetMemoryInfo_v2",
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlDeviceGetComputeMode",
            "nvmlDeviceGetTemperature",
            "nvmlDeviceGetComputeRunningProcesses_v3",
            "nvmlDeviceGetGraphicsRunningProcesses_v3",
        ],
    )
    return one_gpu(**gpu)


def test_demo_reads_every_field(sim_source: Any) -> None:
    source, _ = sim_source("demo")
    snap = source.snapshot()
    assert snap.system.driver_version == "550.54.15"
    assert snap.system.cuda_driver_version == "12.4"
    assert snap.system.nvml_version == "12.550.54.15"
    assert snap.system.simulated is True
    assert [g.name for g in snap.gpus] == ["NVIDIA A100-SXM4-80GB"] * 2 + [
        "NVIDIA L40S",
        "NVIDIA A100-SXM4-80GB",
    ]
    l40s = snap.gpus[2]
    assert l40s.state is GpuState.OK
    assert l40s.memory_total_bytes == 46068 * MiB
    assert l40s.compute_capability == (8, 9)
    assert l40s.fan_speeds_percent is not None and len(l40s.fan_speeds_percent) == 2
    assert l40s.temperature_slowdown_c == 90 and l40s.temperature_shutdown_c == 95
    assert l40s.clock_sm_max_mhz == 2520
    assert l40s.pci_bus_id == "00000000:87:00.0"
    assert l40s.uuid is not None and l40s.uuid.startswith("GPU-")
    assert {p.pid for p in l40s.processes} == {5051377, 5051502}
    procs_sum = sum(p.used_memory_bytes or 0 for p in l40s.processes)
    assert l40s.memory_used_bytes == procs_sum
    total = l40s.memory_total_bytes
    assert l40s.memory_used_bytes + (l40s.memory_free_bytes or 0) + 512 * MiB == total
    idle = snap.gpus[3]
    assert idle.throttle_reasons == ("gpu_idle",)
    assert idle.ecc_errors_uncorrected_volatile == 2
    assert [p.pid for p in idle.processes] == [5049001]  # the zombie's stand-in PID
    assert snap.gpus[0].throttle_reasons == ("sw_power_cap",)
    assert snap.gpus[0].fan_speeds_percent is None  # SXM boards have no fan


def test_every_field_has_an_na_path(sim_source: Any) -> None:
    source, _ = sim_source(everything_unsupported())
    gpu = source.snapshot().gpus[0]
    assert gpu.state is GpuState.OK
    for f in dataclasses.fields(GpuSample):
        if f.name not in IDENTITY:
            assert getattr(gpu, f.name) is None, f"{f.name} should be None (N/A)"
    assert gpu.name == "NVIDIA Test GPU"
    # An unsupported list is an unknown one, not an empty one.
    assert gpu.processes == ()
    assert gpu.process_list_error is not None and "Not Supported" in gpu.process_list_error


def test_each_field_na_on_its_own(sim_source: Any) -> None:
    """Unsupporting one reading blanks exactly the fields that come from it."""
    source, _ = sim_source(one_gpu(power_w="unsupported", processes=[{"pid": 10}]))
    gpu = source.snapshot().gpus[0]
    assert gpu.power_draw_mw is None
    assert gpu.power_limit_mw == 300_000
    assert gpu.temperature_c is not None
    assert [p.pid for p in gpu.processes] == [10]


def test_lost_gpu_is_a_state_and_others_keep_working(sim_source: Any, sim_clock: Any) -> None:
    scenario = {"gpu": [{"util_gpu": 10}, {"util_gpu": 20, "lost_after_s": 5}, {"util_gpu": 30}]}
    source, _ = sim_source(scenario)
    before = source.snapshot()
    assert [g.state for g in before.gpus] == [GpuState.OK] * 3
    sim_clock.set(6)
    after = source.snapshot()
    assert [g.state for g in after.gpus] == [GpuState.OK, GpuState.LOST, GpuState.OK]
    lost = after.gpus[1]
    assert lost.error and "lost" in lost.error
    assert lost.uuid == before.gpus[1].uuid  # identity is still known
    assert lost.utilization_gpu_percent is None
    assert [g.utilization_gpu_percent for g in after.gpus] == [10, None, 30]


@pytest.mark.parametrize("api", ["v1", "v2", "v3"])
def test_every_process_info_struct_version(sim_source: Any, api: str) -> None:
    scenario = {
        "process_api": api,
        "gpu": [
            {
                "processes": [
                    {"pid": 101, "used_memory_mib": 1000},
                    {"pid": 102, "used_memory_mib": 2000, "type": "graphics"},
                ]
            }
        ],
    }
    source, lib = sim_source(scenario)
    procs = source.snapshot().gpus[0].processes
    assert [(p.pid, p.used_memory_bytes, p.type) for p in procs] == [
        (101, 1000 * MiB, ProcessType.COMPUTE),
        (102, 2000 * MiB, ProcessType.GRAPHICS),
    ]
    wanted = {
        "v3": "nvmlDeviceGetComputeRunningProcesses_v3",
        "v2": "nvmlDeviceGetComputeRunningProcesses_v2",
        "v1": "nvmlDeviceGetComputeRunningProcesses",
    }[api]
    assert lib.calls[wanted] >= 1


def test_process_in_both_lists_is_mixed_and_counted_once(sim_source: Any) -> None:
    # Each list's entry carries the process's whole memory on the GPU (as the driver's do).
    procs = [{"pid": 7, "used_memory_mib": 6100, "type": "compute+graphics"}]
    source, lib = sim_source(one_gpu(processes=procs))
    (proc,) = source.snapshot().gpus[0].processes
    assert proc.type is ProcessType.MIXED
    assert proc.used_memory_bytes == 6100 * MiB
    assert lib.calls["nvmlDeviceGetGraphicsRunningProcesses_v3"] >= 1


def test_entries_that_disagree_take_the_larger_not_the_sum(sim_source: Any) -> None:
    procs = [
        {"pid": 7, "used_memory_mib": 100},
        {"pid": 7, "used_memory_mib": 50, "type": "graphics"},
    ]
    source, _ = sim_source(one_gpu(processes=procs))
    (proc,) = source.snapshot().gpus[0].processes
    assert proc.type is ProcessType.MIXED
    assert proc.used_memory_bytes == 100 * MiB


def test_real_pid_appears_as_gpu_user(sim_source: Any) -> None:
    source, _ = sim_source(one_gpu(processes=[{"pid": os.getpid(), "used_memory_mib": 512}]))
    assert [p.pid for p in source.snapshot().gpus[0].processes] == [os.getpid()]


def test_processes_come_and_go_with_time(sim_source: Any, sim_clock: Any) -> None:
    procs = [{"pid": 1, "start_s": 0, "end_s": 10}, {"pid": 2, "start_s": 5}]
    source, _ = sim_source(one_gpu(processes=procs))
    pids = []
    for t in (0, 6, 11):
        sim_clock.set(t)
        pids.append([p.pid for p in source.snapshot().gpus[0].processes])
    assert pids == [[1], [1, 2], [2]]


def _utils(source: Any) -> dict[int, tuple[int | None, int | None]]:
    return {
        p.pid: (p.sm_util_percent, p.memory_util_percent)
        for p in source.snapshot().gpus[0].processes
    }


def test_process_utilization_samples(sim_source: Any) -> None:
    procs = [{"pid": 5, "sm_util": 42, "mem_util": 17}, {"pid": 6}, {"pid": 7, "sm_util": 0}]
    source, _ = sim_source(one_gpu(processes=procs))
    # The driver samples only processes that were busy (NVML's reference): the idle ones have
    # none, and read as idle, not unknown.
    samples = pynvml.nvmlDeviceGetProcessUtilization(pynvml.nvmlDeviceGetHandleByIndex(0), 0)
    assert [s.pid for s in samples] == [5]
    assert _utils(source) == {5: (42, 17), 6: (0, 0), 7: (0, 0)}


def test_no_process_busy_reads_idle_and_unsupported_reads_unknown(sim_source: Any) -> None:
    idle = [{"pid": 5, "sm_util": 0}, {"pid": 6}]
    source, _ = sim_source(one_gpu(processes=idle))
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetProcessUtilization(handle, 0)
    assert _utils(source) == {5: (0, 0), 6: (0, 0)}
    busy = [{"pid": 5, "sm_util": 30}]
    unsupported = one_gpu(processes=busy, unsupported=["nvmlDeviceGetProcessUtilization"])
    source, _ = sim_source(unsupported)
    assert _utils(source) == {5: (None, None)}


def test_a_process_going_idle_and_busy_again(sim_source: Any, sim_clock: Any) -> None:
    # Its sample goes and comes back while the list stands: the quick path (only the
    # processes whose samples moved) must see it either way, and the whole GPU going idle.
    procs = [
        {"pid": 5, "sm_util": {"base": 30, "step_at": 5, "step_to": 0}},
        {"pid": 6, "sm_util": {"base": 0, "step_at": 5, "step_to": 40}},
        {"pid": 7, "sm_util": {"base": 20, "until": 10, "after": 0}},
    ]
    source, _ = sim_source(one_gpu(processes=procs))
    seen = []
    for t in (0, 1, 6, 7, 11, 12):
        sim_clock.set(t)
        seen.append({pid: sm for pid, (sm, _) in _utils(source).items()})
    assert seen == [
        {5: 30, 6: 0, 7: 20},
        {5: 30, 6: 0, 7: 20},
        {5: 0, 6: 40, 7: 20},
        {5: 0, 6: 40, 7: 20},
        {5: 0, 6: 40, 7: 0},
        {5: 0, 6: 40, 7: 0},
    ]
    sim_clock.set(0)
    source, _ = sim_source(
        one_gpu(processes=[{"pid": 5, "sm_util": {"base": 0, "step_at": 5, "step_to": 9}}])
    )
    assert _utils(source) == {5: (0, 0)}  # NOT_FOUND: none busy
    sim_clock.set(6)
    assert _utils(source) == {5: (9, 0)}


def test_process_lists_take_one_driver_call_each(sim_source: Any) -> None:
    procs = [{"pid": 5, "sm_util": 42}, {"pid": 6, "type": "graphics", "sm_util": 7}]
    source, lib = sim_source(one_gpu(processes=procs))
    source.snapshot()  # the first snapshot also finds out which process API the driver has
    lib.calls.clear()
    source.snapshot()
    names = (
        "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetProcessUtilization",
    )
    # pynvml's wrappers ask for the size first: two calls each.
    assert [lib.calls[name] for name in names] == [1, 1, 1]


@pytest.mark.parametrize("api", ["v3", "v1"])
def test_long_process_lists_grow_the_buffer(sim_source: Any, api: str) -> None:
    procs = [{"pid": 1000 + i, "used_memory_mib": i, "sm_util": i % 100} for i in range(150)]
    source, _ = sim_source({**one_gpu(processes=procs), "process_api": api})
    for _ in range(2):  # the second read reuses the grown buffers
        got = source.snapshot().gpus[0].processes
        assert [p.pid for p in got] == [1000 + i for i in range(150)]
        assert [p.used_memory_bytes for p in got] == [i * MiB for i in range(150)]
        assert [p.sm_util_percent for p in got] == [i % 100 for i in range(150)]


def test_deterministic_under_seed_and_clock(sim_clock: Any) -> None:
    def read(t: float) -> tuple[Any, ...]:
        clock = sim.ManualClock(t)
        lib = sim.install("demo", clock)
        source = NvmlSource(simulated=True, environ={}, dev_dir=lib.dev_dir)
        try:
            snap = source.snapshot()
        finally:
            source.close()
        return tuple(dataclasses.replace(g) for g in snap.gpus)

    assert read(12.5) == read(12.5)
    assert read(12.5) != read(3.0)


def test_unknown_nvml_function_is_function_not_found(sim_source: Any) -> None:
    sim_source("demo")
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError) as info:
        pynvml.nvmlDeviceGetBoardPartNumber(handle)
    assert info.value.value == pynvml.NVML_ERROR_FUNCTION_NOT_FOUND


def test_name_as_bytes_from_an_old_binding(
    sim_source: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = pynvml.nvmlDeviceGetName
    monkeypatch.setattr(pynvml, "nvmlDeviceGetName", lambda h: original(h).encode())
    source, _ = sim_source("demo")
    assert source.snapshot().gpus[2].name == "NVIDIA L40S"
    assert text(b"abc") == "abc" and text("abc") == "abc" and text(None) is None


@pytest.mark.parametrize(
    ("init_error", "words"),
    [
        ("driver_not_loaded", "driver is not loaded"),
        ("lib_rm_version_mismatch", "version mismatch"),
        ("no_permission", "no permission"),
    ],
)
def test_init_failures_are_one_line_driver_errors(init_error: str, words: str) -> None:
    lib = sim.install(Scenario.from_dict({"init_error": init_error, "gpu": [{}]}))
    with pytest.raises(DriverError) as info:
        NvmlSource(simulated=True, dev_dir=lib.dev_dir)
    assert words in str(info.value)
    assert "\n" not in str(info.value)


def test_cuda_index_follows_cuda_visible_devices(sim_source: Any) -> None:
    source, _ = sim_source("demo", CUDA_VISIBLE_DEVICES="2,0", CUDA_DEVICE_ORDER="PCI_BUS_ID")
    cuda = [g.cuda_index for g in source.snapshot().gpus]
    assert cuda == [1, None, 0, None]


@pytest.mark.parametrize("name", ["demo", "dgx", "faults"])
def test_shipped_scenarios_load(name: str) -> None:
    scenario = load_scenario(name)
    assert scenario.gpus
    if name == "dgx":
        assert len(scenario.gpus) == 8
        assert sum(len(g.processes) for g in scenario.gpus) >= 40


def test_faults_scenario_has_lost_unsupported_and_v1(sim_source: Any, sim_clock: Any) -> None:
    source, _ = sim_source("faults")
    first = source.snapshot()
    gtx = first.gpus[2]
    assert gtx.utilization_gpu_percent is None and gtx.power_draw_mw is None
    assert gtx.throttle_reasons is None
    assert first.gpus[0].processes[0].pid == 5061001  # through the v1 call
    sim_clock.set(6)
    assert source.snapshot().gpus[1].state is GpuState.LOST


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"gpu": [{"colour": "red"}]}, "unknown keys"),
        ({"gpux": []}, "unknown keys"),
        ({"gpu": [{"util_gpu": {"amp": 3}}]}, "needs 'base'"),
        ({"gpu": [{"processes": [{"name": "x"}]}]}, "needs a pid"),
        ({"gpu": [{"throttle_reasons": ["tired"]}]}, "unknown throttle reason"),
        ({"process_api": "v9", "gpu": []}, "process_api"),
    ],
)
def test_bad_scenarios_are_usage_errors(data: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        Scenario.from_dict(data)


def test_scenario_files_json_and_missing(tmp_path: Any) -> None:
    path = tmp_path / "box.json"
    path.write_text('{"name": "box", "gpu": [{"count": 3, "util_gpu": 5}]}')
    assert len(load_scenario(path).gpus) == 3
    with pytest.raises(UsageError, match="no scenario"):
        load_scenario(tmp_path / "nope.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("gpu = [")
    with pytest.raises(UsageError, match="not valid TOML"):
        load_scenario(bad)


def test_slow_pcie_throughput_moves_off_the_snapshot_path(sim_source: Any) -> None:
    """NVML samples PCIe throughput for ~20 ms a call: once seen slow, it is read in background."""
    import threading

    source, lib = sim_source(
        one_gpu(pcie_rx_kbps=1234, slow_calls={"nvmlDeviceGetPcieThroughput": 0.02})
    )
    assert source.snapshot().gpus[0].pcie_rx_kbps == 1234
    gate = threading.Event()
    lib.blocked["nvmlDeviceGetPcieThroughput"] = gate  # from now on the call hangs
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(source.snapshot()), daemon=True)
    reader.start()
    reader.join(timeout=10)
    gate.set()
    assert result, "snapshot() waited on the hung PCIe call"
    assert result[0].gpus[0].pcie_rx_kbps == 1234  # the latest value the reader had


def test_wave_noise_is_the_seeded_uniform_draw_of_its_whole_second() -> None:
    wave = Wave(base=50.0, noise=4.0)
    for t, seed in ((0.2, 7), (0.9, 7), (12.5, 7919), (12.5, 3)):
        draw = random.Random(seed * 1_000_003 + int(t)).uniform(-4.0, 4.0)
        assert wave.at(t, seed) == 50.0 + draw
    assert wave.at(12.1, 3) == wave.at(12.9, 3) != wave.at(13.0, 3)


def test_a_replaced_scenario_is_served_as_if_installed(sim_source: Any, sim_clock: Any) -> None:
    sim_clock.set(12.5)
    source, lib = sim_source("dgx")
    before = source.snapshot().gpus
    reseeded = dataclasses.replace(lib.scenario, seed=99)
    lib.scenario = reseeded  # seeds and process lists are worked out again
    after = source.snapshot().gpus
    fresh, _ = sim_source(reseeded)
    assert after == fresh.snapshot().gpus
    assert [g.utilization_gpu_percent for g in after] != [g.utilization_gpu_percent for g in before]


@pytest.mark.parametrize("value", [-5.0, -0.0, 0.0, 3.0, 10.0, 12.0, float("nan")])
def test_wave_bounds_are_max_and_min(value: float) -> None:
    both, lo, hi = (
        Wave(base=value, lo=0.0, hi=10.0),
        Wave(base=value, lo=0.0),
        Wave(base=value, hi=10.0),
    )
    assert both.at(1.0, 0) == min(10.0, max(0.0, value))
    assert str(lo.at(1.0, 0)) == str(max(0.0, value))  # str: tells -0.0 from 0.0
    assert str(hi.at(1.0, 0)) == str(min(10.0, value))


def _filling(total: int, *, says_size: bool) -> Any:
    """A list call with ``total`` entries; a quirky one never says how many it needs."""

    def fn(handle: Any, count_ref: Any, array: Any) -> int:
        count = count_ref._obj
        if count.value < total:
            count.value = total if says_size else 0
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        for i in range(total):
            array[i].pid = 1000 + i
        count.value = total
        return pynvml.NVML_SUCCESS

    return fn


@pytest.mark.parametrize("says_size", [True, False])
def test_list_buffers_grow_until_the_list_fits(says_size: bool) -> None:
    buffers = ListBuffers()
    got = buffers.call_list(_filling(200, says_size=says_size), None, ProcessInfoV2)
    entries = (ProcessInfoV2 * 200).from_buffer_copy(got)
    assert [p.pid for p in entries] == [1000 + i for i in range(200)]


def test_list_buffers_stay_bounded_when_the_driver_always_wants_more() -> None:
    buffers = ListBuffers()
    endless = _filling(10**9, says_size=False)
    for _ in range(10):  # each call grows the array a few times, then gives up
        with pytest.raises(pynvml.NVMLError) as err:
            buffers.call_list(endless, None, ProcessInfoV2)
        assert err.value.value == pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    assert len(buffers._array(ProcessInfoV2)) == ListBuffers.MAX


def test_past_the_allowance_gpus_take_turns_for_process_utilization(
    sim_source: Any, sim_clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 listed processes against an allowance of 2 a snapshot: each GPU's utilisation every
    # other snapshot, the two GPUs in turn; a GPU whose list changed is read at once.
    monkeypatch.setattr(NvmlSource, "PROCESS_UTIL_PER_SNAPSHOT", 2)
    stepping = {"base": 10, "step_at": 5, "step_to": 50}
    gpus = [
        {
            "name": "NVIDIA Test GPU",
            "processes": [{"pid": 10 + 10 * g + i, "sm_util": stepping} for i in range(2)],
        }
        for g in range(2)
    ]
    gpus[1]["processes"].append({"pid": 99, "start_s": 8, "sm_util": 70})
    source, lib = sim_source({"name": "t", "gpu": gpus})
    util_calls = "nvmlDeviceGetProcessUtilization"

    def tick(t: float) -> tuple[list[int | None], list[int | None], int]:
        sim_clock.set(t)
        lib.calls.clear()
        snap = source.snapshot()
        sm = [[p.sm_util_percent for p in g.processes] for g in snap.gpus]
        return sm[0], sm[1], lib.calls[util_calls]

    assert tick(0) == ([10, 10], [10, 10], 2)  # the first snapshot reads every GPU
    assert tick(1)[2] == 1  # then one GPU a snapshot
    assert tick(2)[2] == 1
    # The step at 5 s reaches each GPU on its turn, within one snapshot of the other.
    seen = [tick(6), tick(7)]
    assert [s[2] for s in seen] == [1, 1]
    assert {tuple(seen[0][0]), tuple(seen[0][1])} == {(50, 50), (10, 10)}
    assert seen[1][:2] == ([50, 50], [50, 50])
    # A process comes on GPU 1: its list changed, so GPU 1 is read whatever its turn.
    assert [tick(t)[1] for t in (8, 9)] == [[50, 50, 70]] * 2
    # Within the allowance every GPU is read every snapshot.
    monkeypatch.setattr(NvmlSource, "PROCESS_UTIL_PER_SNAPSHOT", 2500)
    tick(10)
    assert [tick(t)[2] for t in (11, 12)] == [2, 2]
