"""The capacity search's decisions, against simulated servers whose true capacity is known."""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest

from loadtest.records import CellResult, ValidityFlag, read_results
from loadtest.sweep.capacity import CapacitySearch, Measured, Role, SearchSettings, verdict
from loadtest.vocab import CellStatus, Flag
from tests.support.paths import ANALYSIS_FIXTURES


@cache
def passing_cell() -> CellResult:
    """A real-shaped, valid, measured cell (from the fixtures) to vary."""
    return next(c for c in read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl") if c.valid)


def cell(rate: float, p99_ms: float) -> CellResult:
    return replace(passing_cell(), throughput_rps=rate, latency_p99_ms=p99_ms)


class Server:
    """p99 of 5 ms up to `capacity` req/s, 500 ms above; records every rate and role it was offered."""

    def __init__(self, capacity: float, fail_confirm_at: tuple[float, ...] = (), dies_after: int | None = None,
                 spike_at: tuple[float, ...] = (), slow_median: bool = False):
        self.capacity, self.fail_confirm_at, self.dies_after = capacity, fail_confirm_at, dies_after
        self.slow_median = slow_median  # above capacity the median is slow too (overload), not only the p99
        self.spike_at = spike_at  # the first measurement at these rates fails (one stall), later ones pass
        self.offered: list[tuple[float, Role]] = []

    def measure(self, rate: float, role: Role) -> Measured:
        spike = rate in self.spike_at and all(r != rate for r, _ in self.offered)
        self.offered.append((rate, role))
        slow = rate > self.capacity or spike or (role == Role.CONFIRM and rate in self.fail_confirm_at)
        alive = self.dies_after is None or len(self.offered) < self.dies_after
        measured = cell(rate, 500.0 if slow else 5.0)
        if slow and self.slow_median and rate > self.capacity:
            measured = replace(measured, latency_p50_ms=400.0)
        return Measured(measured, server_alive=alive)


def search(server: Server, start: float, **settings) -> CapacitySearch:
    return CapacitySearch(SearchSettings(p99_ms=50, start_rps=start, **settings), server.measure)


@pytest.mark.parametrize("start", [100.0, 5000.0, 730.0])
def test_answer_is_a_confirmed_measured_rate_within_precision_of_the_truth(start):
    server = Server(capacity=730)
    answer = search(server, start).run()
    assert answer.met and answer.ended_because == "converged"
    assert answer.capacity.role == Role.CONFIRM and answer.capacity.verdict.passed
    assert (answer.capacity.rate_rps, Role.CONFIRM) in server.offered  # measured, not interpolated
    assert 730 / 1.05 <= answer.capacity.rate_rps <= 730  # never above the truth
    assert answer.lowest_failing_rps > 730
    assert (answer.lowest_failing_rps - answer.capacity.rate_rps) / answer.capacity.rate_rps <= 0.05
    assert len(answer.steps) == len(server.offered) <= 20


def test_objective_never_met_says_so():
    answer = search(Server(capacity=0.5), start=100).run()
    assert not answer.met and answer.ended_because == "objective not met even at 1 req/s"
    assert answer.lowest_failing_rps == 1.0


def test_a_failed_confirmation_lowers_the_answer():
    server = Server(capacity=730)
    first = search(Server(capacity=730), start=100).run().capacity.rate_rps
    server.fail_confirm_at = (first,)
    answer = search(server, start=100).run()
    assert answer.met and answer.capacity.rate_rps < first
    assert [r for r, role in server.offered if role == Role.CONFIRM] == [first, answer.capacity.rate_rps]


def test_step_limit_keeps_the_last_step_for_a_confirmation():
    server = Server(capacity=730)
    answer = search(server, start=100, max_steps=4).run()
    assert server.offered == [(100, Role.BRACKET), (200, Role.BRACKET), (400, Role.BRACKET), (400, Role.CONFIRM)]
    assert answer.met and answer.capacity.rate_rps == 400 and answer.lowest_failing_rps is None
    assert answer.ended_because.startswith("step limit (4 cells; the last one confirmed")


def test_step_limit_mid_bisection_confirms_the_highest_passing_rate():
    server = Server(capacity=730)
    answer = search(server, start=100, max_steps=7).run()  # 100 200 400 800 800(retry) 600 | confirm 600
    assert server.offered[3:5] == [(800, Role.BRACKET), (800, Role.RETRY)]
    assert [role for _, role in server.offered][-1] == Role.CONFIRM and len(server.offered) == 7
    assert answer.met and answer.capacity.rate_rps == 600 and answer.lowest_failing_rps == 800
    assert answer.ended_because.startswith("step limit (7 cells")


def test_one_spike_does_not_cap_the_answer():
    """The first measurement at 400 req/s fails (a stall in a short window); its retry passes, so the
    search goes on above it instead of settling below 400."""
    server = Server(capacity=730, spike_at=(400.0,))
    answer = search(server, start=100).run()
    assert (400, Role.RETRY) in server.offered
    assert answer.met and 730 / 1.05 <= answer.capacity.rate_rps <= 730 and answer.lowest_failing_rps > 730


def test_an_overloaded_rate_fails_at_once():
    """Above capacity this server's every request is slow (p50 too): nothing to retry."""
    server = Server(capacity=300, slow_median=True)
    answer = search(server, start=100).run()
    assert not any(role == Role.RETRY for _, role in server.offered)
    assert answer.capacity.rate_rps <= 300 < answer.lowest_failing_rps


def test_a_rate_failing_twice_fails():
    server = Server(capacity=300)
    answer = search(server, start=100).run()
    retried = [rate for rate, role in server.offered if role == Role.RETRY]
    assert retried and all(rate > 300 for rate in retried)
    assert answer.capacity.rate_rps <= 300 and answer.lowest_failing_rps > 300


def test_step_limit_ends_the_search_without_an_unconfirmed_answer():
    server = Server(capacity=730, fail_confirm_at=(400.0,))
    answer = search(server, start=100, max_steps=4).run()
    assert not answer.met and answer.ended_because == "step limit (4 cells)"
    assert len(server.offered) == 4


def test_time_limit_ends_the_search():
    ticks = iter(range(0, 1000, 100))
    server = Server(capacity=730)
    found = CapacitySearch(SearchSettings(p99_ms=50, start_rps=100, max_s=250), server.measure,
                           clock=lambda: float(next(ticks)))
    answer = found.run()
    assert answer.ended_because == "time limit (250 s)" and len(server.offered) == 2  # at t=100 and t=200


def test_a_server_that_dies_ends_the_search_keeping_what_was_measured():
    server = Server(capacity=730, dies_after=3)
    answer = search(server, start=100).run()
    assert answer.ended_because == "the server stopped answering" and len(answer.steps) == 3


def test_invalid_or_failed_cells_never_pass():
    good = cell(100, 5.0)
    assert verdict(good, 50).passed
    unstable = replace(good, valid=False, flags=[ValidityFlag(Flag.UNSTABLE, "windows differ by 18%")])
    assert not verdict(unstable, 50).passed
    assert "unstable: windows differ by 18%" in verdict(unstable, 50).reason
    failed = replace(good, status=CellStatus.FAILED, failure_reason="Locust missed its deadline", valid=False)
    assert verdict(failed, 50).reason == "failed: Locust missed its deadline"
    assert verdict(cell(100, 50.001), 50).reason == "p99 50.001 ms > 50 ms"


@pytest.mark.parametrize("bad, message", [
    ({"p99_ms": 0}, "objective must be positive"),
    ({"start_rps": 0.5}, "outside"),
    ({"precision": 1.5}, "precision"),
    ({"max_steps": 1}, "at least 2 steps"),
])
def test_bad_settings_are_refused(bad, message):
    settings = {"p99_ms": 50, "start_rps": 100, **bad}
    with pytest.raises(ValueError, match=message):
        CapacitySearch(SearchSettings(**settings), Server(730).measure).run()
