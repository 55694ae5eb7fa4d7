"""Whose slow requests: the host's, the server's, or the client's and the wire's (issue #28).

A p99 objective L allows 1% of requests over L. Three records of a cell say who made its slow ones:

- the client's latency histogram (`CellResult.histogram_us`, timed from each intended send): the share
  of requests over L;
- the server's own request latency (`CellResult.server_latency`, its histogram's buckets over the
  cell): the share of requests the server itself held for longer than L;
- the host probe (`CellResult.host_probe`, `loadtest.measure.hiccups`): a 1 ms sleep loop on the
  server's cores and on the load generator's. A request arriving at a random moment waits out the
  rest of any stall in progress, so the share of the cell's time in which the host alone would have
  held it longer than L is sum(max(0, oversleep - L)) / duration. For Poisson arrivals the share of
  requests that arrive then is the same (arrivals see time averages).

A host whose share over L exceeds `HOST_SHARE_LIMIT` (half the 1% a p99 allows) makes p99 <= L
unconfirmable by itself, whatever the server does: `lowest_confirmable_ms` says the smallest
objective a host allowed. One whose share exceeds the 1% itself (`ALLOWED_SHARE`) fails p99 <= L by
itself, and is named whatever the client's share: behind a stall of D ms on the server's cores a
server busy a share u of the time drains its queue for D·u/(1-u) ms more, so the requests over L
outnumber the host's share by about 1/(1-u) (2.5 times at u = 0.6), and the server's own latency
counts the queue it drained as its own. The two probes may see one stall twice (a hypervisor pause
stops every core), so the host's share is the larger side's, never their sum.

Pure functions over `CellResult`s (HdrHistogram arithmetic only). Not for: measuring (`loadtest.measure.hiccups`,
`loadtest.measure.server_phases`) or the verdicts themselves (`loadtest.judge.verdicts`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from loadtest.evidence import stats
from loadtest.evidence.cell_parts import ProbeSide
from loadtest.evidence.records import CellResult

ALLOWED_SHARE = 0.01  # of requests a p99 allows over its objective
HOST_SHARE_LIMIT = 0.005  # half of ALLOWED_SHARE: a verdict that confirms needs k/N well under it
EXPLAINS = 0.5  # a share at least half the client's explains the client's slow requests
SIDES = ("server", "loadgen")
SIDE_NAMES = {"server": "the server's cores", "loadgen": "the load generator's cores"}
LOADGEN_CALM_SHARE = 0.75  # of a core per process, and of all its cores: a load generator below it is not busy
LAG_SHARE = 0.01  # the dispatch lag's p99: 1% of sends lagged at least that much


class NoiseSource(StrEnum):
    HOST = "host"  # the machine kept the processes from running
    SERVER = "server"  # the server itself held the requests
    CLIENT_WIRE = "client and wire"  # neither: the load generator, the network stack, the client's gRPC
    NONE = "none"  # no request over the objective


# ----------------------------------------------------------------------------- the host probe


def probe_sides(cell: CellResult) -> dict[str, ProbeSide]:
    """The probe's sides that recorded a histogram ({} for a cell without the probe, or where it could not run)."""
    probe = cell.host_probe
    return {name: side for name in SIDES if probe and (side := probe.side(name)) is not None and side.histogram}


@lru_cache(maxsize=8192)
def recorded(encoded: str) -> tuple[tuple[int, int], ...]:
    """(value, count) of every value an encoded HdrHistogram recorded, the value its bucket's upper edge (0.1%
    high at most); decoded and walked once per histogram (a report asks each one at many objectives)."""
    return tuple(stats.recorded_buckets(stats.decode(encoded)))


def count_over(encoded: str, limit_us: float) -> int:
    """How many recorded values of an encoded HdrHistogram exceed `limit_us`."""
    return sum(count for value, count in recorded(encoded) if value > limit_us)


def host_time_over_us(probe_side: ProbeSide, objective_ms: float) -> float:
    """The µs of the side's measured time in which the host alone held a sleeper longer than the objective."""
    limit_us = objective_ms * 1000.0
    return sum(count * (value - limit_us) for value, count in recorded(probe_side.histogram or "")
               if value > limit_us)


def host_time_over_share(probe_side: ProbeSide, objective_ms: float) -> float:
    """The share of the side's measured time in which a request arriving at a random moment would have
    waited more than `objective_ms` because of the host alone: sum(max(0, oversleep - L)) / duration."""
    duration_us = float(probe_side.duration_s or 0.0) * 1e6
    return host_time_over_us(probe_side, objective_ms) / duration_us if duration_us > 0 else 0.0


def host_share(cells: Sequence[CellResult], objective_ms: float) -> tuple[float, str] | None:
    """The host's share over the objective across `cells` (time-weighted) on its worse side, and that
    side; None when no cell recorded the probe."""
    shares = []
    for side in SIDES:
        recorded = [probe_sides(c)[side] for c in cells if side in probe_sides(c)]
        duration_us = sum(float(s.duration_s or 0.0) * 1e6 for s in recorded)
        if recorded and duration_us > 0:
            shares.append((sum(host_time_over_us(s, objective_ms) for s in recorded) / duration_us, side))
    return max(shares) if shares else None


def lowest_objective_ms(probe_side: ProbeSide, limit: float = HOST_SHARE_LIMIT) -> float:
    """The smallest objective (ms, to 0.1 ms above) at which the side's host share is at most `limit`."""
    values = recorded(probe_side.histogram or "")
    high = max((value for value, _ in values), default=0) / 1000.0
    if host_time_over_share(probe_side, 0.0) <= limit:
        return 0.0
    low = 0.0  # the share falls as the objective grows: bisect down to 0.01 ms
    while high - low > 0.01:
        middle = (low + high) / 2
        low, high = (low, middle) if host_time_over_share(probe_side, middle) <= limit else (middle, high)
    return math.ceil(high * 10 - 1e-9) / 10


def lowest_confirmable_ms(cells: Sequence[CellResult]) -> float | None:
    """The smallest p99 objective the host let these cells confirm: its share over it stays under
    `HOST_SHARE_LIMIT` on both sides in every cell; None when no cell recorded the probe."""
    lows = [lowest_objective_ms(side) for c in cells for side in probe_sides(c).values()]
    return max(lows) if lows else None


# ----------------------------------------------------------------------------- client and server


def client_share(cells: Sequence[CellResult], objective_ms: float) -> float:
    """The share of the cells' requests (their merged client histogram) over the objective."""
    encoded = [c.histogram_us for c in cells if c.histogram_us]
    total = sum(count for e in encoded for _, count in recorded(e))
    return sum(count_over(e, objective_ms * 1000.0) for e in encoded) / total if total else 0.0


def bucket_share_over(buckets: Sequence[Sequence], limit_us: float) -> tuple[float, float]:
    """Observations over `limit_us` and all of them, from `[[upper_us | None (+Inf), count], ...]` in order:
    a bucket straddling the limit counts in proportion to its width above it (linear within it)."""
    over, total, lower = 0.0, 0.0, 0.0
    for upper, count in buckets:
        total += count
        if upper is None or lower >= limit_us:
            over += count
        elif upper > limit_us:
            over += count * (upper - limit_us) / (upper - lower)
        lower = upper if upper is not None else lower
    return over, total


def server_share(cells: Sequence[CellResult], objective_ms: float) -> float | None:
    """The share of the server's own requests over the objective across the cells; None where it exported none."""
    counted = [bucket_share_over(c.server_latency.buckets, objective_ms * 1000.0)
               for c in cells if c.server_latency and c.server_latency.buckets]
    total = sum(t for _, t in counted)
    return sum(o for o, _ in counted) / total if counted and total > 0 else None


# ----------------------------------------------------------------------------- attribution


@dataclass(frozen=True)
class Attribution:
    """Who made the requests over `objective_ms` slow, and the three shares compared."""

    source: NoiseSource
    objective_ms: float
    client_share: float  # of the client's requests over the objective
    server_share: float | None  # of the server's own requests over it; None where not exported
    host_share: float | None  # of the cells' time the host alone held a sleeper over it; None without the probe
    host_side: str = ""  # "server" or "loadgen": whose cores `host_share` is from

    def describe(self) -> str:
        """One sentence: who, and the shares that say so."""
        limit = f"{self.objective_ms:g} ms"
        server = "not exported" if self.server_share is None else f"{self.server_share:.1%}"
        host = "not probed" if self.host_share is None else (
            f"{self.host_share:.1%} of the time on {SIDE_NAMES.get(self.host_side, self.host_side)}")
        if self.source == NoiseSource.NONE:
            return f"no request over {limit} at the client"
        if self.source == NoiseSource.HOST:
            return (f"the host: {self.client_share:.1%} of requests over {limit} at the client, and the host alone "
                    f"held a 1 ms sleep loop over {limit} for {host} (the server's own latency: {server})")
        if self.source == NoiseSource.SERVER:
            return (f"the server: its own latency put {server} of requests over {limit} against "
                    f"{self.client_share:.1%} at the client, while the host stayed quiet ({host})")
        return (f"the client or the wire: {self.client_share:.1%} of requests over {limit} at the client, "
                f"the server's own latency {server}, the host {host}")


def attribute(cells: Sequence[CellResult], objective_ms: float) -> Attribution:
    """Who made the cells' requests over `objective_ms` slow: the host when its share explains at least
    half the client's (`EXPLAINS`) or alone exceeds what a p99 allows (`ALLOWED_SHARE`: no server could pass
    there, and the queue a stall leaves behind multiplies the client's share), else the server when its own
    share explains half the client's, else the client and the wire."""
    client = client_share(cells, objective_ms)
    server = server_share(cells, objective_ms)
    host = host_share(cells, objective_ms)
    host_value, side = host if host is not None else (None, "")
    if client <= 0:
        source = NoiseSource.NONE
    elif host_value is not None and (host_value >= EXPLAINS * client or host_value > ALLOWED_SHARE):
        source = NoiseSource.HOST
    elif server is not None and server >= EXPLAINS * client:
        source = NoiseSource.SERVER
    else:
        source = NoiseSource.CLIENT_WIRE
    return Attribution(source, objective_ms, client, server, host_value, side)


# ----------------------------------------------------------------------------- the load generator's lateness


def loadgen_calm(cell: CellResult) -> bool:
    """Whether the load generator's CPU was far from saturation: every process and all its cores together
    under `LOADGEN_CALM_SHARE`."""
    busiest = max(cell.loadgen_process_cpu_percent, default=0.0)
    cores = cell.loadgen_cores or 1
    return busiest < 100 * LOADGEN_CALM_SHARE and cell.loadgen_cpu_percent < 100 * cores * LOADGEN_CALM_SHARE


def host_explains_lateness(cell: CellResult) -> bool:
    """Whether the host's stalls on the load generator's cores explain its late sends and dispatch lag,
    while its CPU was far from saturation: the probe there was held past the late-send threshold for at
    least half the share of sends that left late, and past half the p99 dispatch lag for at least half
    the 1% of sends that lagged that much. False without a probe on the load generator's cores."""
    side = probe_sides(cell).get("loadgen")
    if side is None or not loadgen_calm(cell):
        return False
    late = cell.late_send_fraction
    if late > 0 and host_time_over_share(side, cell.load.late_threshold_ms) < EXPLAINS * late:
        return False
    lag_us = cell.dispatch_lag_p99_us
    limit_ms = cell.load.dispatch_lag_limit_ms
    if lag_us is not None and limit_ms and lag_us > limit_ms * 1000:
        return host_time_over_share(side, lag_us / 2000.0) >= EXPLAINS * LAG_SHARE
    return True

