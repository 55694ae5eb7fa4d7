"""Are the search's ranges right? Capacity searches against servers whose answer queueing theory gives in advance,
each range held against that answer (issue #67).

The servers: the null backend with a fixed delay D (`--null_delay_ms D`), one gRPC thread (`--grpc_max_threads 1`:
its queue is first come, first served) and one frontend (`--workers 1`: one lock), all pinned to core 0; Locust on
core 1 sends Poisson arrivals. That is an M/G/1 queue. Two pairs, each compared paired by one `mnist-bench capacity`
run at p99 <= `OBJECTIVE_MS`: servers whose capacities are about ×1.6 apart, and two identical ones.

The theory (`loadtest.benchmarks.queueing`), from what each run measures of its own servers:
- the service time S, in the minutes the range was measured: D plus the handler's own time per call (the server's
  own timing of the cells the range stands on, its answer's confirmation and its upper end's latest windows), plus
  the work outside its handler per call (gRPC's). That last moves with this machine's speed (0.19 to 0.39 ms a call
  within 4 minutes here), so it is read from the comparison's reference cells, the first server saturated between
  rounds (1 / throughput less the handler's time), scaled for the other server by how the two compared in the
  saturated service cells before and after the run (4 users sending back to back: the server never idle);
- the client's and the wire's own time C: what one user sending alone waits (no queue) less S, per request;
- the p99 of W + S + C at each rate by Lindley's recursion (W the wait), and the capacity: the highest rate
  whose p99 is within the objective.

Over the runs, for each capacity and each ratio: in how many its range holds the theory's value, how wide it is
(high ÷ low), and each pair run's time. A range holds only when two-sided: its low end a rate confirmed, its high
end a rate shown to fail the objective. A one-sided range says so and does not count as holding. The theory's own
spread (S measured before against after) is printed beside it.

    mnist-bench bench calibrate --runs 10        (make bench-calibrate; ~11 min a run)
    mnist-bench bench calibrate --read DIR       (the summary of runs made before)

Each run's results are kept under `--results-dir` (`<pair>/run-N/`), and one line a pair and run is appended to
`calibration.jsonl` there: the theory, the ranges, whether each held, how wide, and how long the run took.

Not for: the theory itself (`loadtest.benchmarks.queueing`) or reading a comparison (`loadtest.report.answers`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtest.benchmarks.reproduce import run_capacity
from loadtest.benchmarks.service_theory import (
    SATURATING_USERS,
    Theory,
    outside_of,
    range_cells,
    service_at,
    service_cells,
    theory_of,
)
from loadtest.evidence.records import CellResult, read_results
from loadtest.evidence.vocab import Role
from loadtest.report.answers.answers import search_answers
from loadtest.report.answers.paired import PairedRatio, paired_ratios
from serving.deploy.process import start_server

OBJECTIVE_MS = 25.0
MAX_CAPACITY_WIDTH = 1.2  # issue #67: a capacity's range at most ×1.2 wide
MAX_RATIO_WIDTH = 1.3  # and a ratio's at most ×1.3
MAX_RUN_S = 330.0  # each pair's run (its service cells and its capacity run) within 5.5 minutes
# The capacity run's own minutes: the pair's 5.5 less its two sets of service cells (~25 s each) and a start's slack.
BUDGET_MIN = 4.5
LATENESS = {"LOADTEST_LATE_THRESHOLD_MS": "5", "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}  # a shared core's own stalls
SEARCH = ("--p99-ms", f"{OBJECTIVE_MS:g}", "--objectives", f"{OBJECTIVE_MS:g}", "--budget-min", f"{BUDGET_MIN:g}",
          "--check", "shape", "--warmup-s", "0.5", "--measure-s", "3", "--confirm-factor", "2", "--max-rate-s", "20",
          "--precision", "0.1", "--no-tool-ceiling", "--no-report", "--unmet-ok")
SERVICE_PLAN = """name = "calibration service cells"
[run]
warmup_s = 0.5
measure_s = 3.0
window_s = 0.5
processes = 1
check = "shape"
late_threshold_ms = 5.0
dispatch_lag_limit_ms = 5.0
samples = "{samples}"
loadgen_cpus = "{loadgen_core}"
[grid]
batch_sizes = [1]
concurrency = [1, {users}]
rates_rps = []
"""


@dataclass(frozen=True)
class Pair:
    """Two servers compared paired: their planted delays (ms)."""

    name: str
    delays_ms: tuple[float, float]


# Delays whose capacities at 25 ms are about ×1.6 apart here (S about D + 0.45 ms: 198 and 125 req/s in theory),
# and two identical servers between them. At 25 ms their knees lie near 60-70% busy: at 50 ms, near 85%, a backlog
# that reaches the objective holds ~45 requests over it in a row in theory (`loadtest.judge.dispersion`), and a
# verdict there needs ~45 times the requests.
PAIRS = (Pair("ratio", (3.0, 4.2)), Pair("identical", (3.6, 3.6)))


@dataclass(frozen=True)
class Setup:
    model_base_path: Path
    samples: Path
    server_core: int = 0
    loadgen_core: int = 1
    pairs: tuple[Pair, ...] = PAIRS


# ----------------------------------------------------------------------------- one pair's run, held against theory


@dataclass(frozen=True)
class Held:
    """One range held against its theory's value: two-sided, holding it, how wide."""

    what: str
    theory: float
    low: float | None
    high: float | None
    value: float | None = None  # the estimate (a ratio's)

    @property
    def two_sided(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def holds(self) -> bool:
        return self.two_sided and self.low <= self.theory <= self.high  # type: ignore[operator]

    @property
    def width(self) -> float | None:
        return self.high / self.low if self.two_sided and self.low else None  # type: ignore[operator]

    def describe(self) -> str:
        if not self.two_sided:
            shown = f"≥ {self.low:g}" if self.low is not None else "no range"
            return f"{self.what}: {shown}: one-sided, does not count as holding (theory {self.theory:g})"
        return (f"{self.what}: {self.low:g}–{self.high:g} (×{self.width:.3f} wide) "
                f"{'holds' if self.holds else 'does NOT hold'} theory's {self.theory:g}")


@dataclass(frozen=True)
class PairRun:
    """What one run of one pair measured and how it held."""

    pair: str
    run: int
    seconds: float
    capacities: tuple[Held, ...]
    ratio: Held | None
    theories: dict[str, dict] = field(default_factory=dict)
    failure: str = ""

    def to_json(self) -> str:
        raw = asdict(self)
        return json.dumps(raw, sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict) -> PairRun:
        ratio = raw.get("ratio")
        return cls(raw["pair"], raw["run"], raw["seconds"], tuple(Held(**h) for h in raw["capacities"]),
                   Held(**ratio) if ratio else None, raw.get("theories", {}), raw.get("failure", ""))


def held_against(results: Sequence[CellResult], servers: Sequence[str], pair: str, run: int,
                 seconds: float, objective_ms: float = OBJECTIVE_MS) -> PairRun:
    """Each server's capacity range and the pair's ratio range against their theory."""
    searched = [c for c in results if c.search is not None]
    answers = {a.config.name: a for a in search_answers(searched)}
    outside = outside_of([c for c in searched if c.search is not None and c.search.role == Role.REFERENCE])
    first = service_cells(results, servers[0])
    capacities: list[Held] = []
    theories: dict[str, Theory] = {}
    for name in servers:
        answer = answers.get(name)
        low = answer.capacity_rps if answer is not None else None
        high = answer.upper_rps if answer is not None and low is not None else None
        at = range_cells(searched, answer.search_id, low, high) if answer is not None else []
        own = service_cells(results, name)
        theories[name] = theory_of(own, service_at(own, first, outside, at), objective_ms)
        capacities.append(Held(f"{pair} {name}", theories[name].capacity_rps, low, high))
    ratios = paired_ratios(searched)
    ratio = None
    if ratios:
        compared = ratios[0]
        numerator, denominator = _sides(compared, servers)
        expected = theories[numerator].capacity_rps / theories[denominator].capacity_rps
        ratio = Held(f"{pair} {compared.what}", round(expected, 4), compared.low, compared.high, compared.ratio)
    return PairRun(pair, run, round(seconds, 1), tuple(capacities), ratio,
                   {name: asdict(t) for name, t in theories.items()})


def _sides(ratio: PairedRatio, servers: Sequence[str]) -> tuple[str, str]:
    """(numerator, denominator) of a ratio between two servers of one configuration: each ÷ the first."""
    repeat = ratio.repeats[0]
    if repeat.numerator is not None and repeat.denominator is not None:
        return repeat.numerator.config.name, repeat.denominator.config.name
    return servers[1], servers[0]


# ----------------------------------------------------------------------------- running it


def measure_service(out: Path, targets: Sequence[str], setup: Setup) -> None:
    """The service cells of every server (`SERVICE_PLAN`), one `mnist-bench loadtest` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    plan = out / "service.toml"
    plan.write_text(SERVICE_PLAN.format(samples=setup.samples, loadgen_core=setup.loadgen_core,
                                        users=SATURATING_USERS))
    with (out / "service.log").open("a") as log:
        done = subprocess.run([sys.executable, "-m", "loadtest", "loadtest", "--plan", str(plan), *targets,
                               "--results-dir", str(out), "--no-report"], stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, **LATENESS}, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"the service cells failed (exit {done.returncode}): see {out / 'service.log'}")


def run_pair(number: int, pair: Pair, targets: Sequence[str], results_dir: Path, setup: Setup) -> PairRun:
    """One run of one pair: service cells, the paired capacity run, service cells again; held against theory."""
    out = results_dir / pair.name / f"run-{number}"
    began = time.monotonic()
    measure_service(out / "service-before", targets, setup)
    env = {**LATENESS, "LOADTEST_LOADGEN_CPUS": str(setup.loadgen_core)}
    capacity = run_capacity(number, results_dir / pair.name, [*targets, "--samples", str(setup.samples), *SEARCH],
                            env)
    measure_service(out / "service-after", targets, setup)
    seconds = time.monotonic() - began
    results = [cell for path in sorted(out.glob("*/results.jsonl")) + sorted(out.glob("*/*/results.jsonl"))
               for cell in read_results(path)]
    servers = [f"target{i}" for i in range(len(pair.delays_ms))]
    try:
        held = held_against(results, servers, pair.name, number, seconds)
    except ValueError as exc:
        return PairRun(pair.name, number, round(seconds, 1), (), None, failure=str(exc))
    return PairRun(held.pair, held.run, held.seconds, held.capacities, held.ratio, held.theories,
                   capacity.failure)


def run(runs: int, results_dir: Path, setup: Setup) -> str:
    """`runs` runs of every pair, each appended to `calibration.jsonl` as it ends; then the summary."""
    results_dir.mkdir(parents=True, exist_ok=True)
    ledger = results_dir / "calibration.jsonl"
    flags = ("--model_name", "mnist", "--model_base_path", str(setup.model_base_path), "--grpc_max_threads", "1",
             "--workers", "1")
    with ExitStack() as stack:
        started = {pair.name: [stack.enter_context(start_server(*flags, "--null_delay_ms", f"{d:g}",
                                                                 backend="null", cpu=setup.server_core))
                               for d in pair.delays_ms] for pair in setup.pairs}
        for number in range(1, runs + 1):
            for pair in setup.pairs:
                targets = [a for s in started[pair.name] for a in ("--target", s.grpc_target, "--rest-url", s.rest_url)]
                done = run_pair(number, pair, targets, results_dir, setup)
                with ledger.open("a") as file:
                    file.write(done.to_json() + "\n")
                print(f"run {number} of {runs}, {pair.name}: {done.seconds / 60:.1f} min; "
                      + "; ".join(h.describe() for h in (*done.capacities, *filter(None, [done.ratio]))), flush=True)
    return summary(read_ledger(ledger))


def read_ledger(path: Path) -> list[PairRun]:
    if not path.exists():
        raise ValueError(f"no {path.name} under {path.parent}")
    return [PairRun.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def read(results_dir: Path) -> str:
    return summary(read_ledger(results_dir / "calibration.jsonl"))


# ----------------------------------------------------------------------------- the summary


def _tally(held: Sequence[Held], max_width: float) -> str:
    holds = sum(h.holds for h in held)
    widths = [h.width for h in held if h.width is not None]
    one_sided = sum(not h.two_sided for h in held)
    wide = max(widths, default=None)
    return (f"holds theory in {holds} of {len(held)}"
            + (f" ({one_sided} one-sided)" if one_sided else "")
            + (f"; width median ×{statistics.median(widths):.3f}, widest ×{wide:.3f} "
               f"({'within' if wide <= max_width else 'OVER'} ×{max_width:g})" if wide is not None else ""))


def summary(runs: Sequence[PairRun]) -> str:
    """Per capacity and per ratio over the runs: coverage, widths; per pair: the longest run."""
    lines = []
    for run in runs:
        failure = f": {run.failure}" if run.failure else ""
        lines.append(f"{run.pair} run {run.run} ({run.seconds / 60:.1f} min){failure}")
        lines += [f"  {h.describe()}" for h in (*run.capacities, *filter(None, [run.ratio]))]
        for name, theory in run.theories.items():
            lines.append(f"  theory {name}: S {theory['service_ms']:.3f} ms where its range was measured, client p50 "
                         f"{theory['client_ms_p50']:.3f} ms p99 {theory['client_ms_p99']:.3f} ms: capacity "
                         f"{theory['capacity_rps']:g} req/s; saturated before and after: S "
                         f"{', '.join(f'{s:.3f}' for s in theory['service_ms_each'])} ms, capacity "
                         f"{', '.join(map(str, theory['capacity_rps_each']))} req/s")
    lines.append("")
    for pair in dict.fromkeys(r.pair for r in runs):
        mine = [r for r in runs if r.pair == pair]
        slots = max((len(r.capacities) for r in mine), default=0)
        for i in range(slots):
            held = [r.capacities[i] for r in mine if len(r.capacities) > i]
            lines.append(f"{held[0].what}, capacity: {_tally(held, MAX_CAPACITY_WIDTH)}")
        ratios = [r.ratio for r in mine if r.ratio is not None]
        if ratios:
            lines.append(f"{ratios[0].what}, ratio: {_tally(ratios, MAX_RATIO_WIDTH)}")
        longest = max(r.seconds for r in mine)
        lines.append(f"{pair}: longest run {longest / 60:.1f} min "
                     f"({'within' if longest <= MAX_RUN_S else 'OVER'} {MAX_RUN_S / 60:g} min)")
    return "\n".join(lines)
