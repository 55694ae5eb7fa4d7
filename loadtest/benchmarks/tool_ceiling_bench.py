"""The tool ceiling on this machine (`mnist-bench bench loadgen`'s last part, issue #59): what one Locust process
and the embedded server's path sustain when the model costs nothing, at request batch 1 and 32, beside h2load
against the same null server.

The null-backend server on `--server-cpu`, one Locust process on `--loadgen-cpu` (the capacity runs' twin, as
`loadtest.search.tool_ceiling_run` starts it, with the server's default flags), `OUTSTANDING` requests in flight
(closed loop: the most the pair carries, an upper bound on what an open-loop twin passes at). Per request batch:
req/s, and µs of CPU a request on each side (Locust's processes; the server's, from its CPU time over the run), then
h2load with as many streams against the same server and request bytes: its req/s, its own and the server's µs a
request. A recorded target, not a gate: >= 2,500 req/s at request batch 1 here.

Not for: the twin in a capacity run (`loadtest.search.tool_ceiling_run`) or its pass rule (`loadtest.judge`).
"""

from __future__ import annotations

from pathlib import Path

from loadtest.benchmarks.h2load import H2loadResult
from loadtest.benchmarks.loadgen import LoadgenOptions, Print, base_settings, measure, null_server, rps
from loadtest.benchmarks.reference import OUTSTANDING, h2load_run, predict_body
from loadtest.evidence.vocab import LoadMode
from loadtest.measure import plan as plans
from serving.deploy.process import process_cpu_s
from serving.endpoint import ServedEndpoint

BATCHES = (1, 32)
TARGET_RPS = 2500.0  # at request batch 1, on the 2-core build machine (issue #59): recorded, not a gate


def run(options: LoadgenOptions, work: Path, echo: Print, against_h2load: bool = True) -> None:
    """One line per request batch: ours, then h2load's (when asked) on the same null server."""
    base = base_settings(options)
    echo(f"tool ceiling: null-backend server on core {options.server_cpu}, one Locust process on core "
         f"{options.loadgen_cpu}, {OUTSTANDING} requests in flight, {options.seconds:g} s measured; target "
         f">= {TARGET_RPS:,.0f} req/s at request batch 1 (recorded, not a gate)")
    with null_server(options.model_base_path.resolve(), options.server_cpu) as server:
        for batch in BATCHES:
            summary = measure(base, plans.Cell(LoadMode.CLOSED, batch, OUTSTANDING, None), server,
                              options.loadgen_cpu, work)
            ours = rps(summary)
            loadgen_us = 1e6 * sum(summary["cpu_s_by_pid"].values()) / max(1, summary["requests"])
            server_us = 1e4 * summary["server_cpu_percent"] / ours if ours else float("nan")
            echo(f"  request batch {batch:2d}: ours {ours:7,.0f} req/s, CPU a request: Locust {loadgen_us:5.0f} µs, "
                 f"server {server_us:5.0f} µs")
            if against_h2load:
                body = predict_body(server, options.samples, work, batch)
                theirs, server_h2_us = h2load_with_server_cpu(options, server, body, base)
                echo(f"  request batch {batch:2d}: h2load {theirs.rps:7,.0f} req/s, CPU a request: h2load "
                     f"{theirs.cpu_us_per_request:5.0f} µs, server {server_h2_us:5.0f} µs")


def h2load_with_server_cpu(options: LoadgenOptions, server: ServedEndpoint, body: Path,
                           base: plans.RunSettings) -> tuple[H2loadResult, float]:
    """h2load closed loop with `OUTSTANDING` streams; its result and the server's µs of CPU a request over it."""
    assert server.pid is not None
    before = process_cpu_s(server.pid)
    result = h2load_run(options, server, body, base, streams=OUTSTANDING)
    spent_s = process_cpu_s(server.pid) - before
    return result, 1e6 * spent_s / result.requests if result.requests else float("nan")
