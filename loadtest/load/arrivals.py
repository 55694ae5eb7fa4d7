"""Open-loop arrival schedules: the gap before the next request of one arrival stream.

A registry by name (`ARRIVAL_GAPS`, keyed by `Arrival`): the plan's `arrival` and Locust's
`--arrival` choose from it. Each gap function is pure given its random generator.

Not for: sending requests (`loadtest.load.locustfile`) or statistics (`loadtest.evidence.stats`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from loadtest.evidence.vocab import Arrival


def constant_gap(rng: random.Random, rate_per_s: float) -> float:
    """Evenly spaced arrivals at `rate_per_s`."""
    return 1.0 / rate_per_s


def poisson_gap(rng: random.Random, rate_per_s: float) -> float:
    """Exponential inter-arrival gap: arrivals of a Poisson process at `rate_per_s`."""
    return rng.expovariate(rate_per_s)


ARRIVAL_GAPS: dict[Arrival, Callable[[random.Random, float], float]] = {
    Arrival.CONSTANT: constant_gap,
    Arrival.POISSON: poisson_gap,
}
