"""The shared sampling loop keeps its cadence: sample k is due at start + k * interval."""

from __future__ import annotations

from gputop.commands.schedule import run_on_schedule


class FakeTime:
    """A clock that moves only when slept on, or when a tick 'works'."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_work_time_does_not_push_later_samples() -> None:
    t = FakeTime()
    started: list[float] = []

    def tick(k: int) -> None:
        started.append(t.now)
        t.now += 0.3  # each sample takes 0.3 s of the 1 s interval

    assert run_on_schedule(tick, interval_s=1.0, count=4, clock=t.clock, sleep=t.sleep) == 4
    assert [round(s - 100.0, 6) for s in started] == [0.0, 1.0, 2.0, 3.0]


def test_an_overrun_skips_missed_slots_instead_of_bursting() -> None:
    t = FakeTime()
    started: list[float] = []

    def tick(k: int) -> None:
        started.append(t.now)
        t.now += 2.5 if k == 1 else 0.1  # sample 1 overruns two and a half intervals

    run_on_schedule(tick, interval_s=1.0, count=4, clock=t.clock, sleep=t.sleep)
    assert [round(s - 100.0, 6) for s in started] == [0.0, 1.0, 4.0, 5.0]


def test_no_interval_runs_count_times_back_to_back() -> None:
    t = FakeTime()
    ticks: list[int] = []
    assert run_on_schedule(ticks.append, interval_s=None, count=None, sleep=t.sleep) == 1
    assert run_on_schedule(ticks.append, interval_s=None, count=3, sleep=t.sleep) == 3
    assert ticks == [0, 0, 1, 2] and t.sleeps == []


def test_no_sleep_after_the_last_sample() -> None:
    t = FakeTime()
    run_on_schedule(lambda k: None, interval_s=0.5, count=3, clock=t.clock, sleep=t.sleep)
    assert t.sleeps == [0.5, 0.5]


def test_start_anchors_the_schedule_at_an_earlier_reading() -> None:
    t = FakeTime()
    started: list[float] = []

    def tick(k: int) -> None:
        started.append(t.now)

    # The first reading began 0.4 s ago (before the output was opened): sample 1 is due 0.6 s on.
    run_on_schedule(tick, interval_s=1.0, count=3, start=t.now - 0.4, clock=t.clock, sleep=t.sleep)
    assert [round(s - 100.0, 6) for s in started] == [0.0, 0.6, 1.6]
