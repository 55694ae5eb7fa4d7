"""Queueing theory checked against closed forms: M/M/1's sojourn time is exponential (rate mu - lambda), M/D/1's mean
wait is Pollaczek-Khinchine's rho S / (2 (1 - rho)), and the capacity found by bisection is where the p99 meets the
objective."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadtest.benchmarks.queueing import Queue, constant, empirical

SERVICE_S = 0.004


def exponential(mean_s: float):
    return lambda rng, n: rng.exponential(mean_s, n)


def test_mm1_p99_is_the_exponential_sojourns():
    queue = Queue(exponential(SERVICE_S), SERVICE_S)
    rate = 0.7 / SERVICE_S
    expected = math.log(100) / (1 / SERVICE_S - rate)  # P(T > t) = exp(-(mu - lambda) t)
    assert queue.percentile_s(rate) == pytest.approx(expected, rel=0.03)


def test_md1_mean_wait_is_pollaczek_khinchine():
    queue = Queue(constant(SERVICE_S), SERVICE_S)
    rho = 0.8
    sojourns = queue.sojourn_s(rho / SERVICE_S)
    expected = SERVICE_S + rho * SERVICE_S / (2 * (1 - rho))
    assert float(np.mean(sojourns)) == pytest.approx(expected, rel=0.03)


def test_the_client_time_adds_outside_the_queue():
    alone = Queue(constant(SERVICE_S), SERVICE_S)
    with_client = Queue(constant(SERVICE_S), SERVICE_S, constant(0.002))
    rate = 0.5 / SERVICE_S
    assert with_client.percentile_s(rate) == pytest.approx(alone.percentile_s(rate) + 0.002, rel=1e-9)


def test_capacity_is_where_the_p99_meets_the_objective():
    queue = Queue(exponential(SERVICE_S), SERVICE_S)
    objective_s = 0.040
    capacity = queue.capacity_rps(objective_s)
    expected = 1 / SERVICE_S - math.log(100) / objective_s  # M/M/1: p99 = ln(100) / (mu - lambda)
    assert capacity == pytest.approx(expected, rel=0.02)
    assert queue.percentile_s(capacity) <= objective_s < queue.percentile_s(capacity * 1.01)


def test_an_objective_no_lone_request_meets_has_no_capacity():
    assert Queue(constant(SERVICE_S), SERVICE_S).capacity_rps(SERVICE_S / 2) == 0.0


def test_an_empirical_distribution_draws_only_what_was_measured():
    draw = empirical(np.array([0.001, 0.003]))
    assert set(np.unique(draw(np.random.default_rng(1), 1000))) == {0.001, 0.003}
    with pytest.raises(ValueError):
        empirical(np.array([]))
