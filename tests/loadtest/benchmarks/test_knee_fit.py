"""The candidate fit over every cell near the knee (`loadtest.benchmarks.knee_fit`), on cells whose shares over the
objective are planted on a known logistic curve: its interval holds the planted capacity, clusters of m widen it by
about the square root of m, and a search with one rate, or none over the objective, gets no fit."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from loadtest.benchmarks.knee_fit import WINDOW, knee_fit
from loadtest.evidence.stats import encode, histogram_of
from loadtest.evidence.vocab import Role
from loadtest.judge.verdicts import Decision, Step, Verdict
from tests.loadtest.search.test_capacity import passing_cell

FAST_US, SLOW_US = 5_000.0, 80_000.0
OBJECTIVE_MS = 50.0
CAPACITY = 200.0
SLOPE = 12.0  # logit of the share per unit of log rate, as M/D/1's at 25 ms
PER_WINDOW = 200


def share_at(rate: float) -> float:
    return 1 / (1 + math.exp(-(math.log(0.01 / 0.99) + SLOPE * math.log(rate / CAPACITY))))


def step_at(rate: float, overs: list[int]) -> Step:
    windows = [[SLOW_US] * o + [FAST_US] * (PER_WINDOW - o) for o in overs]
    base = passing_cell()
    load = replace(base.load, rate_rps=rate, window_s=0.5, duration_s=0.5 * len(overs))
    every = [v for w in windows for v in w]
    cell = replace(base, load=load, window_histograms_us=[encode(histogram_of(w)) for w in windows],
                   histogram_us=encode(histogram_of(every)), requests=len(every), ok_requests=len(every))
    return Step(rate, Role.BRACKET, cell, Verdict(Decision.PASS, ""))


def search(rng: np.random.Generator, rates: list[float], windows: int = 80, cluster: int = 1) -> list[Step]:
    """Steps at `rates`, each `windows` windows whose slow requests come in clusters of `cluster` at the planted
    share."""
    steps = []
    for rate in rates:
        clusters = rng.poisson(PER_WINDOW * share_at(rate) / cluster, windows)
        steps.append(step_at(rate, [min(PER_WINDOW, cluster * int(c)) for c in clusters]))
    return steps


RATES = [170.0, 185.0, 200.0, 215.0, 230.0]


def test_independent_requests_give_an_interval_holding_the_planted_capacity_and_phi_one():
    held, widths = 0, []
    for seed in range(10):
        fit = knee_fit(search(np.random.default_rng(seed), RATES), OBJECTIVE_MS)
        assert fit is not None and fit.low_rps is not None and fit.high_rps is not None
        assert fit.phi < 1.6
        assert abs(fit.estimate_rps / CAPACITY - 1) < 0.05
        held += fit.low_rps <= CAPACITY <= fit.high_rps
        widths.append(fit.high_rps / fit.low_rps)
    assert held >= 9
    assert float(np.median(widths)) < 1.1


def test_clusters_of_m_read_phi_near_m_and_widen_the_interval():
    def log_width(cluster: int) -> tuple[float, float]:
        fits = [knee_fit(search(np.random.default_rng(seed), RATES, cluster=cluster), OBJECTIVE_MS)
                for seed in range(6)]
        return (float(np.median([math.log(f.high_rps / f.low_rps) for f in fits])),
                float(np.median([f.phi for f in fits])))

    alone, phi_alone = log_width(1)
    clustered, phi = log_width(10)
    assert 5 < phi < 16 and phi_alone < 1.6
    assert clustered / alone > 2.0  # sqrt(10) in theory


def test_rates_far_from_the_knee_are_left_out_of_the_fit():
    steps = search(np.random.default_rng(1), [100.0, *RATES, 400.0])
    fit = knee_fit(steps, OBJECTIVE_MS)
    assert fit is not None and fit.rates == len(RATES)
    assert 400.0 > CAPACITY * WINDOW and 100.0 < CAPACITY / WINDOW


def test_one_rate_or_none_over_the_objective_gives_no_fit():
    assert knee_fit(search(np.random.default_rng(2), [200.0]), OBJECTIVE_MS) is None
    assert knee_fit([step_at(r, [0] * 20) for r in RATES], OBJECTIVE_MS) is None
