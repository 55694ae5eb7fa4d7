"""The capacity search against simulated queues whose answer theory gives (issue #67): the search's own decisions and
verdicts (`loadtest.search.capacity`, `loadtest.judge`), its cells made by Lindley's recursion
(`loadtest.benchmarks.queueing`) instead of by a server, so how often its range holds the true capacity, and how
wide it is, are read over many searches in seconds, apart from any machine's noise.

Each cell starts from an empty queue (a real cell follows a pause and a warm-up), is warmed up `WARMUP_S`, then
measured: Poisson arrivals at the rate offered, a deterministic service time, the p99 objective judged on the
sojourn times by the same rule as a real cell's, clusters included (its windows' histograms, by arrival time). The
search's clock is the simulated seconds plus `OVERHEAD_S` a cell, as on the build machine.

    mnist-bench bench queue-search --searches 100      (three rules: phi lent, own phi, independent; a fit)

Not for: real servers (`loadtest.benchmarks.calibrate`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from loadtest.benchmarks.knee_fit import knee_fit
from loadtest.benchmarks.queueing import Queue, constant
from loadtest.evidence.objective import Objective
from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.records import CellResult, LoadSpec, ServerLabel
from loadtest.evidence.stats import encode, histogram_of
from loadtest.evidence.vocab import Arrival, CellStatus, LoadMode, Protocol, Role
from loadtest.judge import verdicts
from loadtest.search.capacity import CapacitySearch
from loadtest.search.search_settings import Measured, SearchSettings

WARMUP_S = 0.5
OVERHEAD_S = 1.5  # a real cell's seconds beyond its window here: Locust's start, the warm-up's end, the scrapes
WINDOW_S = 0.5  # throughput windows, as the demo's plan
LABEL = ServerLabel("simulated", "simulated", "cpu", "M/D/1", "", Protocol.GRPC, "mnist", 1, "off")


@dataclass(frozen=True)
class Case:
    """A queue and its objective: the service time (s) and p99 objective (s)."""

    service_s: float
    objective_s: float

    def truth_rps(self) -> float:
        return Queue(constant(self.service_s), self.service_s).capacity_rps(self.objective_s)


# 3.5 ms a call, as the calibration's faster null server: its knee at 25 ms near 70% busy, at 50 ms near 85%
CASES = (Case(0.0035, 0.025), Case(0.0035, 0.050))


@dataclass
class SimulatedServer:
    """Cells of a simulated M/D/1 queue, each from an empty queue, with its own random numbers."""

    case: Case
    rng: np.random.Generator
    clock_s: float = 0.0
    index: int = 0

    def measure(self, rate: float, role: Role, window_s: float | None, **_: object) -> Measured:
        window = window_s if window_s is not None else (6.0 if role == Role.CONFIRM else 3.0)
        self.clock_s += window + OVERHEAD_S
        self.index += 1
        return Measured(self._cell(rate, window))

    def _cell(self, rate: float, window_s: float) -> CellResult:
        span = WARMUP_S + window_s
        n = int(self.rng.poisson(rate * span)) + 1
        arrivals = np.sort(self.rng.uniform(0.0, span, n))
        service = self.case.service_s
        waits = np.zeros(n)
        for i in range(1, n):  # Lindley's recursion, one cell's worth
            waits[i] = max(0.0, waits[i - 1] + service - (arrivals[i] - arrivals[i - 1]))
        sojourn_us = (waits + service) * 1e6
        kept = arrivals >= WARMUP_S
        times, latencies = arrivals[kept] - WARMUP_S, sojourn_us[kept]
        windows = [latencies[(times >= w * WINDOW_S) & (times < (w + 1) * WINDOW_S)]
                   for w in range(int(window_s // WINDOW_S))]
        ms = np.percentile(latencies, [0, 50, 90, 95, 99, 99.9, 100]) / 1000 if latencies.size else [None] * 7
        count = int(latencies.size)
        return CellResult(
            run_id="simulated", cell_index=self.index, utc_time="", server=LABEL,
            load=LoadSpec(LoadMode.OPEN, 1, None, rate, Arrival.POISSON, WARMUP_S, window_s, 1, window_s=WINDOW_S),
            status=CellStatus.OK, failure_reason="", requests=count, ok_requests=count, errors_by_code={},
            wrong_answers=0, accuracy=None, throughput_rps=count / window_s, throughput_ips=count / window_s,
            latency_min_ms=ms[0], latency_mean_ms=float(latencies.mean() / 1000) if count else None,
            latency_p50_ms=ms[1], latency_p90_ms=ms[2], latency_p95_ms=ms[3], latency_p99_ms=ms[4],
            latency_p999_ms=ms[5], latency_max_ms=ms[6], histogram_us=encode(histogram_of(latencies)), late_sends=0,
            late_send_fraction=0.0, window_throughput_rps=[len(w) / WINDOW_S for w in windows],
            loadgen_cpu_percent=10.0, loadgen_cores=1, server_batch_size_mean=None, server_batch_sizes={},
            server_queue_delay_mean_us=None, valid=True, flags=[], provenance=Provenance(host="simulated"),
            window_histograms_us=[encode(histogram_of(w)) if w.size else "" for w in windows],
            window_scheduled_rps=[len(w) / WINDOW_S for w in windows])


@dataclass(frozen=True)
class ScoredRange:
    """A range against the truth it should hold: whether it does, and how wide it is."""

    low: float | None
    high: float | None
    truth: float

    @property
    def holds(self) -> bool:
        return self.low is not None and self.high is not None and self.low <= self.truth <= self.high

    @property
    def width(self) -> float | None:
        return self.high / self.low if self.low and self.high else None


def search_once(case: Case, truth: float, seed: int, budget_s: float,
                precision: float) -> tuple[ScoredRange, ScoredRange]:
    """The search's own range, and the candidate fit's over the same search's cells (`loadtest.benchmarks.knee_fit`)."""
    server = SimulatedServer(case, np.random.default_rng(seed))
    settings = SearchSettings(objective=Objective(case.objective_s * 1000), start_rps=round(0.5 / case.service_s, 1),
                              precision=precision, max_s=budget_s, max_rate_s=20.0, window_s=3.0,
                              confirm_window_s=6.0, cell_overhead_s=OVERHEAD_S)
    answer = CapacitySearch(settings, server.measure, clock=lambda: server.clock_s).run()
    low = answer.conclusion.capacity_rps
    fitted = knee_fit(answer.steps, case.objective_s * 1000)
    return (ScoredRange(low, answer.conclusion.upper_rps() if low is not None else None, truth),
            ScoredRange(fitted.low_rps if fitted else None, fitted.high_rps if fitted else None, truth))


@contextmanager
def rule(name: str) -> Iterator[None]:
    """The verdicts' clustering as one of `RULES` has it, for the searches made inside."""
    own = verdicts.dispersion
    if name == INDEPENDENT:  # the rule before issue #67: every request an independent draw
        verdicts.dispersion = lambda cells, objective_ms, above=(): 1.0
    elif name == OWN_ONLY:  # each rate's own clustering, none lent by the rates above
        verdicts.dispersion = lambda cells, objective_ms, above=(): own(cells, objective_ms)
    try:
        yield
    finally:
        verdicts.dispersion = own


LENT = "effective N, phi lent by the rate above where a rate cannot show its own (the rule)"
OWN_ONLY = "effective N, each rate's own phi only"
INDEPENDENT = "every request independent (the rule before #67)"
RULES = (LENT, OWN_ONLY, INDEPENDENT)
FIT = ("a fit over every cell near the knee, its phi pooled (a candidate, `knee_fit`: not the tool's rule), "
       "on the first rule's searches")


def tally(outcomes: list[ScoredRange]) -> str:
    widths = [o.width for o in outcomes if o.width is not None]
    holds = sum(o.holds for o in outcomes)
    one_sided = sum(o.width is None for o in outcomes)
    return (f"holds the truth in {holds} of {len(outcomes)} ({one_sided} one-sided or none)"
            + (f"; width median ×{statistics.median(widths):.3f}, 90th ×{np.quantile(widths, 0.9):.3f}"
               if widths else ""))


def run(cases: list[Case], searches: int, budget_s: float, precision: float,
        echo: Callable[[str], None] = print) -> None:
    for case in cases:
        truth = case.truth_rps()
        echo(f"M/D/1, S {case.service_s * 1000:g} ms, p99 <= {case.objective_s * 1000:g} ms: capacity {truth:.1f} "
             f"req/s ({truth * case.service_s:.0%} busy); {searches} searches of {budget_s:g} s each")
        fitted: list[ScoredRange] = []
        for name in RULES:
            with rule(name):
                found = [search_once(case, truth, seed, budget_s, precision) for seed in range(searches)]
            echo(f"  {name}: {tally([bracket for bracket, _ in found])}")
            if name == LENT:
                fitted = [fit for _, fit in found]
        echo(f"  {FIT}: {tally(fitted)}")
