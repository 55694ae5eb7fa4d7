"""Does a comparison reproduce? `mnist-bench capacity` with the same arguments, several times in a row, each
run's ratios read back (`loadtest.report.answers.paired`) and each card row's verdict (what bounded it), then per
row whether every run said the same, and per ratio: every run's value and range, whether every range overlaps every
other, the largest ÷ the smallest value, and how the ratio went with the machine's speed
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
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from loadtest.bundle.processes import stop
from loadtest.evidence.records import CellResult, read_results
from loadtest.report.answers.answers import answer
from loadtest.report.answers.drift import speed_link
from loadtest.report.answers.paired import PairedRatio, paired_ratios, ranges_apart
from loadtest.report.answers.verdict import verdict_in

STOP_GRACE_S = 60.0  # an interrupted run's time to stop its servers (each drains its requests first)


@dataclass(frozen=True)
class Run:
    number: int
    seconds: float
    ratios: tuple[PairedRatio, ...]
    failure: str = ""
    verdicts: tuple[tuple[str, str], ...] = ()  # (row, what bounded it): `verdicts_of`


def verdicts_of(results: Sequence[CellResult]) -> tuple[tuple[str, str], ...]:
    """What bounded each device's best answer at its search's objective, as the card's row there reads it
    (`loadtest.report.answers.verdict.verdict_in`), by device, objective and request batch."""
    answers = answer(results)
    return tuple((f"{d.device} at p99 ≤ {d.p99_objective_ms:g} ms (request batch {d.request_batch_size})",
                  verdict_in(d.best, answers).bounded.value) for d in answers.devices)


def of_results(number: int, seconds: float, jsonl: Path, failure: str = "") -> Run:
    """A run read back from its results: its ratios and each row's verdict."""
    results = read_results(jsonl)
    return Run(number, seconds, tuple(paired_ratios(results)), failure, verdicts_of(results))


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
    return of_results(number, seconds, found[-1], "" if code == 0 else f"exit {code}")


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
        lines += [f"  bounded by, {row}: {bounded}" for row, bounded in run.verdicts]
    keys = list(dict.fromkeys(r.key for run in runs for r in run.ratios))
    lines.append("")
    lines += verdict_lines(runs)
    for key in keys:
        here = [r for run in runs for r in run.ratios if r.key == key]
        values = ", ".join(run_value(r) for r in here)
        ratio_spread = spread(here)
        estimates = sum(1 for r in here if r.bounded)
        of = "" if estimates == len(here) else f" (of the {estimates} runs with an estimate)"
        lines.append(f"{key[0]} at p99 ≤ {key[2]:g} ms (request batch {key[1]}) over {len(here)} runs: {values}; "
                     f"every range overlaps every other: {'yes' if overlap(here) else 'no'}; largest ÷ smallest{of}: "
                     + ("—" if ratio_spread is None else f"{ratio_spread:.2f}"))
        if (line := width_line(here)) is not None:
            lines.append(line)
        if (line := speed_line([r for r in here if r.bounded])) is not None:
            lines.append(line)
    return "\n".join(lines)


def width_line(ratios: Sequence[PairedRatio]) -> str | None:
    """Each run's range width (high ÷ low), and whether the median of the runs' ratios lies inside every run's range
    (issue #67: runs that agree because they are precise, not because they are wide); None without two-sided ranges."""
    ranged = [(r.ratio, r.low, r.high) for r in ratios if r.ratio is not None and r.low and r.high is not None]
    if not ranged:
        return None
    median = statistics.median(value for value, _, _ in ranged)
    inside = sum(1 for _, low, high in ranged if low <= median <= high)
    widths = ", ".join(f"×{high / low:.2f}" for _, low, high in ranged)
    return (f"  each run's range wide: {widths}; the median ratio ×{median:.2f} lies inside {inside} of "
            f"{len(ranged)} runs' ranges")


def verdict_lines(runs: Sequence[Run]) -> list[str]:
    """Per card row, what bounded it in each run and whether every run said the same."""
    rows = list(dict.fromkeys(row for run in runs for row, _ in run.verdicts))
    lines = []
    for row in rows:
        said = [dict(run.verdicts).get(row, "no answer") for run in runs]
        lines.append(f"bounded by, {row}, over {len(said)} runs: {', '.join(said)}; the same every run: "
                     + ("yes" if len(set(said)) == 1 else "no"))
    return lines


def read(results_dir: Path) -> str:
    """The summary of runs already made (`run-N/` under `results_dir`), read again without measuring."""
    runs = []
    for number, out in sorted((int(p.name.removeprefix("run-")), p) for p in results_dir.glob("run-*")):
        found = sorted(out.glob("*/results.jsonl"))
        runs.append(of_results(number, _span_s(found[-1]), found[-1]) if found
                    else Run(number, 0.0, (), "no results"))
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
