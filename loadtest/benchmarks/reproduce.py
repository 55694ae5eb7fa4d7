"""Does a comparison reproduce? `mnist-bench capacity` with the same arguments, several times in a row, each
run's ratios read back (`loadtest.report.answers.paired`), then per ratio: every run's value and range, whether every
range overlaps every other, the largest ÷ the smallest value, and how the ratio went with the machine's speed
(each run's median reference cell): pairing cancels a drift that slows both servers alike, not one that changes
their ratio (a server at a knee loses more to a slower machine than one that batches): `paired.speed_link`.

    mnist-bench bench reproduce --runs 5 -- --plan loadtest/plans/demo.toml --p99-ms 50 --batch 16 ...
    make bench-demo RUNS=5       (the demo's own comparison)

Each run writes its own `results/<UTC time>/` under `--results-dir`, kept, so nothing is measured twice to
read it again (`--read DIR` prints the summary of runs made before). A run that fails is reported and the
others still count.

Not for: the comparison itself (`loadtest.search.capacity_search`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtest.bundle.processes import stop
from loadtest.evidence.records import read_results
from loadtest.report.answers.drift import speed_link
from loadtest.report.answers.paired import PairedRatio, paired_ratios, ranges_apart

STOP_GRACE_S = 60.0  # an interrupted run's time to stop its servers (each drains its requests first)


@dataclass(frozen=True)
class Run:
    number: int
    seconds: float
    ratios: tuple[PairedRatio, ...]
    failure: str = ""


def run_capacity(number: int, results_dir: Path, capacity_args: Sequence[str],
                 env: Mapping[str, str] | None = None) -> Run:
    """One `mnist-bench capacity` run into its own directory, its console in `capacity.log` there; its ratios
    (none, with the reason, if it failed). Interrupted, the run is sent SIGINT and given time to stop its servers
    (`subprocess.run` would kill it at once and leave them running). `env`: variables added to its environment."""
    out = results_dir / f"run-{number}"
    out.mkdir(parents=True, exist_ok=True)
    log = out / "capacity.log"
    started = time.monotonic()
    with log.open("a") as console:
        proc = subprocess.Popen([sys.executable, "-m", "loadtest", "capacity", *capacity_args, "--results-dir",
                                 str(out)], stdout=console, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, **(env or {})})
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            stop(proc, STOP_GRACE_S, interrupt=True)
            raise
    seconds = time.monotonic() - started
    found = sorted(out.glob("*/results.jsonl"))
    if not found:
        return Run(number, seconds, (), f"exit {code}: {log.read_text().strip()[-300:]}")
    failure = "" if code == 0 else f"exit {code}"
    return Run(number, seconds, tuple(paired_ratios(read_results(found[-1]))), failure)


def overlap(ratios: Sequence[PairedRatio]) -> bool:
    """Every range overlaps every other (an open end reaches as far as it may)."""
    return not ranges_apart(ratios)


def spread(ratios: Sequence[PairedRatio]) -> float | None:
    """The largest estimate ÷ the smallest; None with fewer than two. A ratio with an open end (a capacity that is a
    lower bound) has no estimate, only its bound, so it does not count."""
    values = [r.ratio for r in ratios if r.ratio is not None and r.bounded]
    return max(values) / min(values) if len(values) > 1 and min(values) > 0 else None


def run_value(ratio: PairedRatio) -> str:
    """One run's ratio in the summary line: its estimate, or only its bound where an end is open."""
    if ratio.ratio is None:
        return "—"
    return f"×{ratio.ratio:.2f}" if ratio.bounded else ratio.value()


def speed_line(ratios: Sequence[PairedRatio]) -> str | None:
    """How the runs' ratios went with each run's median reference speed; None with too few runs to say."""
    link = speed_link(ratios)
    return None if link is None else f"  {link.describe()}"


def summary(runs: Sequence[Run]) -> str:
    """Per run, each ratio with its range and drift; then per ratio, overlap and max ÷ min over the runs."""
    lines = []
    for run in runs:
        lines.append(f"run {run.number} ({run.seconds / 60:.1f} min){f': {run.failure}' if run.failure else ''}")
        lines += [f"  {r.describe()}" for r in run.ratios] or ["  no ratio"]
    keys = list(dict.fromkeys(r.key for run in runs for r in run.ratios))
    lines.append("")
    for key in keys:
        here = [r for run in runs for r in run.ratios if r.key == key]
        values = ", ".join(run_value(r) for r in here)
        ratio_spread = spread(here)
        estimates = sum(1 for r in here if r.bounded)
        of = "" if estimates == len(here) else f" (of the {estimates} runs with an estimate)"
        lines.append(f"{key[0]} at p99 ≤ {key[2]:g} ms (request batch {key[1]}) over {len(here)} runs: {values}; "
                     f"every range overlaps every other: {'yes' if overlap(here) else 'no'}; largest ÷ smallest{of}: "
                     + ("—" if ratio_spread is None else f"{ratio_spread:.2f}"))
        if (line := speed_line([r for r in here if r.bounded])) is not None:
            lines.append(line)
    return "\n".join(lines)


def read(results_dir: Path) -> str:
    """The summary of runs already made (`run-N/` under `results_dir`), read again without measuring."""
    runs = []
    for number, out in sorted((int(p.name.removeprefix("run-")), p) for p in results_dir.glob("run-*")):
        found = sorted(out.glob("*/results.jsonl"))
        ratios = tuple(paired_ratios(read_results(found[-1]))) if found else ()
        runs.append(Run(number, _span_s(found[-1]) if found else 0.0, ratios, "" if found else "no results"))
    if not runs:
        raise ValueError(f"no run-N/ directories under {results_dir}")
    return summary(runs)


def _span_s(jsonl: Path) -> float:
    """Seconds from the run's first cell to its last (the time its cells took; start-up and reading excluded)."""
    from datetime import datetime

    cells = read_results(jsonl)
    times = [datetime.fromisoformat(c.utc_time) for c in cells]
    return (max(times) - min(times)).total_seconds() if times else 0.0


def run(runs: int, results_dir: Path, capacity_args: Sequence[str]) -> str:
    done = []
    for number in range(1, runs + 1):
        done.append(run_capacity(number, results_dir, capacity_args))
        print(f"run {number} of {runs}: {done[-1].seconds / 60:.1f} min", flush=True)
    return summary(done)
