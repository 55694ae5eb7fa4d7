"""Do compared answers hold when the machine moves? (issue #41) Two servers of one configuration (the real model,
batching off, both pinned to one core) in one paired `mnist-bench capacity` run, Locust on another core, while a
SCHED_FIFO loop takes a growing share of the servers' core (0% to 70% over 200 s: `loadtest.benchmarks.planted`).

The true ratio of their capacities is ×1.0. A run holds when its ratio lies within ×0.87–×1.15 and its range
holds ×1.0: the final confirmations ran in the same rounds, so the two answers come from the same minutes.

    mnist-bench bench drift --runs 3          (make bench-drift RUNS=3; not in CI: ~3 min a run)

Each run's results are kept under `--results-dir` (`run-N/`, read again with `bench reproduce --read DIR`).

Not for: the comparison itself (`loadtest.search.capacity_search`) or several runs of any comparison
(`loadtest.benchmarks.reproduce`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from loadtest.benchmarks import planted
from loadtest.benchmarks.reproduce import Run, run_capacity, summary
from loadtest.report.answers.paired import PairedRatio
from serving.deploy.process import start_server

HOLDS = (0.87, 1.15)  # a run's ratio of two identical servers lies within these
# Both searches end within the drift's 200 s ramp, as in the run (the reference cell 636 -> 191 req/s): on
# its plateau (70% of the core taken in 7 ms slices) no rate meets 25 ms here, and a search that goes on answers none.
SEARCH = ("--p99-ms", "25", "--objectives", "25", "--precision", "0.05", "--max-steps", "14", "--confirm-factor", "2",
          "--max-rate-s", "8", "--warmup-s", "0.5", "--measure-s", "2", "--max-minutes", "1.6", "--check", "shape",
          "--unmet-ok", "--no-report")
LATENESS = {"LOADTEST_LATE_THRESHOLD_MS": "5", "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}  # a shared core's own stalls


@dataclass(frozen=True)
class Setup:
    """Where the servers and the load run, and the drift planted on the servers' core."""

    model_base_path: Path
    samples: Path
    server_core: int = 0
    loadgen_core: int = 1
    max_share: float = 0.7
    ramp_s: float = 200.0
    max_s: float = 400.0  # the loop's own end, should the run hang


def holds(ratio: PairedRatio) -> bool:
    """The ratio within `HOLDS` and its range holding ×1.0."""
    return (ratio.ratio is not None and HOLDS[0] <= ratio.ratio <= HOLDS[1] and ratio.low is not None
            and ratio.high is not None and ratio.low <= 1.0 <= ratio.high)


def verdict(runs: Sequence[Run]) -> str:
    """One line per run: whether its ratio held, then how many did."""
    lines = []
    for run in runs:
        ratios = [r for r in run.ratios if r.ratio is not None]
        said = ", ".join(f"{r.value()} {'holds' if holds(r) else 'does NOT hold'}" for r in ratios) or "no ratio"
        lines.append(f"run {run.number}: {said}")
    held = sum(1 for run in runs if run.ratios and all(holds(r) for r in run.ratios))
    lines.append(f"{held} of {len(runs)} runs within ×{HOLDS[0]:.2f}–×{HOLDS[1]:.2f} with a range holding ×1.00")
    return "\n".join(lines)


def run(runs: int, results_dir: Path, setup: Setup) -> str:
    """`runs` paired capacity runs of two identical servers, each under a fresh planted drift."""
    flags = ("--model_name", "mnist", "--model_base_path", str(setup.model_base_path))
    env = {"LOADTEST_LOADGEN_CPUS": str(setup.loadgen_core), **LATENESS}
    done = []
    with ExitStack() as servers:
        twins = [servers.enter_context(start_server(*flags, cpu=setup.server_core)) for _ in range(2)]
        targets = [arg for s in twins for arg in ("--target", s.grpc_target, "--rest-url", s.rest_url)]
        for number in range(1, runs + 1):
            with planted.drift(setup.server_core, setup.max_share, setup.ramp_s, setup.max_s):
                done.append(run_capacity(number, results_dir, [*targets, "--samples", str(setup.samples), *SEARCH],
                                         env))
            print(f"run {number} of {runs}: {done[-1].seconds / 60:.1f} min", flush=True)
    return summary(done) + "\n\n" + verdict(done)
