"""What the host probe costs a cell: its CPU, and the server's throughput and latency with and without it.

    mnist-bench bench probe --model-base-path models/mnist

One null-backend server pinned to `--server-cpu`, loaded to its limit by the server bench's client
(`loadtest.benchmarks.serving_path.bench_client`, closed loop, pinned to `--client-cpu`). Each round measures phase A
(no probe) then phase B (the sweep's probes, `loadtest.measure.hiccups`, on the server's cores and the
client's, as a sweep pins them): a saturated server's core is where a probe's CPU would show as lost
throughput, so this is its worst case. The probes' CPU time is read over phase B (warm-up and window).
This machine's speed drifts within minutes, so phases interleave A/B/A/B and every ratio is given
as its median over the rounds with its range.

Not for: what the probe's samples mean (`loadtest.judge.noise`) or the server's own overhead
(`loadtest.benchmarks.serving_path.overhead`).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.benchmarks.serving_path import bench_client as client
from loadtest.benchmarks.serving_path.bench_records import LoadResult, ratio
from loadtest.benchmarks.serving_path.payloads import predict_payloads
from loadtest.measure import hiccups
from serving.deploy.process import ServerHandle, cpu_list, process_cpu_s, start_server

MODEL = "mnist"


@dataclass(frozen=True)
class ProbeBenchOptions:
    model_base_path: Path = Path("models/mnist")
    server_cpu: str = "0"
    client_cpu: str = "1"
    warmup_s: float = 0.5
    duration_s: float = 3.0
    rounds: int = 4
    concurrency: int = 4


@dataclass(frozen=True)
class ProbeRound:
    """One round: the load without the probe (A), with it (B), and the probes' CPU in B (% of one core)."""

    without: LoadResult
    with_probe: LoadResult
    probe_cpu_percent: dict[str, float]  # side -> % of one core over B's window


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))

    def text(self, fmt: str = ".3f") -> str:
        return f"{self.median:{fmt}} ({self.low:{fmt}}-{self.high:{fmt}})"


@dataclass(frozen=True)
class ProbeBenchSummary:
    rounds: list[ProbeRound]
    options: ProbeBenchOptions

    def probe_cpu_percent(self, side: str) -> Spread:
        return Spread.of([r.probe_cpu_percent[side] for r in self.rounds])

    @property
    def throughput_ratio(self) -> Spread:
        return Spread.of([ratio(r.with_probe.throughput_rps, r.without.throughput_rps) for r in self.rounds])

    @property
    def p99_ratio(self) -> Spread:
        return Spread.of([ratio(r.with_probe.p99_latency_ms, r.without.p99_latency_ms) for r in self.rounds])


def measured_with_probes(server: ServerHandle, payloads: list[bytes], options: ProbeBenchOptions,
                         cores: dict[str, set[int]], work: Path) -> tuple[LoadResult, dict[str, float]]:
    """Phase B: the load with a probe on each side's cores, and each probe's CPU % of a core in its window."""
    with hiccups.probing(cores, work, max_s=options.warmup_s + options.duration_s + 30.0) as probes:
        pids = {p.side: p.proc.pid for p in probes.processes if p.proc is not None}
        if len(pids) < len(cores):
            raise RuntimeError("a probe did not start: " + "; ".join(p.note for p in probes.processes if p.note))
        before, started = {side: process_cpu_s(pid) for side, pid in pids.items()}, time.perf_counter()
        load = client.measure(server, payloads, options.concurrency, 1, options.warmup_s, options.duration_s)
        elapsed = time.perf_counter() - started  # the probes' CPU over the warm-up and the window alike
        used = {side: 100.0 * (process_cpu_s(pid) - before[side]) / elapsed for side, pid in pids.items()}
    return load, used


def run(options: ProbeBenchOptions, echo=print) -> ProbeBenchSummary:
    """Rounds of A (no probe) then B (probes on the server's and the client's cores) against one null server."""
    client_cores, server_cores = cpu_list(options.client_cpu), cpu_list(options.server_cpu)
    os.sched_setaffinity(0, client_cores)  # before any gRPC thread starts: the client stays off the server's core
    payloads = predict_payloads(MODEL, 1, None)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as work, \
            start_server("--model_name", MODEL, "--model_base_path", str(options.model_base_path),
                         backend="null", cpu=options.server_cpu) as server:
        for index in range(options.rounds):
            without = client.measure(server, payloads, options.concurrency, 1, options.warmup_s, options.duration_s)
            with_probe, cpu = measured_with_probes(server, payloads, options,
                                                   {"server": server_cores, "loadgen": client_cores},
                                                   Path(work) / f"round-{index}")
            rounds.append(ProbeRound(without, with_probe, cpu))
            echo(f"round {index + 1}: without {without.throughput_rps:.0f} req/s p99 {without.p99_latency_ms:.2f} ms; "
                 f"with {with_probe.throughput_rps:.0f} req/s p99 {with_probe.p99_latency_ms:.2f} ms; probe CPU "
                 + ", ".join(f"{side} {percent:.1f}%" for side, percent in cpu.items()))
    return ProbeBenchSummary(rounds, options)


def format_summary(summary: ProbeBenchSummary) -> str:
    o = summary.options
    return "\n".join([
        f"host probe cost: {len(summary.rounds)} rounds of A (no probe) / B (probes on cores {o.server_cpu} and "
        f"{o.client_cpu}), {o.duration_s:g} s each, null backend, {o.concurrency} callers; median (range):",
        f"  probe CPU, % of one core: server side {summary.probe_cpu_percent('server').text('.2f')}, "
        f"load generator side {summary.probe_cpu_percent('loadgen').text('.2f')}",
        f"  served throughput, with / without: {summary.throughput_ratio.text()}",
        f"  client p99 latency, with / without: {summary.p99_ratio.text()}",
    ])
