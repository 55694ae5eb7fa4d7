"""Soak benchmark of a pooled server: capacity confirmed in this run, then minutes at 80% of it.

`mnist-bench bench soak` starts the real model with `--workers 2` on the server cores and, with this
project's Locust (open loop, Poisson, latency timed from the intended send):

1. finds a capacity in this run: a closed loop gives a starting rate; each candidate rate (stepping down
   15% at a time) must pass twice in a row (p99 within the objective, every request answered);
2. holds 80% of that rate for `--minutes` one-minute cells, back to back, and after each minute reads the
   RSS and open file descriptors of every server process (supervisor, frontends, owner);
3. prints p99 per minute, requests sent against answered (Locust's count and the server's own), and each
   process's RSS and descriptors at the last minute against minute 2 (the target: within 10%).

Not for: a capacity answer (`mnist-bench capacity`), or CI (it runs for minutes: `make bench-soak`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import psutil

from loadtest.benchmarks.loadgen import endpoint_of
from loadtest.evidence.vocab import Check, LoadMode
from loadtest.measure import plan as plans
from loadtest.measure import scrape
from loadtest.measure.locust_run import locust_command, run_locust
from serving.deploy.process import pinned, start_server
from serving.protocol.names import REQUEST_COUNT_SUFFIX

MODEL = "mnist"
SOAK_SHARE = 0.8
STEP_DOWN = 0.85
MAX_STEPS = 8
GROWTH_LIMIT = 0.10  # RSS and descriptors at the end within 10% of minute 2
Print = Callable[[str], None]


@dataclass(frozen=True)
class SoakOptions:
    model_base_path: Path = Path("models/mnist")
    samples: Path = Path("models/mnist-samples.npz")
    server_cpu: str = "0,1"
    loadgen_cpu: str = "1"
    workers: int = 2
    p99_objective_ms: float = 25.0
    minutes: int = 10
    search_s: float = 10.0  # measured seconds of each capacity cell


@dataclass(frozen=True)
class ProcessState:
    pid: int
    name: str
    rss_bytes: int
    fds: int


def process_states(pid: int) -> dict[int, ProcessState]:
    """RSS and open descriptors of the server and every process under it."""
    root = psutil.Process(pid)
    out = {}
    for process in [root, *root.children(recursive=True)]:
        try:
            with process.oneshot():
                name = _role(process, pid)
                out[process.pid] = ProcessState(process.pid, name, process.memory_info().rss, process.num_fds())
        except psutil.Error:
            continue
    return out


def _role(process: psutil.Process, root: int) -> str:
    """What a server process is, for the table: the supervisor, a frontend or the owner, or the
    resource tracker multiprocessing starts."""
    if process.pid == root:
        return "supervisor" if process.children() else "server"
    line = " ".join(process.cmdline())
    return "multiprocessing's resource tracker" if "resource_tracker" in line else "frontend or owner"


def cell(run: plans.RunSettings, mode: LoadMode, value: float, server, options: SoakOptions, work: Path) -> dict:
    """One Locust run (closed: `value` users; open: `value` req/s) and the server's request count over it."""
    concurrency, rate = (int(value), None) if mode == LoadMode.CLOSED else (None, value)
    spec = plans.Cell(mode, 1, concurrency, rate)
    summary_path = work / f"cell-{time.monotonic_ns()}.json"
    before = scrape.scrape(server.rest_url)
    command = pinned(locust_command(run, spec, server, summary_path), options.loadgen_cpu)
    result = run_locust(command, summary_path, summary_path.with_suffix(".log"), run.warmup_s + run.measure_s + 120)
    if result.summary is None:
        raise RuntimeError(f"locust run failed: {result.failure}")
    after = scrape.scrape(server.rest_url)
    answered = _requests(after) - _requests(before)
    return {**result.summary.to_dict(), "server_requests": answered}


def _requests(snapshot: scrape.Snapshot | None) -> float:
    """Every request the server counted (all statuses), from one scrape."""
    return sum(snapshot.counters.get(REQUEST_COUNT_SUFFIX, {}).values()) if snapshot is not None else 0.0


def passes(summary: dict, p99_objective_ms: float) -> bool:
    p99 = summary["latency"]["p99_ms"]
    return summary["requests"] > 0 and summary["ok_requests"] == summary["requests"] and p99 is not None \
        and p99 <= p99_objective_ms


def find_capacity(run: plans.RunSettings, server, options: SoakOptions, work: Path, echo: Print) -> float:
    """The highest rate that passed twice in a row, stepping down from the closed loop's rate."""
    closed = cell(run, LoadMode.CLOSED, 32, server, options, work)
    rate = 0.9 * closed["ok_requests"] / closed["measure_s"]
    echo(f"  closed loop, 32 users: {closed['ok_requests'] / closed['measure_s']:,.0f} req/s; first candidate "
         f"{rate:,.0f} req/s")
    for _ in range(MAX_STEPS):
        results = [cell(run, LoadMode.OPEN, rate, server, options, work) for _ in range(2)]
        p99s = ", ".join(f"{r['latency']['p99_ms']:.2f}" for r in results)
        if all(passes(r, options.p99_objective_ms) for r in results):
            echo(f"  {rate:,.0f} req/s passed twice (p99 {p99s} ms <= {options.p99_objective_ms:g} ms): capacity")
            return rate
        echo(f"  {rate:,.0f} req/s: p99 {p99s} ms, not confirmed; stepping down")
        rate *= STEP_DOWN
    raise RuntimeError(f"no rate passed twice within {MAX_STEPS} steps")


def growth(first: dict[int, ProcessState], last: dict[int, ProcessState]) -> list[str]:
    """One line per process: RSS and descriptors at the end against minute 2, and whether within the limit."""
    lines = []
    for pid, start in sorted(first.items()):
        end = last.get(pid)
        if end is None:
            lines.append(f"  pid {pid} ({start.name}): gone by the end (restarted?): FAIL")
            continue
        rss, fds = end.rss_bytes / start.rss_bytes - 1, end.fds / start.fds - 1
        ok = rss <= GROWTH_LIMIT and fds <= GROWTH_LIMIT
        lines.append(f"  pid {pid} ({start.name}): RSS {start.rss_bytes / 2**20:.0f} -> {end.rss_bytes / 2**20:.0f} "
                     f"MiB ({rss:+.1%}), descriptors {start.fds} -> {end.fds} ({fds:+.1%}): {'ok' if ok else 'FAIL'}")
    return lines


def run(options: SoakOptions, work: Path, echo: Print = print) -> bool:
    """The soak; True when every minute answered all it sent and no process grew past the limit."""
    run_settings = plans.RunSettings(warmup_s=2.0, measure_s=options.search_s, samples=str(options.samples),
                                     check=Check.CLASSES, late_threshold_ms=2.0)
    with start_server("--model_name", MODEL, "--model_base_path", str(options.model_base_path.resolve()),
                      "--workers", str(options.workers), cpu=options.server_cpu, timeout_s=300) as handle:
        server = endpoint_of(handle, "soak")
        echo(f"server: real model, --workers {options.workers}, cores {options.server_cpu}; Locust on core "
             f"{options.loadgen_cpu} (shared with the server); objective p99 <= {options.p99_objective_ms:g} ms")
        echo("1. capacity, confirmed in this run")
        capacity = find_capacity(run_settings, server, options, work, echo)
        rate = SOAK_SHARE * capacity
        echo(f"2. {options.minutes} minutes at {rate:,.0f} req/s ({SOAK_SHARE:.0%} of it), one Locust cell a minute")
        minute = replace(run_settings, warmup_s=1.0, measure_s=60.0)
        states: dict[int, dict[int, ProcessState]] = {}
        all_answered = True
        for m in range(1, options.minutes + 1):
            summary = cell(minute, LoadMode.OPEN, rate, server, options, work)
            states[m] = process_states(handle.proc.pid)
            answered = summary["ok_requests"] == summary["requests"]
            all_answered &= answered
            echo(f"  minute {m:2d}: sent {summary['requests']:,}, answered {summary['ok_requests']:,} (server counted "
                 f"{summary['server_requests']:,.0f} incl. warm-up), p99 {summary['latency']['p99_ms']:.2f} ms, "
                 f"late sends {summary['late_sends']}, RSS {sum(s.rss_bytes for s in states[m].values()) / 2**20:.0f} "
                 f"MiB, descriptors {sum(s.fds for s in states[m].values())}")
        echo(f"3. every process at minute {options.minutes} against minute 2")
        lines = growth(states[min(2, options.minutes)], states[options.minutes])
        for line in lines:
            echo(line)
        verdict = all_answered and not any(line.endswith("FAIL") for line in lines)
        echo(f"soak: {'passed' if verdict else 'FAILED'}: every request answered: {all_answered}")
        return verdict


__all__ = ["SoakOptions", "run"]
