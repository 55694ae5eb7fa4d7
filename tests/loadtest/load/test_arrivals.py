"""Open-loop arrival gaps: evenly spaced, or a Poisson process's exponential gaps."""

from __future__ import annotations

import random

import pytest

from loadtest.load.arrivals import ARRIVAL_GAPS


def test_arrival_gaps():
    rng = random.Random(7)
    assert ARRIVAL_GAPS["constant"](rng, 250.0) == 0.004
    gaps = [ARRIVAL_GAPS["poisson"](rng, 100.0) for _ in range(20000)]
    assert sum(gaps) / len(gaps) == pytest.approx(0.01, rel=0.03)  # mean gap 1/rate
    assert min(gaps) >= 0.0 and max(gaps) > 0.05  # exponential: a long tail, not evenly spaced
