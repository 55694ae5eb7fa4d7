"""How clustered a rate's slow requests are (`loadtest.judge.dispersion`), on cells whose windows are planted: slow
requests spread as a binomial's read about 1, in clusters of m about m; and a verdict on clustered requests stands
on N / phi of them (`loadtest.judge.confidence.judge`)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from loadtest.evidence.objective import Objective
from loadtest.evidence.stats import encode, histogram_of
from loadtest.evidence.vocab import Role
from loadtest.judge import confidence as conf
from loadtest.judge.dispersion import LEND_MAX_RATIO, dispersion, own_dispersion
from loadtest.judge.verdicts import Decision, rates_above, step_after
from tests.loadtest.search.test_capacity import passing_cell

FAST_US, SLOW_US = 5_000.0, 80_000.0
OBJECTIVE_MS = 50.0


def windowed(overs_per_window: list[int], per_window: int = 200, window_s: float | None = None):
    """A cell of len(overs_per_window) windows of `per_window` requests each, that many over the objective in each
    (`window_s` each where given, else the fixture's)."""
    windows = [[SLOW_US] * o + [FAST_US] * (per_window - o) for o in overs_per_window]
    every = [v for w in windows for v in w]
    base = passing_cell()
    load = base.load if window_s is None else replace(base.load, window_s=window_s,
                                                        duration_s=window_s * len(overs_per_window))
    return replace(base, load=load, window_histograms_us=[encode(histogram_of(w)) for w in windows],
                   histogram_us=encode(histogram_of(every)), requests=len(every), ok_requests=len(every))


def test_slow_requests_spread_as_a_binomials_read_about_one():
    rng = np.random.default_rng(7)
    phis = [dispersion([windowed(list(rng.binomial(200, 0.02, 40)))], OBJECTIVE_MS) for _ in range(20)]
    assert 1.0 <= float(np.median(phis)) < 1.5


@pytest.mark.parametrize("size", [5, 20])
def test_slow_requests_in_clusters_of_m_read_about_m(size):
    rng = np.random.default_rng(3)
    phis = []
    for _ in range(20):
        clusters = rng.poisson(200 * 0.02 / size, 40)  # the same 2% over, in clusters of `size`
        phis.append(dispersion([windowed([min(200, size * int(c)) for c in clusters])], OBJECTIVE_MS))
    assert size / 2 < float(np.median(phis)) < size * 1.6


def test_without_windows_or_slow_requests_nothing_is_known_and_phi_is_one():
    assert dispersion([passing_cell()], OBJECTIVE_MS) == 1.0  # a record made before windows were kept
    assert dispersion([windowed([0] * 30)], OBJECTIVE_MS) == 1.0


def test_clusters_are_read_at_the_objective_only():
    """Slow requests in bursts at 30 ms: clustered at a 25 ms objective; at 50 ms none is over it, and nothing lower
    down stands for how requests over 50 ms would cluster (a host's short stalls are not a queue's clusters)."""
    windows = [[30_000.0] * (20 if i % 10 == 0 else 0) + [FAST_US] * 180 for i in range(30)]  # 30 ms, in bursts
    clustered = replace(windowed([0] * 30), window_histograms_us=[encode(histogram_of(w)) for w in windows],
                        histogram_us=encode(histogram_of([v for w in windows for v in w])))
    assert dispersion([clustered], 25.0) > 5
    assert dispersion([clustered], OBJECTIVE_MS) == 1.0


def test_a_verdict_on_clustered_requests_stands_on_n_over_phi():
    histogram = histogram_of([FAST_US] * 1000)  # none over: a pass on 459 independent requests or more
    assert conf.judge(histogram, OBJECTIVE_MS).outcome == conf.Outcome.PASS
    clustered = conf.judge(histogram, OBJECTIVE_MS, dispersion=4.0)  # 250 effective: too few for any pass
    assert clustered.outcome == conf.Outcome.INCONCLUSIVE and clustered.requests_to_pass == 4 * 459
    assert "effective 250: slow ones clustered ×4.0" in clustered.describe()
    failing = histogram_of([FAST_US] * 950 + [SLOW_US] * 50)  # 5% over: a fail, independent or in clusters of 4
    assert conf.judge(failing, OBJECTIVE_MS).outcome == conf.Outcome.FAIL
    assert conf.judge(failing, OBJECTIVE_MS, dispersion=4.0).outcome == conf.Outcome.FAIL
    assert conf.judge(failing, OBJECTIVE_MS, dispersion=20.0).outcome == conf.Outcome.INCONCLUSIVE


def test_a_short_cell_reads_its_clusters_window_by_window():
    """A bracket's 3 s cell of 0.5 s windows makes three 1 s batches, too few for the statistic: its six windows are
    read one by one, so a failing bracket cell's clusters are seen (they read 1 when batched)."""
    bursts = [0, 0, 40, 0, 0, 40]  # 80 of 1,200 over, all in two windows: clustered
    assert dispersion([windowed(bursts, window_s=0.5)], OBJECTIVE_MS) > 10
    assert dispersion([windowed([0, 0, 0, 0, 0, 40, 0, 0, 0, 40], window_s=1.0)], OBJECTIVE_MS) > 10  # 1 s batches


def test_a_rate_that_cannot_show_its_clusters_borrows_them_from_the_nearest_rate_above():
    quiet = windowed([0] * 5 + [1] + [0] * 4)  # one request over: nothing known of its clusters
    clustered = windowed([0, 0, 30, 0, 0, 0, 30, 0, 0, 0])  # 3% over, in bursts
    spread = windowed([2] * 10)  # 1% over, spread as a binomial's
    overloaded = windowed([120] * 10)  # 60% over: an overloaded queue's backlog lends nothing
    assert own_dispersion([quiet], OBJECTIVE_MS) is None
    lent = own_dispersion([clustered], OBJECTIVE_MS)
    assert lent is not None and lent[0] > 10
    assert dispersion([quiet], OBJECTIVE_MS, [[clustered]]) == lent[0]
    assert dispersion([quiet], OBJECTIVE_MS, [[spread], [clustered]]) == 1.0  # the nearest that shows it lends
    assert dispersion([quiet], OBJECTIVE_MS, [[overloaded], [clustered]]) == lent[0]
    assert dispersion([quiet], OBJECTIVE_MS, [[overloaded]]) == 1.0
    assert dispersion([clustered], OBJECTIVE_MS, [[spread]]) == lent[0]  # a rate that shows its own keeps it


def test_a_pass_beside_a_clustered_rate_just_above_it_needs_phi_times_the_requests():
    """The search and the report's replay lend alike (`step_after`): the rate above within ×1.25 lends its clusters,
    so 2,000 requests with none over, a pass on their own, are too few; a rate beyond ×1.25 lends nothing."""
    objective = Objective(OBJECTIVE_MS)
    clustered = windowed([0, 0, 30, 0, 0, 0, 30, 0, 0, 0])
    quiet = windowed([0] * 10)
    above = step_after([], 120.0, Role.BRACKET, clustered, False, objective, 0.99)
    assert step_after([], 100.0, Role.BISECT, quiet, False, objective, 0.99).verdict.decision == Decision.PASS
    judged = step_after([above], 100.0, Role.BISECT, quiet, False, objective, 0.99).verdict
    assert judged.decision == Decision.INCONCLUSIVE and judged.evidence.dispersion > 10
    far = replace(above, rate_rps=100.0 * LEND_MAX_RATIO + 1)
    assert rates_above([far], 100.0) == []
    assert step_after([far], 100.0, Role.BISECT, quiet, False, objective, 0.99).verdict.decision == Decision.PASS
