"""A capacity read from every cell near the knee, with its interval: a candidate rule for issue #67, scored against
simulated queues by `make bench-queue-search` beside the rule the tool uses, and not used by the tool.

The bracket rule answers with two measured rates: the highest confirmed pass and the lowest rate shown to fail. Its
range is honest (9 in 10 in simulation) but ×1.6-×1.9 wide in a 100 s search, because each end stands on one
rate's requests alone. This rule pools them: near the knee the share of requests over the objective rises
log-linearly with the rate (M/D/1 at 25 ms: logit of the share 11-13 per unit of log rate from 0.75 to 1.2 of the
capacity), so a binomial model, logit(share) = logit(1%) + slope × (log rate - log capacity), is fitted to every
server-bound rate within `WINDOW` of a first fit, and the capacity's interval is where the profile likelihood stays
within `chi2(level, 1) / 2` of its best (its ends found by root-finding). Requests are not independent near the
knee: the counts are scaled by one dispersion phi for the whole fit, the largest of Pearson's statistic over the
fitted shares in batches of each of `BATCHES_S` (quasi-likelihood), never below 1. An interval that reaches past
the rates measured is one-sided.

Pure functions over search steps. Not for: the tool's answer (`loadtest.judge.conclusion`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.stats import chi2

from loadtest.judge.dispersion import grouped, window_counts
from loadtest.judge.verdicts import Step, client_limited

PERCENTILE_SHARE = 0.01  # the share over the objective at the capacity (p99)
WINDOW = 1.35  # rates within this factor of the first fit's capacity are fitted
BATCHES_S = (0.5, 1.0, 2.0)  # batch lengths phi is read at; the largest phi is taken
LEVEL = 0.98  # two-sided: 99% each end, as the bracket rule's verdicts
MARGIN = 0.3  # the interval is searched this far (log rate) past the rates fitted
SLOPES = (0.5, 200.0)  # bounds of the slope, per unit of log rate

Counts = tuple[float, float, float]  # (log rate, requests, over the objective)


@dataclass(frozen=True)
class KneeFit:
    estimate_rps: float
    low_rps: float | None  # None: the interval reaches past the rates measured (one-sided)
    high_rps: float | None
    phi: float
    rates: int  # the rates fitted


def _batches(windows: Sequence[tuple[Step, list[tuple[int, int]]]], batch_s: float) -> list[Counts]:
    """(log rate, requests, over) of each batch of about `batch_s` of each step's windows."""
    out: list[Counts] = []
    for step, counts in windows:
        size = max(1, round(batch_s / step.result.load.window_s)) if step.result.load.window_s else len(counts)
        out += [(math.log(step.rate_rps), n, k) for n, k in grouped(counts, size) if n]
    return out


def _pooled(batches: Sequence[Counts]) -> np.ndarray:
    by: dict[float, list[float]] = {}
    for x, n, k in batches:
        totals = by.setdefault(x, [0.0, 0.0])
        totals[0] += n
        totals[1] += k
    return np.array([(x, n, k) for x, (n, k) in sorted(by.items())], dtype=float).reshape(-1, 3)


def _eta(data: np.ndarray, center: float, slope: float) -> np.ndarray:
    return math.log(PERCENTILE_SHARE / (1 - PERCENTILE_SHARE)) + slope * (data[:, 0] - center)


def _nll(data: np.ndarray, center: float, slope: float) -> float:
    eta = _eta(data, center, slope)
    n, k = data[:, 1], data[:, 2]
    return float(np.sum(k * np.logaddexp(0, -eta) + (n - k) * np.logaddexp(0, eta)))


def _profile(data: np.ndarray, center: float) -> tuple[float, float]:
    """(the least negative log-likelihood with the capacity at exp(center), its slope)."""
    best = minimize_scalar(lambda b: _nll(data, center, b), bounds=SLOPES, method="bounded")
    return float(best.fun), float(best.x)


def _best(data: np.ndarray) -> tuple[float, float]:
    """(log capacity, slope) of the maximum likelihood."""
    found = minimize_scalar(lambda c: _profile(data, c)[0], method="bounded",
                            bounds=(data[:, 0].min() - MARGIN, data[:, 0].max() + MARGIN))
    return float(found.x), _profile(data, float(found.x))[1]


def _phi(batches: Sequence[Counts], center: float, slope: float) -> float:
    """Pearson's statistic of `batches` against the fitted shares, over its degrees of freedom; at least 1."""
    if len(batches) < 3:
        return 1.0
    data = np.array(batches, dtype=float)
    share = 1 / (1 + np.exp(-_eta(data, center, slope)))
    statistic = np.sum((data[:, 2] - data[:, 1] * share) ** 2 / (data[:, 1] * share * (1 - share)))
    return max(1.0, float(statistic) / (len(batches) - 2))


def knee_fit(steps: Sequence[Step], objective_ms: float, level: float = LEVEL) -> KneeFit | None:
    """The capacity fitted to `steps` (a search's, every cell), with its interval at `level`; None with fewer than
    two server-bound rates near the knee."""
    threshold_us = objective_ms * 1000.0
    bound = [(s, window_counts(s.result, threshold_us)) for s in steps
             if not client_limited(s.result) and s.result.window_histograms_us]  # each window decoded once
    everything = _pooled(_batches(bound, BATCHES_S[0]))
    if len(everything) < 2 or everything[:, 2].sum() == 0:
        return None
    first, _ = _best(everything)
    near = [(s, w) for s, w in bound if abs(math.log(s.rate_rps) - first) <= math.log(WINDOW)]
    data = _pooled(_batches(near, BATCHES_S[0]))
    if len(data) < 2:
        return None
    center, slope = _best(data)
    phi = max(_phi(_batches(near, size), center, slope) for size in BATCHES_S)
    scaled = data * np.array([1.0, 1 / phi, 1 / phi])
    low, high = _interval(scaled, center, level)
    return KneeFit(math.exp(center), low, high, phi, len(data))


def _interval(data: np.ndarray, center: float, level: float) -> tuple[float | None, float | None]:
    """The rates whose profile likelihood is within chi2(level, 1) / 2 of the best, at `center`; (None, None) where
    it reaches `MARGIN` past the rates fitted (one-sided)."""
    cut = _profile(data, center)[0] + chi2.ppf(level, 1) / 2
    edges = (data[:, 0].min() - MARGIN, data[:, 0].max() + MARGIN)
    if min(_profile(data, e)[0] for e in edges) <= cut:
        return None, None

    def above_cut(c: float) -> float:
        return _profile(data, c)[0] - cut

    return math.exp(brentq(above_cut, edges[0], center)), math.exp(brentq(above_cut, center, edges[1]))


__all__ = ["KneeFit", "knee_fit"]
