"""The capacity search's decisions, against simulated servers whose true capacity is known.

Each simulated cell carries an HdrHistogram of N = rate x window requests with a controlled number
over the objective, since verdicts come from the histogram at the stated confidence (MLPerf's
early-stopping rule), never from a p99 read off a short window.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest

from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult, ValidityFlag, read_results
from loadtest.evidence.stats import encode, new_histogram
from loadtest.evidence.vocab import Arrival, CellStatus, Flag, LoadMode, Role
from loadtest.judge import confidence as conf
from loadtest.judge.conclusion import AnswerKind, conclude, describe_unsteady
from loadtest.judge.verdicts import Decision, Step, verdict_of
from loadtest.search.capacity import CapacitySearch
from loadtest.search.search_settings import Measured, SearchSettings
from tests.support.paths import ANALYSIS_FIXTURES

OBJECTIVE_MS = 50.0
OBJECTIVE = Objective(OBJECTIVE_MS)
FAST_US = 5_000
SLOW_US = 500_000
WINDOW_S = {Role.CONFIRM: 6.0}  # every other role: 2 s


@cache
def passing_cell() -> CellResult:
    """A real-shaped, valid, measured cell (from the fixtures) to vary."""
    return next(c for c in read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl") if c.valid)


@cache
def encoded(counts: tuple[tuple[int, int], ...]) -> str:
    histogram = new_histogram()
    for latency_us, count in counts:
        histogram.record_value(latency_us, count)
    return encode(histogram)


def cell(rate: float, window_s: float, counts: dict[int, int], loadgen_cpu: float | None = None) -> CellResult:
    """An open-loop cell at `rate` over `window_s` seconds whose latencies are `counts` (µs -> requests)."""
    counts = {us: n for us, n in sorted(counts.items()) if n > 0}
    requests = sum(counts.values())
    base = passing_cell()

    def at(share: float) -> float:
        """The latency below which `share` of the requests lie (ms)."""
        rank, seen = min(requests - 1, int(share * requests)), 0
        for latency_us, count in counts.items():
            seen += count
            if seen > rank:
                return latency_us / 1000.0
        raise AssertionError("unreachable")

    return replace(
        base,
        load=replace(base.load, mode=LoadMode.OPEN, concurrency=None, rate_rps=rate, arrival=Arrival.POISSON,
                     duration_s=window_s),
        status=CellStatus.OK, failure_reason="", valid=loadgen_cpu is None,
        flags=[] if loadgen_cpu is None else [
            ValidityFlag(Flag.SATURATED, f"a load generator process used {loadgen_cpu:.0f}% of a core")],
        requests=requests, ok_requests=requests, images=requests * base.load.request_batch_size,
        errors_by_code={}, wrong_answers=0, late_sends=0, late_send_fraction=0.0,
        throughput_rps=rate, throughput_ips=rate * base.load.request_batch_size,
        window_throughput_rps=[rate] * max(1, round(window_s)),
        histogram_us=encoded(tuple(counts.items())),
        latency_min_ms=min(counts) / 1000.0, latency_max_ms=max(counts) / 1000.0,
        latency_mean_ms=sum(us * n for us, n in counts.items()) / requests / 1000.0,
        latency_p50_ms=at(0.50), latency_p90_ms=at(0.90), latency_p95_ms=at(0.95), latency_p99_ms=at(0.99),
        latency_p999_ms=at(0.999),
        loadgen_process_cpu_percent=[loadgen_cpu] if loadgen_cpu is not None else [30.0],
        loadgen_cpu_percent=loadgen_cpu if loadgen_cpu is not None else 30.0, loadgen_cores=2,
        dispatch_lag_p99_us=None, pool_full_waits=0)


class Server:
    """Every request takes 5 ms up to `capacity` req/s; above it, over half take 500 ms (p50 slow too).

    Records every (rate, role, window) it was offered, and keeps a simulated clock (the seconds measured).
    """

    def __init__(self, capacity: float, fail_confirm_at: tuple[float, ...] = (), dies_after: int | None = None,
                 loadgen_limit_rps: float | None = None, borderline: tuple[float, float] | None = None):
        self.capacity, self.fail_confirm_at, self.dies_after = capacity, fail_confirm_at, dies_after
        self.loadgen_limit_rps = loadgen_limit_rps  # above it the load generator runs a core flat out
        self.borderline = borderline  # (low, high]: exactly 1% of requests over the objective
        self.offered: list[tuple[float, Role]] = []
        self.windows: list[float] = []
        self.cells: list[CellResult] = []
        self.elapsed_s = 0.0

    def clock(self) -> float:
        return self.elapsed_s

    def latencies(self, rate: float, role: Role, requests: int) -> dict[int, int]:
        if self.borderline and self.borderline[0] < rate <= self.borderline[1]:
            over = round(0.01 * requests)
            return {FAST_US: requests - over, SLOW_US: over}
        if rate > self.capacity or (role == Role.CONFIRM and rate in self.fail_confirm_at):
            slow = requests // 2 + 1
            return {FAST_US: requests - slow, SLOW_US: slow}
        return {FAST_US: requests}

    def measure(self, rate: float, role: Role, window_s: float | None) -> Measured:
        window = window_s if window_s is not None else WINDOW_S.get(role, 2.0)
        self.offered.append((rate, role))
        self.windows.append(window)
        self.elapsed_s += window
        requests = round(rate * window)
        limited = self.loadgen_limit_rps is not None and rate > self.loadgen_limit_rps
        measured = cell(rate, window, self.latencies(rate, role, requests), loadgen_cpu=99.0 if limited else None)
        self.cells.append(measured)
        alive = self.dies_after is None or len(self.offered) < self.dies_after
        return Measured(measured, server_alive=alive)


class StallingServer(Server):
    """Stalls on a clock: whatever the rate, 4% of requests wait 40 ms, the rest take 1 ms."""

    def latencies(self, rate: float, role: Role, requests: int) -> dict[int, int]:
        stalled = round(0.04 * requests)
        return {1_000: requests - stalled, 40_000: stalled}


class QueueingServer(Server):
    """A queue's tail: the share over the objective falls steeply (as the rate to the 4th) as the rate falls."""

    def latencies(self, rate: float, role: Role, requests: int) -> dict[int, int]:
        over = round(min(0.3, 0.04 * (rate / 1000.0) ** 4) * requests)
        return {1_000: requests - over, 40_000: over}


def search(server: Server, start: float, p99_ms: float = OBJECTIVE_MS, **settings) -> CapacitySearch:
    return CapacitySearch(SearchSettings(objective=Objective(p99_ms), start_rps=start, **settings), server.measure,
                          clock=server.clock)


def rates_measured(answer, rate: float) -> list[Step]:
    return [s for s in answer.steps if s.rate_rps == rate]


# ---------------------------------------------------------------------------------------------- the answer


@pytest.mark.parametrize("start", [100.0, 730.0, 5000.0, 1234.0])
def test_answer_is_a_confirmed_measured_rate_within_precision_of_the_truth(start):
    server = Server(capacity=730)
    answer = search(server, start).run()
    assert answer.met and answer.ended_because == "converged"
    assert answer.capacity.role == Role.CONFIRM and answer.capacity.verdict.passed
    assert (answer.capacity.rate_rps, Role.CONFIRM) in server.offered  # measured, not interpolated
    assert answer.capacity.verdict.evidence.requests == round(answer.capacity.rate_rps * 6)  # its own 6 s window
    assert 730 / 1.05 <= answer.capacity.rate_rps <= 730  # never above the truth
    assert answer.lowest_failing_rps > 730
    assert (answer.lowest_failing_rps - answer.capacity.rate_rps) / answer.capacity.rate_rps <= 0.05
    assert answer.conclusion.inconclusive == () and answer.conclusion.not_monotone == ()
    assert answer.conclusion.stalls is None and not answer.conclusion.at_least
    assert answer.conclusion.uncertainty().startswith(f"between {answer.capacity.rate_rps:g} and ")
    assert len(answer.steps) == len(server.offered) <= 20


def test_every_failing_rate_failed_with_confidence():
    answer = search(Server(capacity=730), 100).run()
    for step in answer.steps:
        assert step.verdict.decision in (Decision.PASS, Decision.FAIL, Decision.INCONCLUSIVE)
        if step.verdict.decision == Decision.FAIL:
            assert step.rate_rps > 730 and step.verdict.evidence.over > step.verdict.evidence.requests / 2


def test_objective_never_met_says_so():
    answer = search(Server(capacity=0.5), start=100).run()
    assert not answer.met and answer.capacity is None
    # 100, 50, 25 fail; 12.5 req/s would be under 1.1 x 459 / 30 s = 16.8 req/s, where no pass can be shown
    assert [s.rate_rps for s in answer.steps] == [100, 50, 25]
    assert answer.ended_because.startswith("no pass down to 25 req/s; below 16.8 req/s a rate's 30 s cannot hold "
                                           "the 459 requests a pass needs at 99% confidence with 10% to spare")
    assert answer.lowest_failing_rps == 25
    assert answer.conclusion.stalls is None  # the failing rates' p50 is slow: overload, not stalls


# ---------------------------------------------------------------------------------------------- inconclusive rates


def test_a_short_window_with_too_few_requests_is_extended_not_judged():
    """At 100 req/s a 2 s window holds 200 requests, all fast: too few for a pass at 99% (459), so the
    rate is measured longer (role extend) and passes on all its requests pooled."""
    server = Server(capacity=730)
    answer = search(server, start=100).run()
    first, extension = answer.steps[0], answer.steps[1]
    assert (first.rate_rps, first.role) == (100, Role.BRACKET)
    assert first.verdict.decision == Decision.INCONCLUSIVE and first.verdict.evidence.requests == 200
    assert first.verdict.evidence.requests_to_pass == 459
    assert (extension.rate_rps, extension.role) == (100, Role.EXTEND) and not extension.confirming
    # sized to the 259 requests missing, with 10% to spare: 1.1 * 259 / 100 = 2.8 s
    assert server.windows[:2] == [2.0, 2.8]
    assert extension.result.requests == 280
    assert extension.verdict.passed and extension.verdict.evidence.requests == 480 >= 459
    assert (answer.steps[2].rate_rps, answer.steps[2].role) == (100, Role.CONFIRM)  # the anchor, confirmed at once
    assert answer.steps[3].rate_rps == 200  # the bracket went on above the pooled pass
    assert answer.met


def test_a_rate_that_cannot_hold_a_pass_within_its_cap_stays_inconclusive():
    """With 2.2 s at most per rate, 200 req/s can never gather 459 requests: it stays inconclusive, is
    never taken as a pass, and the search stops below the lowest rate whose cap could hold a pass."""
    server = Server(capacity=730)
    settings = SearchSettings(objective=OBJECTIVE, start_rps=200, max_rate_s=2.2)
    assert settings.lowest_conclusive_rps() == pytest.approx(1.1 * 459 / 2.2)  # with 10% to spare
    answer = CapacitySearch(settings, server.measure, clock=server.clock).run()
    assert server.offered == [(200, Role.BRACKET)]  # 0.2 s of room left: not worth a window
    assert not answer.met
    assert answer.ended_because.startswith("no pass down to 200 req/s; below 229.5 req/s")
    assert [s.rate_rps for s in answer.conclusion.inconclusive] == [200]
    assert answer.conclusion.inconclusive[0].verdict.decision == Decision.INCONCLUSIVE
    # never an inconclusive rate as the upper end
    assert answer.conclusion.lowest_failing_rps is None and answer.conclusion.upper_rps() is None


def test_inconclusive_rates_are_no_upper_end_and_the_search_finds_a_fail_above_them():
    """Between 730 and 900 req/s exactly 1% of requests are over the objective: however long it is
    measured (30 s at a rate), such a rate neither passes nor fails. It shows the knee is near, not where the range
    ends: the range's upper end is a rate shown to fail, which the search finds above them."""
    server = Server(capacity=900, borderline=(730, 900))
    answer = search(server, start=100).run()
    assert answer.met and 730 / 1.05 <= answer.capacity.rate_rps <= 730
    inconclusive = answer.conclusion.inconclusive
    assert inconclusive and all(730 < s.rate_rps <= 900 for s in inconclusive)
    extended = [step for step in inconclusive if len(rates_measured(answer, step.rate_rps)) > 1]
    assert extended  # (the last may have met the step limit before its extension)
    for step in extended:
        measured = rates_measured(answer, step.rate_rps)
        assert [s.role for s in measured][1:] == [Role.EXTEND] * (len(measured) - 1)
        assert sum(s.result.load.duration_s for s in measured) == pytest.approx(30.0)  # up to its cap
        assert step.verdict.evidence.requests > conf.requests_to_pass(0)
    failing = answer.lowest_failing_rps
    assert failing is not None and failing > 900
    assert answer.conclusion.upper_rps() == failing
    assert answer.conclusion.uncertainty() == (f"between {answer.capacity.rate_rps:g} and {failing:g} req/s "
                                               f"(upper end {failing:g})")


# ---------------------------------------------------------------------------------------------- stalls


def test_stalls_independent_of_the_load_end_the_search_early():
    """4% of requests over a 10 ms objective at every rate, with a 1 ms median: no rate will pass, and
    halving the rate does not help; the search says so rather than bisecting towards zero."""
    server = StallingServer(capacity=0)
    answer = search(server, start=1000, p99_ms=10).run()
    assert not answer.met
    assert answer.ended_because.startswith("unmet: stalls of about 40 ms")
    found = answer.conclusion.stalls
    assert found is not None and found.stall_ms == pytest.approx(40.0, rel=0.01)
    assert [rate for rate, _ in found.over_shares] == [1000, 500, 250]  # three rates, a factor of 4
    assert all(share == pytest.approx(0.04) for _, share in found.over_shares)
    # 4% of requests each 30 ms over the objective: about 0.04 / 0.03 s = 1.3 stalls a second
    assert found.per_s == pytest.approx(0.04 / 0.030, rel=0.02)
    assert len(answer.steps) <= 3 and min(s.rate_rps for s in answer.steps) >= 250


def test_a_queue_is_not_taken_for_stalls():
    """The same 4% over at 1000 req/s, but a queue's share falls steeply as the rate halves: a capacity."""
    server = QueueingServer(capacity=0)
    answer = search(server, start=1000, p99_ms=10).run()
    assert answer.conclusion.stalls is None
    # converged, or said which inconclusive rates near its knee left nothing to try: never "stalls"
    assert answer.met and answer.ended_because.startswith(("converged", "no rate left to try")), answer.ended_because
    assert answer.capacity.rate_rps < 1000 and answer.capacity.verdict.passed


# ---------------------------------------------------------------------------------------------- what else it shows


def _step(rate: float, over: int, role: Role = Role.BRACKET, confirming: bool = False) -> Step:
    requests = round(rate * 2)
    measured = cell(rate, 2.0, {FAST_US: requests - over, SLOW_US: over})
    return Step(rate, role, measured, verdict_of([measured], OBJECTIVE), confirming)


def test_a_pass_above_a_fail_is_reported_as_not_monotone():
    """The search never offers a rate above one that failed with confidence, so the steps are written out."""
    spike = _step(400, over=400)  # a stall in one window at 400 req/s
    steps = [_step(300, 0), spike, _step(600, 0, Role.BISECT), _step(600, 0, Role.CONFIRM, confirming=True)]
    assert spike.verdict.decision == Decision.FAIL
    conclusion = conclude(steps, OBJECTIVE)
    assert conclusion.capacity_rps == 600
    pairs = {(p.rate_rps, p.confirming, f.rate_rps) for p, f in conclusion.not_monotone}
    assert pairs == {(600, False, 400), (600, True, 400)}


def test_a_monotone_search_reports_no_such_pair():
    answer = search(Server(capacity=730), start=100).run()
    assert answer.conclusion.not_monotone == ()


@pytest.mark.parametrize("start, limited_at", [(100, 625), (1000, 609.4)])
def test_a_load_generator_limit_makes_the_answer_a_lower_bound(start, limited_at):
    """Above 600 req/s the load generator runs a core flat out: those cells say nothing of the server. The
    search bisects toward the lowest such rate, so the lower bound is within the precision of that limit."""
    server = Server(capacity=730, loadgen_limit_rps=600)
    answer = search(server, start=start).run()
    assert answer.met and answer.conclusion.at_least
    assert answer.capacity.rate_rps <= 600 and answer.capacity.role == Role.CONFIRM
    assert (limited_at - answer.capacity.rate_rps) / answer.capacity.rate_rps <= 0.05  # the precision asked for
    assert answer.ended_because == f"the load generator was the limit at {limited_at:g} req/s"
    assert answer.conclusion.loadgen_limited_rps == limited_at
    assert answer.lowest_failing_rps is None
    assert answer.conclusion.uncertainty().startswith(f"at least {answer.capacity.rate_rps:g} req/s: the load "
                                                      "generator's limit")
    limited = [s for s in answer.steps if s.rate_rps > 600]
    assert limited and all(s.verdict.decision == Decision.LOADGEN for s in limited)
    assert not any(s.role == Role.EXTEND for s in limited)  # nothing to gain from measuring it longer


def test_a_failed_confirmation_below_the_load_generators_limit_goes_on_below():
    """The pass next to the load generator's limit does not hold up: the search bisects below it, as after any
    failed confirmation, rather than ending without an answer (a tuning once lost a configuration so)."""
    server = Server(capacity=10_000, loadgen_limit_rps=600, fail_confirm_at=(600,))
    answer = search(server, start=400, precision=0.1).run()
    assert answer.met and 400 <= answer.capacity.rate_rps < 600
    assert [rate for rate, role in server.offered if role == Role.CONFIRM][:2] == [400, 600]  # the anchor, then 600
    assert answer.lowest_failing_rps == 600 and not answer.conclusion.at_least
    assert answer.ended_because == "converged"


def test_a_failed_confirmation_lowers_the_answer():
    first = search(Server(capacity=730), start=100).run().capacity.rate_rps
    server = Server(capacity=730, fail_confirm_at=(first,))
    answer = search(server, start=100).run()
    assert answer.met and answer.capacity.rate_rps < first
    # the anchor (100) is confirmed at once; then the highest pass, whose confirmation fails; then one below it
    assert [r for r, role in server.offered if role == Role.CONFIRM] == [100, first, answer.capacity.rate_rps]
    assert answer.lowest_failing_rps == first  # its confirmation failed
    failed = next(s for s in answer.steps if s.confirming and s.rate_rps == first)
    assert failed.verdict.decision == Decision.FAIL
    [(passed, confirmation)] = answer.conclusion.unsteady  # named: it passed, then did not hold
    assert passed.rate_rps == first and confirmation is failed
    assert answer.best_pass is None  # the unsteady rate is no "passed, not confirmed" answer


# ---------------------------------------------------------------------------------------------- bounds


def test_step_limit_answers_the_confirmed_anchor_and_the_higher_pass_it_could_not_confirm():
    server = Server(capacity=730)
    answer = search(server, start=400, max_steps=4).run()
    assert server.offered == [(400, Role.BRACKET), (400, Role.CONFIRM), (800, Role.BRACKET), (600, Role.BISECT)]
    assert answer.met and answer.capacity.rate_rps == 400 and answer.lowest_failing_rps == 800
    assert answer.kind == AnswerKind.CONFIRMED
    assert answer.best_pass.rate_rps == 600 and answer.best_pass.role == Role.BISECT  # passed, not confirmed
    assert answer.conclusion.uncertainty() == "between 400 and 800 req/s (upper end 800)"  # the confirmed rate's
    assert answer.ended_because == "step limit (4 cells)"


def test_step_limit_leaves_an_inconclusive_rate_unextended():
    server = Server(capacity=730)
    answer = search(server, start=100, max_steps=4).run()
    # 100 (extended to a pass) confirmed at once; 200 inconclusive with no step left for its extension
    assert server.offered == [(100, Role.BRACKET), (100, Role.EXTEND), (100, Role.CONFIRM), (200, Role.BRACKET)]
    assert answer.met and answer.capacity.rate_rps == 100
    assert [s.rate_rps for s in answer.conclusion.inconclusive] == [200]
    assert answer.ended_because.startswith("step limit (4 cells")


def test_an_unsteady_anchor_is_named_and_the_search_steps_down():
    """800 req/s passes, then its confirmation fails: the search names it unsteady and goes on below it."""
    server = Server(capacity=1000, fail_confirm_at=(800.0,))
    answer = search(server, start=800, max_steps=4).run()
    assert server.offered == [(800, Role.BRACKET), (800, Role.CONFIRM), (400, Role.BRACKET), (400, Role.CONFIRM)]
    assert answer.met and answer.capacity.rate_rps == 400 and answer.lowest_failing_rps == 800
    [(passed, failed)] = answer.conclusion.unsteady
    assert (passed.rate_rps, failed.rate_rps, failed.confirming) == (800, 800, True)
    assert describe_unsteady((passed, failed)) == ("passed at 800 req/s, then its confirmation failed "
                                                   "(k=2,401 of 4,800): unsteady")  # 6 s at 800 req/s, half slow
    assert answer.best_pass is None and answer.ended_because == "step limit (4 cells)"


def overhead_clock(server: Server, overhead_s: float):
    """The simulated clock with each cell's overhead added to its window."""
    return lambda: server.elapsed_s + overhead_s * len(server.offered)


def timed_search(server: Server, max_s: float) -> CapacitySearch:
    """2 s windows, 6 s confirmations and 1 s of overhead a cell, against `max_s`."""
    settings = SearchSettings(objective=OBJECTIVE, start_rps=400, max_s=max_s, window_s=2.0, confirm_window_s=6.0,
                              cell_overhead_s=1.0)
    return CapacitySearch(settings, server.measure, clock=overhead_clock(server, 1.0))


def test_a_time_limit_after_a_pass_answers_that_pass_as_not_confirmed():
    """400 req/s passes in 3 s of 5; its confirmation (6 s + 1 s) cannot fit in the 2 s left: not started."""
    server = Server(capacity=730)
    answer = timed_search(server, max_s=5).run()
    assert server.offered == [(400, Role.BRACKET)]
    assert not answer.met and answer.kind == AnswerKind.PASSED and answer.best_pass.rate_rps == 400
    assert answer.ended_because == ("time limit (5 s): 400 req/s not started, its cell needs ~7.0 s and 2.0 s "
                                    "were left")


def test_a_time_limit_after_a_confirmed_anchor_answers_it_as_confirmed():
    """3 s for 400 req/s, 7 s for its confirmation: 2 s of 12 left, too little for 800 req/s (3 s)."""
    server = Server(capacity=730)
    answer = timed_search(server, max_s=12).run()
    assert server.offered == [(400, Role.BRACKET), (400, Role.CONFIRM)]
    assert answer.met and answer.kind == AnswerKind.CONFIRMED and answer.capacity.rate_rps == 400
    assert answer.best_pass is None
    assert answer.ended_because == "time limit (12 s): 2.0 s left, too little for a higher rate"


def test_a_confirmation_is_shortened_to_the_time_left_where_that_still_holds_a_verdict():
    """After 400 (3 s) and its confirmation (7 s), 800 passes (3 s); 2.5 s are left of 15.5: a 6 s confirmation
    would not fit, but 1 s (2.5 s less 1 s of overhead and 0.5 s of slack) at 800 req/s holds 800 requests, more
    than the 631 wanted (1.1 x 459 / 800 s)."""
    server = Server(capacity=1000)
    answer = timed_search(server, max_s=15.5).run()
    assert server.offered == [(400, Role.BRACKET), (400, Role.CONFIRM), (800, Role.BRACKET), (800, Role.CONFIRM)]
    assert server.windows == [2.0, 6.0, 2.0, 1.0]
    assert answer.met and answer.capacity.rate_rps == 800 and answer.capacity.verdict.evidence.requests == 800


def test_a_rate_that_cannot_reach_a_verdict_in_the_time_left_is_not_started():
    """With 2 s left, 100 req/s would need 4.6 s for the 459 requests a pass needs: it is not measured."""
    server = Server(capacity=730)
    settings = SearchSettings(objective=OBJECTIVE, start_rps=100, max_s=2.0)
    answer = CapacitySearch(settings, server.measure, clock=server.clock).run()
    assert server.offered == [] and answer.kind == AnswerKind.NONE
    assert answer.ended_because == "time limit (2 s): 100 req/s not started, its cell needs ~4.6 s and 2.0 s were left"


def test_an_interruption_mid_search_still_answers():
    """Ctrl-C during the fifth cell: the answer stands on the four measured before it."""
    server = Server(capacity=730)

    def measure(rate, role, window_s):
        if len(server.offered) == 4:
            raise Interrupted()
        return server.measure(rate, role, window_s)

    settings = SearchSettings(objective=OBJECTIVE, start_rps=400)
    answer = CapacitySearch(settings, measure, clock=server.clock, interrupts=(Interrupted,)).run()
    assert answer.interrupted and answer.ended_because == "interrupted" and len(answer.steps) == 4
    assert answer.met and answer.capacity.rate_rps == 400  # 400, its confirmation, 800 failing, 600 passing
    assert answer.best_pass.rate_rps == 600 and answer.lowest_failing_rps == 800


class Interrupted(Exception):
    """Stands in for the cell sweep's: raised by `measure` after recording its cell."""


def test_a_server_that_dies_ends_the_search_keeping_what_was_measured():
    server = Server(capacity=730, dies_after=3)
    answer = search(server, start=400).run()
    assert answer.ended_because == "the server stopped answering" and len(answer.steps) == 3
    assert [s.result for s in answer.steps] == server.cells
    assert answer.steps[-1].rate_rps == 800 and not answer.steps[-1].verdict.passed  # judged, though the last
    assert answer.met and answer.capacity.rate_rps == 400 and answer.lowest_failing_rps == 800  # the anchor


@pytest.mark.parametrize("bad, message", [
    ({"objective": 0}, "objective must be positive"),
    ({"start_rps": 0.5}, "outside"),
    ({"precision": 1.5}, "precision"),
    ({"max_steps": 1}, "at least 2 steps"),
    ({"confidence": 1.0}, "confidence"),
    ({"confidence": 0.3}, "confidence"),
    ({"max_rate_s": 0}, "max_rate_s"),
])
def test_bad_settings_are_refused(bad, message):
    settings = {"objective": OBJECTIVE_MS, "start_rps": 100, **bad}
    server = Server(730)
    with pytest.raises(ValueError, match=message):
        typed = {**settings, "objective": Objective(settings["objective"])}
        CapacitySearch(SearchSettings(**typed), server.measure, clock=server.clock).run()
    assert server.offered == []


# ---------------------------------------------------------------------------------------------- one cell's verdict


def test_invalid_or_failed_cells_never_pass():
    good = cell(300, 2.0, {FAST_US: 600})
    assert verdict_of([good], OBJECTIVE).passed
    unstable = replace(good, valid=False, flags=[ValidityFlag(Flag.UNSTABLE, "windows differ by 18%")])
    assert verdict_of([unstable], OBJECTIVE).reason == "unstable: windows differ by 18%"
    errors = replace(good, valid=False, flags=[ValidityFlag(Flag.ERRORS, "3% of requests failed")])
    assert verdict_of([errors], OBJECTIVE).reason == "errors: 3% of requests failed"
    failed = replace(good, status=CellStatus.FAILED, failure_reason="Locust missed its deadline", valid=False)
    assert verdict_of([failed], OBJECTIVE).reason == "failed: Locust missed its deadline"
    limited = cell(300, 2.0, {FAST_US: 600}, loadgen_cpu=99.0)
    assert verdict_of([limited], OBJECTIVE).decision == Decision.LOADGEN


def test_cells_at_one_rate_pool_their_requests():
    short = cell(100, 2.0, {FAST_US: 200})
    assert verdict_of([short], OBJECTIVE).decision == Decision.INCONCLUSIVE
    pooled = verdict_of([short, short, short], OBJECTIVE)
    assert pooled.passed and pooled.evidence.requests == 600


def test_an_overloaded_cell_fails_whatever_its_latencies():
    """Every request fast, but 300 req/s were scheduled in each window and 200 req/s completed: the server did
    not keep up, so what it served is no rate it sustains."""
    good = cell(300, 4.0, {FAST_US: 1200})
    assert verdict_of([good], OBJECTIVE).passed
    behind = replace(good, window_scheduled_rps=[300.0] * 4, window_throughput_rps=[200.0] * 4)
    verdict = verdict_of([behind], OBJECTIVE)
    assert verdict.decision == Decision.FAIL and verdict.reason.startswith("overloaded: ")
    assert verdict.evidence.over == 0  # its latencies alone would have passed
    assert verdict_of([good, behind], OBJECTIVE).decision == Decision.FAIL  # pooled: still never a pass


def test_a_pass_whose_confirmation_stayed_inconclusive_is_not_the_answer():
    """400 req/s passed (N=800, k=0), its confirmation did not (N=605, k=5: a pass needs N >= 1,307, a fail more
    over): all its windows no longer support the pass, so it is listed inconclusive; 200 req/s's pass answers."""
    from loadtest.judge.verdicts import step_after

    steps: list[Step] = []
    for rate, role, counts, confirming in ((400, Role.BRACKET, {FAST_US: 800}, False),
                                           (400, Role.CONFIRM, {FAST_US: 600, SLOW_US: 5}, True),
                                           (200, Role.BRACKET, {FAST_US: 500}, False)):
        steps.append(step_after(steps, rate, role, cell(rate, 2.0, counts), confirming, OBJECTIVE,
                                conf.DEFAULT_CONFIDENCE))
    assert [s.verdict.decision for s in steps] == [Decision.PASS, Decision.INCONCLUSIVE, Decision.PASS]
    found = conclude(steps, OBJECTIVE)
    assert found.kind == AnswerKind.PASSED and found.best_pass.rate_rps == 200
    assert [(s.rate_rps, s.confirming) for s in found.inconclusive] == [(400, True)]


def test_a_load_generator_limit_below_the_answer_does_not_make_it_a_lower_bound():
    """170 req/s was limited by the load generator, 340 passed (not confirmed) and 680 failed: between 340 and
    680, not "at least 340: the load generator was the limit at 170"."""
    from loadtest.judge.verdicts import step_after

    steps: list[Step] = []
    for rate, counts, cpu in ((170, {FAST_US: 500}, 97.0), (340, {FAST_US: 700}, None),
                              (680, {FAST_US: 900, SLOW_US: 100}, None)):
        steps.append(step_after(steps, rate, Role.BRACKET, cell(rate, 2.0, counts, loadgen_cpu=cpu), False,
                                OBJECTIVE, conf.DEFAULT_CONFIDENCE))
    found = conclude(steps, OBJECTIVE)
    assert found.best_pass.rate_rps == 340 and not found.at_least
    assert found.uncertainty() == "between 340 and 680 req/s (upper end 680)"


# ------------------------------------------------------------------------- latency growing within one cell

GROWING_MS = [6.0, 9.5, 11.5, 20.0]  # halves 7.75 -> 15.75 ms: doubled and +8 ms, all well under the objective
STEADY_MS = [6.0, 6.5, 6.2, 6.4]


class BurstServer(Server):
    """Fast at every rate up to `capacity`; the first cell at each rate in `bursts` shows its latency doubling
    between halves (a burst of arrivals, or the host's moment), the next ones at that rate do not; at every rate
    in `queues` each cell shows it (a queue building)."""

    def __init__(self, capacity: float, bursts: tuple[float, ...] = (), queues: tuple[float, ...] = ()):
        super().__init__(capacity)
        self.bursts, self.queues = bursts, queues

    def measure(self, rate: float, role: Role, window_s: float | None) -> Measured:
        measured = super().measure(rate, role, window_s)
        first_here = [r for r, _ in self.offered].count(rate) == 1
        grows = rate in self.queues or (rate in self.bursts and first_here)
        windows = max(4, round(measured.result.load.duration_s / 0.5))
        latency = (GROWING_MS if grows else STEADY_MS) * (windows // 4)
        result = replace(measured.result, load=replace(measured.result.load, window_s=0.5),
                         window_latency_ms=latency, window_scheduled_rps=[], window_throughput_rps=[rate] * windows)
        self.cells[-1] = result
        return Measured(result, measured.server_alive)


def test_latency_growing_in_one_cell_is_measured_again_before_it_is_called_a_queue():
    """One cell whose mean latency doubled (p99 far under the objective) is not yet a fail: inconclusive, measured
    again at least as long; growth seen again is a queue (overloaded), a steady second cell answers the rate on
    every request of both."""
    burst = cell(400, 2.0, {FAST_US: 800})
    grew = replace(burst, load=replace(burst.load, window_s=0.5), window_latency_ms=GROWING_MS,
                   window_scheduled_rps=[], window_throughput_rps=[400.0] * 4)
    steady = replace(grew, window_latency_ms=STEADY_MS)
    first = verdict_of([grew], OBJECTIVE)
    assert first.decision == Decision.INCONCLUSIVE and first.again_s == 2.0
    assert first.reason == ("mean latency grew from 7.75 ms to 15.75 ms between the cell's halves: measured again "
                            "to tell a queue building from a burst")
    assert verdict_of([grew, steady], OBJECTIVE).passed
    again = verdict_of([grew, grew], OBJECTIVE)
    assert again.decision == Decision.FAIL and again.reason.endswith("(seen in 2 of 2 measurements at this rate)")
    assert verdict_of([steady, grew], OBJECTIVE).decision == Decision.INCONCLUSIVE  # the newest grew: again
    slow = replace(grew, histogram_us=encoded(((FAST_US, 700), (SLOW_US, 100))))
    assert verdict_of([slow], OBJECTIVE).decision == Decision.FAIL  # its p99 fails anyway: no second look


def test_a_burst_does_not_cap_the_search_and_a_queue_still_does():
    """A burst at 600 req/s (true capacity 730): measured again (role extend, a 2 s window at least), it passes,
    and the search answers above it. A queue building at 600: seen twice, it fails and bounds the answer."""
    bursty = BurstServer(capacity=730, bursts=(600.0,))
    answer = search(bursty, start=300, precision=0.1).run()
    at_600 = rates_measured(answer, 600)
    assert [s.role for s in at_600][:2] == [Role.BRACKET, Role.EXTEND] and at_600[1].result.load.duration_s >= 2.0
    assert at_600[1].verdict.passed
    assert answer.capacity.rate_rps > 600
    queueing = BurstServer(capacity=730, queues=(600.0,))
    answer = search(queueing, start=300, precision=0.1).run()
    assert rates_measured(answer, 600)[-1].verdict.reason.startswith("overloaded: mean latency grew")
    assert answer.capacity.rate_rps < 600
