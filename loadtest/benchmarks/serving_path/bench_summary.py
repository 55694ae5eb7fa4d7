"""The server bench's result: the medians over rounds (`BenchSummary`) and the text printed for them.

`summarize` is pure (tested with hand-made rounds); `format_summary` draws the three ratios as a
table (`rich.table.Table`) followed by the lines that say where ratio (1)'s time goes, the batching
server's mean batch and how the run was set up.

Not for: measuring (`loadtest.benchmarks.serving_path.overhead`) or the per-round arithmetic
(`loadtest.benchmarks.serving_path.bench_records`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from rich import box
from rich.table import Table
from rich.text import Text

from loadtest.benchmarks.serving_path.bench_records import BenchOptions, LoadResult, RoundResult
from loadtest.evidence.tables import plain_table

TABLE_WIDTH = 200  # wide enough that no cell wraps: each figure stays on one line


@dataclass(frozen=True)
class BenchSummary:
    """The three ratios (median over rounds) and the figures they come from, all from one run."""

    ratio_served_vs_in_process: float
    ratio_batching_vs_none: float
    ratio_model_vs_null: float
    cpu_ratio_served_vs_in_process: float
    cpu_ratio_batching_vs_none: float
    cpu_ratio_model_vs_null: float
    ratio_ranges: tuple[tuple[float, float], ...]  # (min, max) over rounds of each of the three ratios
    ceiling_served_vs_in_process: float
    harness_b64_cpu_us: float
    served_b64_cpu_us: float  # server CPU per batch-64 request, real model
    model_b64_cpu_us_in_process: float
    # CPU per batch-64 request (per call in-process) by kind of thread: where the served path's excess runs
    served_b64_thread_cpu_us: dict[str, float]
    in_process_b64_thread_cpu_us: dict[str, float]
    null_b64_thread_cpu_us: dict[str, float]
    p99_batching_not_worse: bool
    in_process_b64_images_per_s: float
    served_b64_images_per_s: float
    b1_batching_rps: float
    b1_no_batching_rps: float
    b1_batching_p99_ms: float
    b1_no_batching_p99_ms: float
    null_b1_batching_rps: float
    b1_batching_batch_mean: float | None  # mean processed batch size the batching server reported in (2)
    wrong_answers: int
    errors: int
    rounds: int
    server_cpu: str
    client_cpu: str
    duration_s: float
    server_kind: str  # from the servers' ready lines: always the embedded server here
    device: str
    device_name: str
    utc: str


def _median(values: Iterable[float]) -> float:
    return float(np.median(list(values)))


def _median_known(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def _median_by_kind(results: Iterable[LoadResult]) -> dict[str, float]:
    """Median CPU per request of each kind of thread over the rounds that report it."""
    per_round = [r.thread_cpu_us_per_request for r in results]
    kinds = sorted({kind for figures in per_round for kind in figures})
    return {kind: float(np.median([f[kind] for f in per_round if kind in f])) for kind in kinds}


def _ratio_fields(rounds: list[RoundResult]) -> dict:
    """The three ratios and their CPU-second variants (medians of per-round values), and their ranges."""
    ratios = [r.ratios for r in rounds]
    cpu_ratios = [r.cpu_ratios for r in rounds]
    return dict(
        ratio_served_vs_in_process=_median(r[0] for r in ratios),
        ratio_batching_vs_none=_median(r[1] for r in ratios),
        ratio_model_vs_null=_median(r[2] for r in ratios),
        cpu_ratio_served_vs_in_process=_median(r[0] for r in cpu_ratios),
        cpu_ratio_batching_vs_none=_median(r[1] for r in cpu_ratios),
        cpu_ratio_model_vs_null=_median(r[2] for r in cpu_ratios),
        ratio_ranges=tuple((min(r[i] for r in ratios), max(r[i] for r in ratios)) for i in range(3)),
    )


def _cpu_fields(rounds: list[RoundResult]) -> dict:
    """Where ratio (1)'s time goes: CPU per batch-64 request, in all and by kind of thread."""
    return dict(
        ceiling_served_vs_in_process=_median(r.ceiling_served_vs_in_process for r in rounds),
        harness_b64_cpu_us=_median(r.harness_b64_cpu_us for r in rounds),
        served_b64_cpu_us=_median(r.served_b64.cpu_us_per_request for r in rounds),
        model_b64_cpu_us_in_process=_median(r.in_process_b64.cpu_us_per_request for r in rounds),
        served_b64_thread_cpu_us=_median_by_kind(r.served_b64 for r in rounds),
        in_process_b64_thread_cpu_us=_median_by_kind(r.in_process_b64 for r in rounds),
        null_b64_thread_cpu_us=_median_by_kind(r.null_b64 for r in rounds),
    )


def _throughput_fields(rounds: list[RoundResult]) -> dict:
    """The figures each ratio divides (medians over rounds), p99s and the batching server's mean batch."""
    return dict(
        p99_batching_not_worse=_median(r.b1_batching.p99_latency_ms for r in rounds)
        <= _median(r.b1_no_batching.p99_latency_ms for r in rounds),
        in_process_b64_images_per_s=_median(r.in_process_b64.images_per_s for r in rounds),
        served_b64_images_per_s=_median(r.served_b64.images_per_s for r in rounds),
        b1_batching_rps=_median(r.b1_batching.throughput_rps for r in rounds),
        b1_no_batching_rps=_median(r.b1_no_batching.throughput_rps for r in rounds),
        b1_batching_p99_ms=_median(r.b1_batching.p99_latency_ms for r in rounds),
        b1_no_batching_p99_ms=_median(r.b1_no_batching.p99_latency_ms for r in rounds),
        null_b1_batching_rps=_median(r.null_b1_batching.throughput_rps for r in rounds),
        b1_batching_batch_mean=_median_known(r.b1_batching.server_batch_mean for r in rounds),
    )


def summarize(rounds: list[RoundResult], wrong_answers: int, options: BenchOptions,
              server: dict[str, str]) -> BenchSummary:
    """Median of each figure and of each per-round ratio; `server` is a ready line's fields."""
    phases = [p for r in rounds
              for p in (r.served_b64, r.b1_no_batching, r.b1_batching, r.null_b1_batching, r.null_b64)]
    return BenchSummary(
        **_ratio_fields(rounds), **_cpu_fields(rounds), **_throughput_fields(rounds),
        wrong_answers=wrong_answers, errors=sum(p.errors for p in phases), rounds=len(rounds),
        server_cpu=options.server_cpu, client_cpu=options.client_cpu, duration_s=options.duration_s,
        server_kind=server.get("kind", ""), device=server.get("device", ""),
        device_name=server.get("device_name", ""), utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


def format_summary(s: BenchSummary) -> str:
    """The ratios' table, then the lines about (1)'s time, (2)'s batches and the run's setup."""
    return "\n".join([plain_table(ratio_table(s), TABLE_WIDTH), *notes(s)])


def ratio_table(s: BenchSummary) -> Table:
    """One row per ratio: the phase, the two figures divided, the ratio, its target, its range over
    rounds and the same ratio per server CPU-second."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, caption_justify="left",
                  caption="per server CPU-second: what the ratios would be on an otherwise idle core")
    for header in ("", "phase", "measured", "against", "result", "target", "range over rounds",
                   "per server CPU-second"):
        table.add_column(header, no_wrap=True)
    rows = [
        ("(1)", "batch 64", f"served {s.served_b64_images_per_s:,.0f} img/s",
         f"in-process {s.in_process_b64_images_per_s:,.0f} img/s", s.ratio_served_vs_in_process, ">= 0.85",
         s.cpu_ratio_served_vs_in_process),
        ("(2)", "batch 1 x 64 callers", f"batching {s.b1_batching_rps:,.0f} req/s (p99 {s.b1_batching_p99_ms:.1f} ms)",
         f"none {s.b1_no_batching_rps:,.0f} req/s (p99 {s.b1_no_batching_p99_ms:.1f} ms)", s.ratio_batching_vs_none,
         f">= 2.0; p99 not worse: {s.p99_batching_not_worse}", s.cpu_ratio_batching_vs_none),
        ("(3)", "batch 1 x 64 callers", f"model {s.b1_batching_rps:,.0f} req/s",
         f"null {s.null_b1_batching_rps:,.0f} req/s", s.ratio_model_vs_null, ">= 0.7", s.cpu_ratio_model_vs_null),
    ]
    for (label, phase, measured, against, value, target, per_cpu), bounds in zip(rows, s.ratio_ranges):
        cells = (label, phase, measured, against, f"ratio {value:.2f}", target, _span(bounds), f"{per_cpu:.2f}")
        table.add_row(*(Text(cell) for cell in cells))
    return table


def notes(s: BenchSummary) -> list[str]:
    """The lines under the table."""
    batch_mean = "not exposed" if s.b1_batching_batch_mean is None else f"{s.b1_batching_batch_mean:.1f}"
    return [
        f"where (1)'s time goes: served {s.served_b64_cpu_us:,.0f} us of server CPU per batch-64 request "
        f"against {s.model_b64_cpu_us_in_process:,.0f} us per call in-process; the harness alone (null backend) "
        f"costs {s.harness_b64_cpu_us:,.0f} us, so (1) could reach {s.ceiling_served_vs_in_process:.2f} if "
        f"nothing else changed",
        f"    by kind of thread, served / in-process / null backend (us per batch-64 request): "
        f"{_by_kind(s.served_b64_thread_cpu_us, s.in_process_b64_thread_cpu_us, s.null_b64_thread_cpu_us)}",
        f"(2): the batching server's mean processed batch: {batch_mean} rows (max 64, timeout 2 ms, one batch thread)",
        f"median of {s.rounds} round(s) of {s.duration_s:.0f} s phases; server cpu {s.server_cpu} "
        f"({s.server_kind} server, {s.device}: {s.device_name}), client cpu {s.client_cpu}; errors {s.errors}, "
        f"wrong answers {s.wrong_answers}",
    ]


def _by_kind(*columns: dict[str, float]) -> str:
    kinds = sorted({kind for column in columns for kind in column})
    if not kinds:
        return "not measured (no /proc)"
    return ", ".join(f"{kind} " + " / ".join(f"{c.get(kind, 0.0):,.0f}" for c in columns) for kind in kinds)


def _span(bounds: tuple[float, float]) -> str:
    return f"{bounds[0]:.2f}-{bounds[1]:.2f}"
