"""`loadtest.judge.noise` with hand-computed numbers: host, server and client shares over an objective,
the lowest objective a host lets a cell confirm, who is named, and lateness the host explains.

Stall lengths are values HdrHistogram holds exactly at 3 significant digits (20,479, 12,287 and
16,383 µs are their buckets' top edges), so the hand arithmetic is exact.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.evidence.cell_parts import HostProbe, ProbeSide, ServerLatency
from loadtest.evidence.objective import Objective
from loadtest.evidence.records import ValidityFlag
from loadtest.evidence.stats import encode, histogram_of
from loadtest.evidence.vocab import Flag
from loadtest.judge import noise, verdicts
from loadtest.judge.noise import NoiseSource
from tests.loadtest.report.handmade import cell, server

QUIET_US = 100


def side(stalls_us: list[int], samples: int, duration_s: float) -> ProbeSide:
    """A probe side: `samples` oversleeps, the stalls among them and the rest 100 µs."""
    values = stalls_us + [QUIET_US] * (samples - len(stalls_us))
    return ProbeSide("0", samples, duration_s, histogram=encode(histogram_of(values)))


def probed(base, server_side: ProbeSide | None = None, loadgen_side: ProbeSide | None = None, **changes):
    return replace(base, host_probe=HostProbe(1.0, server_side, loadgen_side), **changes)


def latency_record(buckets: list) -> ServerLatency:
    """A cell's `server_latency` of these [upper µs | None, count] buckets (what the server's share counts)."""
    return ServerLatency("the server's request_latency histogram", sum(count for _, count in buckets), None, None,
                         None, None, tuple((upper, count) for upper, count in buckets))


def client_histogram(slow: int, slow_us: int = 20479, requests: int = 1000) -> str:
    return encode(histogram_of([slow_us] * slow + [2000] * (requests - slow)))


LABEL = server("cpu", "off")
STALLED = side([20479, 12287], samples=1000, duration_s=1.0)


def test_host_share_is_the_time_a_random_arrival_waits_past_the_objective():
    # (20479 - 10000) + (12287 - 10000) = 12766 µs in 1 s
    assert noise.host_time_over_share(STALLED, 10.0) == pytest.approx(0.012766)
    assert noise.host_time_over_share(STALLED, 15.0) == pytest.approx(0.005479)  # 20479 - 15000 only
    assert noise.host_time_over_share(STALLED, 25.0) == 0.0
    assert noise.host_time_over_share(ProbeSide(note="could not pin"), 10.0) == 0.0


def test_lowest_confirmable_objective_is_where_the_host_share_falls_to_half_a_percent():
    # Over 12.287 ms only the 20.479 ms stall counts: 20479 - L <= 5000 µs  =>  L >= 15.479 ms, to 0.1 ms: 15.5
    assert noise.lowest_objective_ms(STALLED) == 15.5
    quiet = side([], samples=1000, duration_s=1.0)  # 1000 x 100 µs = 10% of the time over 0 ms, none over 0.1 ms
    assert noise.lowest_objective_ms(quiet) == 0.1
    cells = [probed(cell(LABEL), STALLED, quiet), probed(cell(LABEL), quiet, quiet)]
    assert noise.lowest_confirmable_ms(cells) == 15.5  # the worst side of any cell
    assert noise.lowest_confirmable_ms([cell(LABEL), probed(cell(LABEL))]) is None  # no probe recorded


def test_host_share_of_several_cells_is_time_weighted_and_takes_the_worse_side():
    long_quiet = side([], samples=3000, duration_s=3.0)
    cells = [probed(cell(LABEL), STALLED, long_quiet), probed(cell(LABEL), long_quiet, long_quiet)]
    share, which = noise.host_share(cells, 10.0)
    assert which == "server" and share == pytest.approx(12766 / 4e6)  # one stalled second of four
    assert noise.host_share([cell(LABEL)], 10.0) is None


def test_server_share_counts_a_straddling_bucket_in_proportion():
    # objective 10 ms: 4 x (15000 - 10000) / (15000 - 5000) = 2 from the straddling bucket, + 1 in +Inf, of 100
    latency = latency_record([[1000.0, 90.0], [5000.0, 5.0], [15000.0, 4.0], [None, 1.0]])
    assert noise.server_share([replace(cell(LABEL), server_latency=latency)], 10.0) == pytest.approx(0.03)
    assert noise.bucket_share_over(latency.buckets, 20_000) == (1.0, 100.0)
    assert noise.server_share([cell(LABEL)], 10.0) is None


def test_client_share_is_the_requests_over_the_objective():
    slow = replace(cell(LABEL), histogram_us=client_histogram(30))
    assert noise.client_share([slow], 10.0) == pytest.approx(0.03)
    assert noise.client_share([slow], 25.0) == 0.0


SERVER_SLOW = latency_record([[5000.0, 970.0], [15000.0, 20.0], [25000.0, 10.0], [None, 0.0]])  # 2% over 10 ms
SERVER_FAST = latency_record([[5000.0, 998.0], [15000.0, 2.0], [None, 0.0]])  # 0.1% over 10 ms


def test_attribution_names_the_host_when_its_stalls_explain_the_client():
    stalls = side([20479] * 5, samples=1000, duration_s=1.0)  # 5 x 10479 µs = 5.2% of the time over 10 ms
    quiet = side([], samples=1000, duration_s=1.0)
    base = replace(cell(LABEL), histogram_us=client_histogram(30), server_latency=SERVER_FAST)
    found = noise.attribute([probed(base, stalls, quiet)], 10.0)
    assert found.source == NoiseSource.HOST and found.host_side == "server"
    assert found.client_share == pytest.approx(0.03) and found.host_share == pytest.approx(0.052395)
    assert found.describe().startswith("the host: 3.0% of requests over 10 ms at the client")
    assert "5.2% of the time on the server's cores" in found.describe()


def test_attribution_names_the_server_when_its_own_tail_matches_and_the_host_is_quiet():
    quiet = side([], samples=1000, duration_s=1.0)
    base = replace(cell(LABEL), histogram_us=client_histogram(30), server_latency=SERVER_SLOW)
    found = noise.attribute([probed(base, quiet, quiet)], 10.0)
    assert found.source == NoiseSource.SERVER  # its own 1% + 1% = 2% >= half the client's 3%
    assert found.server_share == pytest.approx(0.02) and found.host_share == 0.0
    assert "its own latency put 2.0% of requests over 10 ms against 3.0% at the client" in found.describe()


# Behind a host's stall the server drains the queue it left (its own latency counts it): 4.5% over 10 ms.
SERVER_DRAINING = latency_record([[10000.0, 955.0], [25000.0, 45.0], [None, 0.0]])


def test_a_host_that_alone_puts_more_than_a_p99_allows_over_the_objective_is_named():
    # 2 stalls of 20.479 ms in 1 s: 2 x 10479 µs = 2.1% of the time over 10 ms, over the 1% a p99 allows, though
    # under half the client's 6% (the queue behind each stall): no server could pass here
    stalls = side([20479] * 2, samples=1000, duration_s=1.0)
    quiet = side([], samples=1000, duration_s=1.0)
    base = replace(cell(LABEL), histogram_us=client_histogram(60), server_latency=SERVER_DRAINING)
    found = noise.attribute([probed(base, stalls, quiet)], 10.0)
    assert found.source == NoiseSource.HOST and found.host_share == pytest.approx(0.020958)
    assert found.server_share == pytest.approx(0.045) and found.client_share == pytest.approx(0.06)
    # one stall of 18.431 ms: 0.84% over 10 ms, within what a p99 allows: the server's own 4.5% explains the 6%
    once = side([18431], samples=1000, duration_s=1.0)
    assert noise.attribute([probed(base, once, quiet)], 10.0).source == NoiseSource.SERVER


def test_attribution_falls_to_client_and_wire_and_to_none():
    quiet = side([], samples=1000, duration_s=1.0)
    base = replace(cell(LABEL), histogram_us=client_histogram(30), server_latency=SERVER_FAST)
    assert noise.attribute([probed(base, quiet, quiet)], 10.0).source == NoiseSource.CLIENT_WIRE
    unprobed = noise.attribute([replace(base, server_latency=None)], 10.0)
    assert unprobed.source == NoiseSource.CLIENT_WIRE and unprobed.host_share is None
    assert "not exported" in unprobed.describe() and "not probed" in unprobed.describe()
    none = noise.attribute([probed(base, quiet, quiet)], 25.0)
    assert none.source == NoiseSource.NONE and none.describe() == "no request over 25 ms at the client"


# The H100's "load generator was the limit at 470.2 req/s" cell: 1.2% late, dispatch lag p99 3071 µs, 13.5% CPU.
LATE = (ValidityFlag(Flag.SATURATED, "1.2% of sends left late (limit 1%)"),
        ValidityFlag(Flag.SATURATED, "dispatch lag p99 3071 µs > 2000 µs: the load generator did not send on time"))
# 16 ms stalls, 2.1 per second, over 10 s: over 2 ms, 21 x 14383 µs = 3.0% of the time
HOST_STALLS = side([16383] * 21, samples=10_000, duration_s=10.0)


def late_cell(loadgen_side: dict | None, process_cpu: float = 13.5):
    base = cell(LABEL, rate=470.2)
    return probed(base, None, loadgen_side, flags=list(LATE), late_sends=12, late_send_fraction=0.012,
                  dispatch_lag_p99_us=3071.0, loadgen_process_cpu_percent=[process_cpu],
                  loadgen_cpu_percent=process_cpu, loadgen_cores=1,
                  load=replace(base.load, late_threshold_ms=2.0, dispatch_lag_limit_ms=2.0))


def test_lateness_the_host_explains_is_not_the_load_generators_limit():
    explained = late_cell(HOST_STALLS)
    assert noise.host_explains_lateness(explained)
    assert not verdicts.client_limited(explained)
    assert verdicts.verdict_of([explained], Objective(10.0)).decision != verdicts.Decision.LOADGEN


def test_lateness_in_a_cell_whose_server_fell_behind_is_the_servers():
    """A server 17% short of the sends (p50 310 ms) with late sends and no busy load generator: overloaded, a
    fail, not the load generator's limit; with a load generator at a full core it stays the generator's."""
    behind = replace(late_cell(None), throughput_rps=round(470.2 * 0.83, 1))
    assert not verdicts.client_limited(behind)
    verdict = verdicts.verdict_of([behind], Objective(10.0))
    assert verdict.decision == verdicts.Decision.FAIL and verdict.reason.startswith("overloaded: ")
    busy = replace(behind, flags=[*behind.flags, ValidityFlag(Flag.SATURATED, "a load generator process used 97% "
                                                                             "of a core")])
    assert verdicts.client_limited(busy)


def test_lateness_stays_the_load_generators_without_a_probe_a_quiet_host_or_a_busy_generator():
    assert verdicts.client_limited(late_cell(None))
    assert verdicts.client_limited(late_cell(side([], samples=10_000, duration_s=10.0)))
    assert verdicts.client_limited(late_cell(HOST_STALLS, process_cpu=80.0))
    # stalls of 2.5 ms: over 2 ms 21 x 500 µs = 0.1% of the time, under half the 1.2% late
    assert not noise.host_explains_lateness(late_cell(side([2500] * 21, samples=10_000, duration_s=10.0)))


def test_the_servers_own_latency_is_its_histograms_delta_over_the_cell():
    from loadtest.measure.scrape import HistogramSnapshot, Snapshot
    from loadtest.measure.server_phases import server_latency
    from serving.protocol.names import REQUEST_LATENCY_SUFFIX

    def scraped(cumulative: list[float]) -> Snapshot:
        buckets = dict(zip([1000.0, 5000.0, 15000.0, float("inf")], cumulative))
        return Snapshot({REQUEST_LATENCY_SUFFIX: HistogramSnapshot(buckets, 0.0, cumulative[-1])}, {}, {})

    # 100 requests in the cell: 90 under 1 ms, 5 to 5 ms, 4 to 15 ms, 1 beyond
    latency = server_latency(scraped([10, 10, 10, 10]), scraped([100, 105, 109, 110]))
    assert latency is not None
    assert latency.count == 100 and latency.to_dict()["buckets"] == [[1000.0, 90], [5000.0, 5], [15000.0, 4], [None, 1]]
    assert latency.p50_us == 1000.0 and latency.p90_us == 1000.0 and latency.p99_us == 15000.0
    assert latency.p999_us is None  # fewer than 1000 requests
    assert server_latency(None, scraped([1, 1, 1, 1])) is None
