"""How clustered a rate's slow requests are in time, for the effective sample size its verdict stands on (issue #67).

MLPerf's early-stopping rule counts k requests over the objective in N and assumes each request is an independent
draw. Near a queue's knee they are not: a backlog that once reaches the objective keeps every request that arrives
before it drains over it, so the slow ones come in clusters of m at a time, and k varies m times as much as a
binomial's. 459 requests with none over then say as much as 459 / m independent ones. The same holds for a host
stall that holds every request in its span.

The dispersion phi estimates m as batch means do: each cell's windows (its throughput windows, by intended send
time, `CellResult.window_histograms_us`) are grouped into batches of about `BATCH_S` (longer than a queue's cluster
at its knee here, 0.05-0.5 s), and Pearson's statistic of the count over the threshold in each batch, against a
binomial's at the pooled share, divided by its degrees of freedom, is phi, never below 1, and 1 where the statistic
is within what independent requests would show 99 times in 100 (one batch length, and that test: a few batches of
independent requests read 1.5-2 by chance, and every verdict would pay for it). It is read at the objective itself,
where at least `MIN_OVERS` requests lie over it; with fewer, nothing is known of how they cluster and phi is 1 (as
for records made before windows were kept). Read lower down it mistook a host's short stalls for clusters at rates
far below the knee (phi 5-7 at 40% busy, 30 ms, on the build machine) and held every verdict there, while a queue's
clusters are shorter there than at the objective (`make bench-queue-search`): no lower threshold stands for the
objective's. A rate with too few over the objective to show how its slow requests cluster borrows phi from the nearest
higher rate of its search within `LEND_MAX_RATIO` that can show it, with at most `LEND_MAX_SHARE` over (a queue's
clusters only grow with its load; an overloaded rate's backlog is no cluster): without it, a pass just above the true
capacity from a window with none over was read on independent requests, the misses `make bench-queue-search` counted
(docs/performance.md#ranges-against-answers-known-in-advance-issue-67). A cell too short for `MIN_GROUPS` batches of
`BATCH_S` (a bracket's 3 s) is read window by window, so a failing bracket cell shows, and lends, its clusters.

The verdict then stands on N / phi requests with k / phi over (`loadtest.judge.confidence.judge`): a pass needs
phi times the requests, a fail phi times the share's excess.

Pure functions. Not for: the verdict itself (`loadtest.judge.confidence`, `loadtest.judge.verdicts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from hdrh.histogram import HdrHistogram
from scipy.stats import chi2

from loadtest.evidence.records import CellResult
from loadtest.evidence.stats import decode, recorded_buckets

MIN_OVERS = 10  # requests over the objective for a share to read clusters from
MIN_GROUPS = 4  # batches needed for Pearson's statistic
BATCH_S = 1.0  # a batch's seconds: windows per batch = BATCH_S / the cell's window (at least 1)
SIGNIFICANCE = 0.01  # clustering is read only where independent requests would vary so much less often than this
LEND_MAX_RATIO = 1.25  # a rate with too few over the objective borrows phi from a higher rate within this factor
LEND_MAX_SHARE = 0.25  # ... whose share over the objective is at most this (past it, an overloaded queue's backlog)


@lru_cache(maxsize=65536)
def _decoded(encoded: str) -> HdrHistogram:
    return decode(encoded)


def _over(histogram: HdrHistogram, threshold_us: float) -> int:
    return sum(count for value, count in recorded_buckets(histogram) if value > threshold_us)


def window_counts(cell: CellResult, threshold_us: float) -> list[tuple[int, int]]:
    """(requests, over the threshold) of each of the cell's windows, in order."""
    out = []
    for encoded in cell.window_histograms_us:
        if not encoded:
            out.append((0, 0))
            continue
        histogram = _decoded(encoded)
        out.append((histogram.get_total_count(), _over(histogram, threshold_us)))
    return out


def _pearson(groups: Sequence[tuple[int, int]], share: float) -> float | None:
    """Pearson's statistic over its degrees of freedom for (requests, over) groups against a binomial at `share`, where
    it says the counts vary more than a binomial's at `SIGNIFICANCE` (else 1: a few batches read ~1.5-2 by chance
    for independent requests); None with too few groups to say."""
    used = [(n, o) for n, o in groups if n > 0]
    if len(used) < MIN_GROUPS or not 0 < share < 1:
        return None
    statistic = sum((o - share * n) ** 2 / (share * (1 - share) * n) for n, o in used)
    freedom = len(used) - 1
    if float(chi2.sf(statistic, freedom)) > SIGNIFICANCE:
        return 1.0
    return statistic / freedom


def grouped(windows: Sequence[tuple[int, int]], size: int) -> list[tuple[int, int]]:
    """(requests, over) of consecutive `size` windows summed, a remainder shorter than `size` left out."""
    return [(sum(n for n, _ in windows[i:i + size]), sum(o for _, o in windows[i:i + size]))
            for i in range(0, len(windows) - size + 1, size)]


def _batches(cell: CellResult, windows: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The cell's windows in batches of about `BATCH_S`; window by window where that leaves fewer than `MIN_GROUPS`
    (a bracket's 3 s cell: three 1 s batches, too few for the statistic, six 0.5 s windows enough)."""
    batches = grouped(windows, max(1, round(BATCH_S / cell.load.window_s)))
    return batches if len(batches) >= MIN_GROUPS else list(windows)


def own_dispersion(cells: Sequence[CellResult], objective_ms: float) -> tuple[float, float] | None:
    """(phi, share over the objective) read from `cells` (one rate's, pooled); None where they cannot show how their
    slow requests cluster (fewer than `MIN_OVERS` over the objective, or no windows kept)."""
    kept = [c for c in cells if c.window_histograms_us]
    per_cell = [window_counts(c, objective_ms * 1000.0) for c in kept]
    requests = sum(n for windows in per_cell for n, _ in windows)
    over = sum(o for windows in per_cell for _, o in windows)
    if over < MIN_OVERS or requests == 0:
        return None
    share = over / requests
    batches = [g for cell, windows in zip(kept, per_cell, strict=True) for g in _batches(cell, windows)]
    phi = _pearson(batches, share)
    return (max(1.0, phi) if phi is not None else 1.0), share


def dispersion(cells: Sequence[CellResult], objective_ms: float,
               above: Sequence[Sequence[CellResult]] = ()) -> float:
    """phi of the requests over `objective_ms` in `cells` (one rate's, pooled). Where they have too few over the
    objective to show it, phi is lent by the nearest of `above` (the cells of each higher rate of the same search,
    nearest first) that can show it with at most `LEND_MAX_SHARE` over: a queue's clusters only grow with its load,
    so the rate above bounds them from above. 1 where nothing says otherwise."""
    own = own_dispersion(cells, objective_ms)
    if own is not None:
        return own[0]
    for higher in above:
        lent = own_dispersion(higher, objective_ms)
        if lent is not None and lent[1] <= LEND_MAX_SHARE:
            return lent[0]
    return 1.0


__all__ = ["BATCH_S", "LEND_MAX_RATIO", "LEND_MAX_SHARE", "MIN_OVERS", "dispersion", "grouped", "own_dispersion",
           "window_counts"]
