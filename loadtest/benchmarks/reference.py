"""Our load generator held against h2load, the C reference, in one run: issue #13's three figures.

Alternating rounds (ours, then h2load, on the same server, both pinned to the load generator's core):

1. closed loop, one user, no-op server: our p50 against h2load's mean (target: within 0.1 ms);
2. CPU per request at batch 1, 32 requests outstanding against the no-op server: our Locust
   process's CPU seconds over its requests against h2load's (ours: target <= 100 µs);
3. open loop at `open_rate` requests/s (constant gaps) against the real model served with batching
   (max batch 64, 2 ms timeout, one batch thread): our p50 against h2load's mean (within 0.2 ms).

Medians over the rounds with their range: this machine's speed drifts, so only a comparison within
one run means anything. h2load's mean and its CPU include its warm-up second (it prints no
percentiles, and its CPU is read for the whole process).

Not for: the load generator's own figures (`loadtest.benchmarks.loadgen`) or running h2load
(`loadtest.benchmarks.h2load`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from loadtest.benchmarks.h2load import grpc_frame, h2load_command, run_h2load
from loadtest.benchmarks.loadgen import LoadgenOptions, base_settings, closed, measure, null_server, served_model
from loadtest.evidence.vocab import Arrival, LoadMode
from loadtest.measure import plan as plans
from serving.endpoint import ServedEndpoint

ROUNDS = 3
OUTSTANDING = 32  # part 3: requests in flight, ours as users, h2load's as streams
Print = Callable[[str], None]


def predict_body(server: ServedEndpoint, samples: Path, work: Path, batch_size: int = 1) -> Path:
    """The gRPC body h2load posts: the very request our client sends first (`batch_size` images), checked to be
    answered OK."""
    from loadtest.load.client import GrpcPredictClient, Samples

    client = GrpcPredictClient(server.grpc_target, server.model_name, "serving_default", Samples.load(samples),
                               batch_size, check="shape", variants=1)
    try:
        record = client.call(0)
        if not record.ok:
            raise RuntimeError(f"the server does not answer the benchmark's request: {record.status} {record.error}")
        body = work / f"predict-{server.grpc_port}-b{batch_size}.bin"
        body.write_bytes(grpc_frame(client.requests[0].payload))
    finally:
        client.close()
    return body


def spread(values: list[float], unit: str = "ms", digits: int = 3) -> str:
    """`median (low–high) unit` over the rounds."""
    return f"{statistics.median(values):.{digits}f} {unit} ({min(values):.{digits}f}–{max(values):.{digits}f})"


def differences(ours: list[float], theirs: list[float]) -> list[float]:
    """Round by round: ours minus the reference measured right after it."""
    return [a - b for a, b in zip(ours, theirs)]


def run(options: LoadgenOptions, work: Path, echo: Print) -> None:
    base = base_settings(options)
    echo(f"against h2load (C, nghttp2), {ROUNDS} alternating rounds of {options.seconds:g} s each, both on core "
         f"{options.loadgen_cpu}; medians (range)")
    with null_server(options.model_base_path.resolve(), options.server_cpu) as server:
        body = predict_body(server, options.samples, work)
        closed_loop_part(options, base, server, body, work, echo)
        cpu_part(options, base, server, body, work, echo)
    with served_model(options, work) as server:
        open_loop_part(options, base, server, predict_body(server, options.samples, work), work, echo)


def h2load_run(options: LoadgenOptions, server: ServedEndpoint, body: Path, base: plans.RunSettings, **kw):
    command = h2load_command(server.grpc_target, body, duration_s=options.seconds, warmup_s=base.warmup_s,
                             cpu=options.loadgen_cpu, **kw)
    return run_h2load(command, timeout_s=options.seconds + base.warmup_s + 60)


def closed_loop_part(options: LoadgenOptions, base: plans.RunSettings, server: ServedEndpoint, body: Path,
                     work: Path, echo: Print) -> None:
    ours, theirs = [], []
    for _ in range(ROUNDS):
        ours.append(measure(base, closed(1), server, options.loadgen_cpu, work)["latency"]["p50_ms"])
        theirs.append(h2load_run(options, server, body, base).mean_ms)
    echo(f"1. closed loop, 1 user, no-op server: ours p50 {spread(ours)} vs h2load mean {spread(theirs)}: "
         f"ours {spread(differences(ours, theirs))} above (target within 0.1 ms)")


def cpu_part(options: LoadgenOptions, base: plans.RunSettings, server: ServedEndpoint, body: Path, work: Path,
             echo: Print) -> None:
    ours, theirs = [], []
    for _ in range(ROUNDS):
        summary = measure(base, closed(OUTSTANDING), server, options.loadgen_cpu, work)
        ours.append(1e6 * sum(summary["cpu_s_by_pid"].values()) / max(1, summary["requests"]))
        theirs.append(h2load_run(options, server, body, base, streams=OUTSTANDING).cpu_us_per_request)
    echo(f"2. CPU per request, batch 1, {OUTSTANDING} outstanding, no-op server: ours {spread(ours, 'µs', 0)} vs "
         f"h2load {spread(theirs, 'µs', 0)} (target ours <= 100 µs)")


def open_loop_part(options: LoadgenOptions, base: plans.RunSettings, server: ServedEndpoint, body: Path,
                   work: Path, echo: Print) -> None:
    settings = replace(base, arrival=Arrival.CONSTANT)
    cell = plans.Cell(LoadMode.OPEN, 1, None, options.open_rate)
    ours, theirs, lags = [], [], []
    for _ in range(ROUNDS):
        summary = measure(settings, cell, server, options.loadgen_cpu, work)
        ours.append(summary["latency"]["p50_ms"])
        lags.append(1000 * (summary["dispatch_lag"] or {}).get("p99_ms", float("nan")))
        theirs.append(h2load_run(options, server, body, base, rps=options.open_rate).mean_ms)
    echo(f"3. open loop {options.open_rate:g} req/s, real model (batching: max 64, 2 ms timeout, 1 thread): ours p50 "
         f"{spread(ours)} vs h2load mean {spread(theirs)}: ours {spread(differences(ours, theirs))} above "
         f"(target within 0.2 ms); our dispatch lag p99 {spread(lags, 'µs', 0)}")
