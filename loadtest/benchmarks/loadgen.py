"""Benchmark of the load generator itself, against the embedded server's null backend.

`mnist-bench bench loadgen` starts `python -m serving.server --backend null` pinned to one core and one
Locust process pinned to another (`taskset -c`), then prints, all measured within this one run:

1. requests/s one Locust process sustains, closed loop at 8, 16 and 32 users (no-op server);
2. its round trip to the no-op server (1 user), and the p50 it reports for a server with a fixed
   5 ms delay, against 5 ms, each beside the mean the server itself measured;
3. with a planted stall (the whole server stalls 200 ms every 2 s): closed-loop p99 vs open-loop
   p99. The open loop keeps its schedule through the stall, so its p99 shows the stall; the
   closed loop's users wait with the server, so only a handful of requests see it (coordinated
   omission).

Each run is one sweep cell (`loadtest.measure.locust_run.locust_command` / `run_locust`) against a
`ServedEndpoint` built from the server's ready line.

Not for: measuring a real model (see `loadtest.measure.cell_sweep`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from loadtest.evidence.vocab import Arrival, Check, LoadMode
from loadtest.measure import plan as plans
from loadtest.measure import scrape
from loadtest.measure.locust_run import locust_command, run_locust
from serving.deploy.config import BatchingProfile
from serving.deploy.process import ServerHandle, pinned, process_cpu_s, start_server
from serving.deploy.tfs_files import batching_parameters_text
from serving.endpoint import ServedEndpoint

MODEL = "mnist"
DELAY_MS = 5.0  # the fixed server delay of part 2
STALL_FLAGS = ("--null_delay_ms", "5", "--null_stall_ms", "200", "--null_stall_every_s", "2")
Print = Callable[[str], None]
# The real model's server of the comparison with h2load (issue #13): batching, one batch thread.
MODEL_BATCHING = BatchingProfile(name="bench", enable_batching=True, max_batch_size=64, batch_timeout_micros=2000,
                                 num_batch_threads=1, max_enqueued_batches=100)


class LoadgenBenchError(RuntimeError):
    """A benchmark run that failed (a Locust run without a summary); the message says why."""


@dataclass(frozen=True)
class LoadgenOptions:
    """One load-generator benchmark's settings, as `mnist-bench bench loadgen` gives them."""

    model_base_path: Path = Path("models/mnist")
    samples: Path = Path("models/mnist-samples.npz")
    server_cpu: str = "0"
    loadgen_cpu: str = "1"
    seconds: float = 5.0  # measured per run
    open_rate: float = 100.0  # open loop: under the 5 ms server's 200/s


def endpoint_of(server: ServerHandle, name: str) -> ServedEndpoint:
    """The served-endpoint record of a started server, from its ready line (pid: taskset execs the server,
    so it is the server's own, to read its CPU time around each run)."""
    fields = server.fields
    host, _, grpc_port = fields["grpc"].rpartition(":")
    rest_port = fields["rest"].rpartition(":")[2]
    return ServedEndpoint(name=name, kind=fields["kind"], device=fields["device"], device_name=fields["device_name"],
                          host=host, grpc_port=int(grpc_port), rest_port=int(rest_port), model_name=MODEL,
                          batching_profile="off", pid=server.proc.pid)


@contextmanager
def null_server(model_base_path: Path, cpu: str, *flags: str, timeout_s: float = 180.0) -> Iterator[ServedEndpoint]:
    """A null-backend embedded server on free ports, pinned to `cpu`."""
    with start_server("--model_name", MODEL, "--model_base_path", str(model_base_path), *flags,
                      backend="null", cpu=cpu, timeout_s=timeout_s) as server:
        yield endpoint_of(server, "null")


@contextmanager
def served_model(options: LoadgenOptions, work: Path, timeout_s: float = 180.0) -> Iterator[ServedEndpoint]:
    """The real model (SavedModel backend) with `MODEL_BATCHING`, on free ports, pinned to the server's cores."""
    params = work / "batching_parameters.txt"
    params.write_text(batching_parameters_text(MODEL_BATCHING))
    with start_server("--model_name", MODEL, "--model_base_path", str(options.model_base_path.resolve()),
                      "--enable_batching", "--batching_parameters_file", str(params), "--batching_profile", "bench",
                      cpu=options.server_cpu, timeout_s=timeout_s) as server:
        yield endpoint_of(server, "model")


def measure(run: plans.RunSettings, cell: plans.Cell, server: ServedEndpoint, cpu: str, work: Path) -> dict:
    """One pinned Locust run; its summary (raises if the run failed), plus the server's CPU use.

    The server is idle while Locust starts, so its CPU seconds over the run divided by the
    warm-up plus measured time approximate its load during them.
    """
    if server.pid is None:
        raise LoadgenBenchError(f"no process id for server {server.name}: cannot read its CPU time")
    server_cpu_before = process_cpu_s(server.pid)
    metrics_before = scrape.scrape(server.rest_url)
    summary_path = work / f"{cell.mode}-{cell.concurrency or cell.rate_rps}-{time.monotonic_ns()}.json"
    command = pinned(locust_command(run, cell, server, summary_path), cpu)
    result = run_locust(command, summary_path, summary_path.with_suffix(".log"),
                        run.startup_timeout_s + run.warmup_s + run.measure_s + 60)
    if result.failure or result.summary is None:
        raise LoadgenBenchError(f"locust run failed: {result.failure}")
    server_cpu_s = process_cpu_s(server.pid) - server_cpu_before
    figures = scrape.cell_figures(metrics_before, scrape.scrape(server.rest_url))
    return {**result.summary.to_dict(), "server_cpu_percent": 100 * server_cpu_s / (run.warmup_s + run.measure_s),
            "server_latency_mean_us": figures.scrape.request_latency_mean_us}


def _ms(value_us) -> str:
    return "not exposed" if value_us is None else f"{value_us / 1000:.3f} ms"


def delay_breakdown(idle: dict, delayed: dict) -> str:
    """Where the 5 ms run's excess over 5 ms goes: inside the server (its own mean less 5 ms) and outside
    it (client mean less server mean), the latter beside the same split of the no-op round trip."""
    if idle["server_latency_mean_us"] is None or delayed["server_latency_mean_us"] is None:
        return "    (the server exposes no latency metric: no breakdown)"
    inside = delayed["server_latency_mean_us"] / 1000 - DELAY_MS
    outside = delayed["latency"]["mean_ms"] - delayed["server_latency_mean_us"] / 1000
    idle_outside = idle["latency"]["mean_ms"] - idle["server_latency_mean_us"] / 1000
    return (f"    excess of the mean over 5 ms: {inside:+.3f} ms inside the server, {outside:+.3f} ms between "
            f"Locust's clock and the server's (transport, both gRPC stacks, wake-ups), against {idle_outside:+.3f} ms "
            f"for the same round trip to the no-op server kept busy back to back")


def rps(summary: dict) -> float:
    return summary["ok_requests"] / summary["measure_s"]


def closed(users: int) -> plans.Cell:
    return plans.Cell(LoadMode.CLOSED, 1, users, None)


def base_settings(options: LoadgenOptions) -> plans.RunSettings:
    return plans.RunSettings(warmup_s=1.0, measure_s=options.seconds, samples=str(options.samples),
                             check=Check.SHAPE, late_threshold_ms=2.0)


def run(options: LoadgenOptions, work: Path, echo: Print = print) -> None:
    """The three parts, each on a fresh null server; one line per measurement through `echo`."""
    base = base_settings(options)
    idle = throughput_part(options, base, work, echo)
    delay_part(options, base, work, idle, echo)
    stall_part(options, base, work, echo)


def throughput_part(options: LoadgenOptions, base: plans.RunSettings, work: Path, echo: Print) -> dict:
    """Part 1 and the no-op round trip of part 2; returns the 1-user run."""
    with null_server(options.model_base_path.resolve(), options.server_cpu) as server:
        echo(f"{server.kind} server (null backend, device {server.device}: {server.device_name}) on core "
             f"{options.server_cpu}, one Locust process on core {options.loadgen_cpu}; {options.seconds:g} s "
             f"measured per run")
        for users in (8, 16, 32):
            summary = measure(base, closed(users), server, options.loadgen_cpu, work)
            cpu = 100 * sum(summary["cpu_s_by_pid"].values()) / summary["measure_s"]
            echo(f"no-op server, closed loop, {users:2d} users: {rps(summary):7.0f} requests/s "
                 f"(p50 {summary['latency']['p50_ms']:.3f} ms; CPU of a core: load generator {cpu:.0f}%, "
                 f"server {summary['server_cpu_percent']:.0f}%)")
        idle = measure(base, closed(1), server, options.loadgen_cpu, work)
        echo(f"no-op server, closed loop,  1 user:  p50 {idle['latency']['p50_ms']:.3f} ms, mean "
             f"{idle['latency']['mean_ms']:.3f} ms (the server's own mean: {_ms(idle['server_latency_mean_us'])})")
    return idle


def delay_part(options: LoadgenOptions, base: plans.RunSettings, work: Path, idle: dict, echo: Print) -> None:
    """Part 2: one user against a fixed 5 ms delay."""
    # The null backend is one "device": concurrent calls queue for it, so one user sees the bare delay.
    with null_server(options.model_base_path.resolve(), options.server_cpu, "--null_delay_ms", "5") as server:
        delayed = measure(base, closed(1), server, options.loadgen_cpu, work)
        p50 = delayed["latency"]["p50_ms"]
        echo(f"fixed 5 ms server delay, closed loop, 1 user: p50 {p50:.3f} ms (off by {p50 - DELAY_MS:+.3f} ms; "
             f"target within 0.3 ms); mean {delayed['latency']['mean_ms']:.3f} ms, the server's own mean "
             f"{_ms(delayed['server_latency_mean_us'])}")
        echo(delay_breakdown(idle, delayed))


def stall_part(options: LoadgenOptions, base: plans.RunSettings, work: Path, echo: Print) -> None:
    """Part 3: closed-loop vs open-loop p99 through a planted stall."""
    with null_server(options.model_base_path.resolve(), options.server_cpu, *STALL_FLAGS) as server:
        closed_run = measure(base, closed(1), server, options.loadgen_cpu, work)
        open_settings = replace(base, arrival=Arrival.CONSTANT)
        opened = measure(open_settings, plans.Cell(LoadMode.OPEN, 1, None, options.open_rate), server,
                         options.loadgen_cpu, work)
        echo(f"planted 200 ms stall every 2 s: closed-loop p99 {closed_run['latency']['p99_ms']:.3f} ms "
             f"({rps(closed_run):.0f} req/s, 1 user); open-loop p99 {opened['latency']['p99_ms']:.3f} ms "
             f"({rps(opened):.0f} req/s at {options.open_rate:g}/s, {opened['late_sends']} late sends)")
