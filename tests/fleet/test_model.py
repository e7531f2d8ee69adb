"""The fleet model from hand-made query answers: which series belong to which host."""

from __future__ import annotations

from gputop.fleet.client import Answer, Series
from gputop.fleet.model import FREE_MARK, MIB, QUERIES, build_fleet
from gputop.fleet.text import render_health_report, render_stuck_report, render_table

AT = 1_000_000.0


def answer(*series: tuple[dict[str, str], float]) -> Answer:
    return Answer(at=AT, series=tuple(Series(labels=labels, value=v) for labels, v in series))


def gpu(target: str, host_label: str, host: str, index: str, **extra: str) -> dict[str, str]:
    return {
        "job": "gpus",
        "instance": target,
        "gpu": index,
        "UUID": f"GPU-{host}-{index}",
        "modelName": "NVIDIA H100",
        host_label: host,
        **extra,
    }


def test_every_query_is_one_for_the_whole_fleet() -> None:
    assert all("hostname=" not in q and "instance=" not in q for q in QUERIES.values())


def test_series_without_a_host_label_belong_to_their_targets_host() -> None:
    t = {"job": "gpus", "instance": "10.0.0.1:9400"}
    answers = {
        "up": answer((t, 1), ({"job": "node", "instance": "10.0.0.9:9100"}, 0)),
        "scraped": answer((t, AT - 2)),
        "used": answer((gpu(t["instance"], "hostname", "a", "0"), 100)),
        "free": answer((gpu(t["instance"], "hostname", "a", "0"), 900)),
        "info": answer(({**t, "hostname": "a"}, 1)),
        "stuck": answer(({**t, "state": "holder"}, 2), ({**t, "state": "orphan"}, 1)),
        "unattributed": answer(({**t, "gpu": "0", "UUID": "GPU-a-0"}, 5 * MIB)),
        "age": answer((t, 1.5)),
    }
    fleet = build_fleet(answers)
    # the node exporter's down target is no GPU host
    assert [h.name for h in fleet.hosts] == ["a"]
    (a,) = fleet.hosts
    assert a.stuck == {"holder": 2, "defunct": 0, "orphan": 1, "stopped": 0, "unkillable": 0}
    assert a.unattributed_bytes == 5 * MIB
    assert a.memory_total_bytes == 1000 * MIB
    assert a.age_s == 3.5  # 2 s since the scrape + the exporter's own 1.5 s


def test_hostname_and_Hostname_and_mig_series() -> None:
    answers = {
        "up": answer(
            ({"job": "gpus", "instance": "a:9400"}, 1), ({"job": "gpus", "instance": "b:9400"}, 1)
        ),
        "util": answer(
            (gpu("a:9400", "hostname", "a", "0"), 80),
            (gpu("b:9400", "Hostname", "b", "0"), 20),
            (gpu("b:9400", "Hostname", "b", "1"), 40),
            (gpu("b:9400", "Hostname", "b", "1", GPU_I_ID="3", GPU_I_PROFILE="3g.40gb"), 99),
        ),
        "temp": answer(
            (gpu("b:9400", "Hostname", "b", "0"), 50), (gpu("b:9400", "Hostname", "b", "1"), 61)
        ),
    }
    hosts = {h.name: h for h in build_fleet(answers).hosts}
    assert set(hosts) == {"a", "b"}
    assert [g.gpu for g in hosts["b"].gpus] == ["0", "1"]
    assert hosts["b"].util_percent == 30
    assert hosts["b"].temperature_max_c == 61
    assert hosts["b"].stuck is None  # no gputop exporter: not known, not zero


def test_gputop_and_dcgm_exporter_on_one_host_count_each_gpu_once() -> None:
    answers = {
        "up": answer(
            ({"job": "gputop", "instance": "a:9401"}, 1), ({"job": "dcgm", "instance": "a:9400"}, 1)
        ),
        "used": answer(
            (gpu("a:9401", "hostname", "a", "0"), 10), (gpu("a:9400", "Hostname", "a", "0"), 12)
        ),
    }
    (a,) = build_fleet(answers).hosts
    assert len(a.gpus) == 1 and len(a.targets) == 2


def test_a_down_target_keeps_its_hosts_name_and_a_never_seen_one_its_address() -> None:
    answers = {
        "up": answer(
            ({"job": "gpus", "instance": "a:9400"}, 0), ({"job": "gpus", "instance": "c:9400"}, 0)
        ),
        "known": answer(({"job": "gpus", "instance": "a:9400", "hostname": "a"}, 1)),
    }
    fleet = build_fleet(answers, prometheus="http://p:9090")
    assert [(h.name, h.down) for h in fleet.hosts] == [("a", True), ("c:9400", True)]
    table = render_table(fleet)
    assert [line.split()[-1] for line in table.splitlines()[1:3]] == ["DOWN", "DOWN"]
    assert "2 hosts (2 down), 0 GPUs" in table
    assert "not known (target down): a, c:9400" in render_stuck_report(fleet)


def test_no_gpu_hosts_says_so() -> None:
    fleet = build_fleet({"up": answer(({"job": "node", "instance": "n:9100"}, 1))})
    assert fleet.hosts == ()
    assert render_table(fleet).startswith("no GPU hosts: ")


def test_readings_named_by_uuid_alone_join_the_gpu_their_memory_series_placed() -> None:
    # The per-GPU queries but the memory one return only UUID (a refresh of 4,000 GPUs parses
    # a third as much); the memory series places each GPU on its host.
    answers = {
        "up": answer(
            ({"job": "gpus", "instance": "a:9400"}, 1), ({"job": "gpus", "instance": "b:9400"}, 1)
        ),
        "used": answer(
            (gpu("a:9400", "Hostname", "a", "0"), 100),
            (gpu("b:9400", "hostname", "b", "0"), 200),
            (gpu("b:9400", "hostname", "b", "1"), 300),
        ),
        "util": answer(({"UUID": "GPU-b-1"}, 70), ({"UUID": "GPU-a-0"}, 10), ({"UUID": "x"}, 99)),
        "temp": answer(({"UUID": "GPU-b-0"}, 40), ({"UUID": "GPU-b-1"}, 61)),
        "free": answer(({"UUID": "GPU-a-0"}, 900)),
    }
    hosts = {h.name: h for h in build_fleet(answers).hosts}
    assert set(hosts) == {"a", "b"}  # no host for a UUID no memory series names
    assert [(g.gpu, g.util_percent, g.temperature_c) for g in hosts["b"].gpus] == [
        ("0", None, 40.0),
        ("1", 70.0, 61.0),
    ]
    assert hosts["a"].util_percent == 10
    assert hosts["a"].memory_total_bytes == 1000 * MIB


def test_queries_count_a_gpu_once_read_both_names_and_name_gpus_by_uuid() -> None:
    # A GPU's own series first; a MIG GPU as dcgm-exporter shapes it (instances only) from its
    # instances: memory summed, utilisation averaged, power and temperature (copied from the
    # GPU) their max; the DCGM 4.7 name converted to the legacy unit.
    used, free = QUERIES["used"].split(" or label_replace(")
    assert used.startswith("max by (job, instance, hostname, Hostname, gpu, UUID, modelName) (")
    by = "job, instance, hostname, Hostname, gpu, UUID, modelName"
    assert f'sum by ({by}) (DCGM_FI_DEV_FB_USED{{GPU_I_ID!=""}})' in used
    assert 'sum by (UUID) (DCGM_FI_DEV_FB_FREE{GPU_I_ID!=""})' in free and FREE_MARK in free
    assert QUERIES["util"].split(" or ") == [
        'max by (UUID) (DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=""})',
        '(max by (UUID) (DCGM_FI_DEV_GPU_UTIL_RATIO{GPU_I_ID=""})) * 100',
        'avg by (UUID) (DCGM_FI_DEV_GPU_UTIL{GPU_I_ID!=""})',
        '(avg by (UUID) (DCGM_FI_DEV_GPU_UTIL_RATIO{GPU_I_ID!=""})) * 100',
    ]
    assert "DCGM_FI_DEV_GPU_TEMP_CELSIUS" in QUERIES["temp"]
    assert "DCGM_FI_DEV_BOARD_POWER_WATTS" in QUERIES["power"]
    assert "(sum by (UUID) (DCGM_FI_DEV_FB_CAPACITY_BYTES" in QUERIES["total"]
    assert "/ 1048576" in QUERIES["total"]
    for key in ("util", "power", "temp", "total"):
        assert QUERIES[key].startswith("max by (UUID)")


def test_health_per_host_and_the_exit_code() -> None:
    t = {"job": "gputop", "instance": "a:9400"}
    d = {"job": "dcgm", "instance": "b:9400"}
    answers = {
        "up": answer((t, 1), (d, 1), ({"job": "dcgm", "instance": "c:9400"}, 1)),
        "used": answer(
            (gpu("a:9400", "hostname", "a", "0", job="gputop"), 10),
            (gpu("b:9400", "Hostname", "b", "0", job="dcgm"), 10),
        ),
        "info": answer(({**t, "hostname": "a"}, 1)),
        "lost": answer(({**t, "gpu": "2"}, 1)),
        "silent": answer(({**t, "gpu": "1"}, 0), ({**t, "gpu": "2"}, 0)),
        "driver": answer((t, 1)),
        "xid_count": answer(({**t, "gpu": "0", "UUID": "GPU-a-0"}, 3)),
        "xid": answer(
            (gpu("a:9400", "hostname", "a", "0", job="gputop"), 79),
            (gpu("b:9400", "Hostname", "b", "0", job="dcgm"), 13),
        ),
    }
    fleet = build_fleet(answers)
    hosts = {h.name: h for h in fleet.hosts}
    a, b, c = hosts["a"], hosts["b"], hosts["c:9400"]
    assert (a.lost, a.not_responding, a.driver_up) == (("2",), ("1",), True)
    assert [(x.gpu, x.last, x.count) for x in a.xid] == [("0", 79, 3)]
    assert [(x.gpu, x.last, x.count) for x in b.xid] == [("0", 13, None)]
    # c: in a GPU job, up, and not one GPU series the fleet can read: never "0 GPUs" in silence
    assert c.no_gpu_series and c.blind and not c.down
    assert fleet.exit_code() == 6  # Xid (4) and lost, not responding, no GPU series (5)
    problems = fleet.problems() or ""
    assert "Xid errors on a, b" in problems and "GPUs lost on a" in problems
    assert "no GPU series the fleet can read" in problems and "c:9400" in problems
    table = render_table(fleet)
    assert "1 lost, 1 unresp, Xid 79" in table and "no GPU series" in table
    report = render_health_report(fleet)
    assert (
        "a: GPU 2 lost (fell off the bus), GPU 1 not responding, Xid 79 on GPU 0 (3 since" in report
    )
    assert "b: Xid 13 on GPU 0" in report


def test_a_driver_gputop_cannot_read_is_blind_and_said_once() -> None:
    t = {"job": "gputop", "instance": "a:9400"}
    answers = {
        "up": answer((t, 1)),
        "info": answer(({**t, "hostname": "a"}, 1)),
        "silent": answer(({**t, "gpu": "0"}, 0)),
        "driver": answer((t, 0)),
    }
    fleet = build_fleet(answers)
    (a,) = fleet.hosts
    assert a.driver_up is False and fleet.exit_code() == 5
    assert fleet.problems() == "GPUs not responding on a; driver unreadable on a"
    assert "no GPU series" not in render_table(fleet)  # the driver says why
