"""The open-loop dispatcher's clock, on a simulated clock whose sleeps overshoot by a known amount."""

from __future__ import annotations

import pytest

from loadtest.load.dispatch import SPIN_MARGIN_S, Dispatcher


class LateClock:
    """Every sleep > 0 overshoots by `oversleep_s`; sleep(0) (a yield while spinning) costs `spin_step_s`."""

    def __init__(self, oversleep_s: float, spin_step_s: float = 0.000_01):
        self.now, self.oversleep_s, self.spin_step_s = 1000.0, oversleep_s, spin_step_s
        self.spun = 0

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds + self.oversleep_s
        else:
            self.now += self.spin_step_s
            self.spun += 1


def send_times(share: float, oversleep_s: float, gap_s: float = 0.01, sends: int = 20) -> list[float]:
    clock = LateClock(oversleep_s)
    dispatcher = Dispatcher(share, sleep=clock.sleep, clock=clock.time)
    lags = []
    for n in range(1, sends + 1):
        intended = 1000.0 + n * gap_s
        dispatcher.wait_until(intended, gap_s)
        lags.append(clock.now - intended)
    return lags


def test_sleeping_alone_sends_late_by_the_oversleep():
    assert send_times(0.0, 0.000_75) == pytest.approx([0.000_75] * 20)


def test_waking_early_by_the_oversleep_seen_sends_on_time_after_the_first():
    lags = send_times(0.2, 0.000_75)
    assert lags[0] == pytest.approx(0.000_65)  # nothing learnt yet: woken only the margin early
    assert max(lags[1:]) < 0.000_02  # then on time, to a spin step


def test_the_spin_never_takes_more_than_its_share_of_the_gap():
    dispatcher = Dispatcher(0.2)
    dispatcher.learn(0.005)
    assert dispatcher.early_s(gap_s=0.001) == pytest.approx(0.0002)  # 20% of a 1 ms gap, not 5 ms
    assert dispatcher.early_s(gap_s=0.1) == pytest.approx(0.005 + SPIN_MARGIN_S)
    assert Dispatcher(0.0).early_s(gap_s=1.0) == 0.0


def test_the_oversleep_estimate_rises_at_once_and_falls_slowly():
    dispatcher = Dispatcher(0.2)
    dispatcher.learn(0.001)
    assert dispatcher.oversleep_s == 0.001
    dispatcher.learn(0.0)
    assert dispatcher.oversleep_s == pytest.approx(0.000_95)
    dispatcher.learn(-0.5)  # woke early: counts as no overshoot
    assert dispatcher.oversleep_s == pytest.approx(0.000_9025)
