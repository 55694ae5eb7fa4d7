"""Benchmark of the load generator itself, against the embedded server's null backend.

`python -m loadtest.benchmarks.loadgen` starts `python -m serving.server --backend null` pinned to one core and one
Locust process pinned to another (`taskset -c`), then prints, all measured within this one run:

1. requests/s one Locust process sustains, closed loop at 8, 16 and 32 users (no-op server);
2. its round trip to the no-op server (1 user), and the p50 it reports for a server with a fixed
   5 ms delay, against 5 ms, each beside the mean the server itself measured;
3. with a planted stall (the whole server stalls 200 ms every 2 s): closed-loop p99 vs open-loop
   p99. The open loop keeps its schedule through the stall, so its p99 shows the stall; the
   closed loop's users wait with the server, so only a handful of requests see it (coordinated
   omission).

Not for: measuring a real model (see `loadtest.sweep.runner`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from loadtest.sweep import plan as plans
from loadtest.sweep import scrape
from loadtest.sweep.runner import Target, locust_command, run_locust
from serving.deploy.process import process_cpu_s, start_server


@dataclass(frozen=True)
class BenchServer:
    target: Target
    pid: int  # to read the server's CPU time around each run (taskset execs the server: same pid)


@contextmanager
def null_server(model_base_path: Path, cpu: str, *flags: str, timeout_s: float = 180.0):
    """A null-backend embedded server on free ports, pinned to `cpu`; yields a `BenchServer`."""
    with start_server("--model_name", "mnist", "--model_base_path", str(model_base_path), *flags,
                      backend="null", cpu=cpu, timeout_s=timeout_s) as server:
        fields = server.fields  # what the server's ready line says it is
        target = Target("null", fields["kind"], fields["device"], fields["device_name"], server.grpc_target,
                        server.rest_url, "mnist", "off", {}, {})
        yield BenchServer(target, server.proc.pid)


def measure(run: plans.RunSettings, cell: plans.Cell, server: BenchServer, cpu: str, work: Path) -> dict:
    """One pinned Locust run; its summary (raises if the run failed), plus the server's CPU use.

    The server is idle while Locust starts, so its CPU seconds over the run divided by the
    warm-up plus measured time approximate its load during them.
    """
    server_cpu_before = process_cpu_s(server.pid)
    metrics_before = scrape.scrape(server.target.rest_url)
    summary_path = work / f"{cell.mode}-{cell.concurrency or cell.rate_rps}-{time.monotonic_ns()}.json"
    command = ["taskset", "-c", cpu, *locust_command(run, cell, server.target, summary_path)]
    result = run_locust(command, summary_path, summary_path.with_suffix(".log"),
                        run.startup_timeout_s + run.warmup_s + run.measure_s + 60)
    if result.failure or result.summary is None:
        raise RuntimeError(f"locust run failed: {result.failure}")
    server_cpu_s = process_cpu_s(server.pid) - server_cpu_before
    figures = scrape.cell_figures(metrics_before, scrape.scrape(server.target.rest_url))
    return {**result.summary, "server_cpu_percent": 100 * server_cpu_s / (run.warmup_s + run.measure_s),
            "server_latency_mean_us": figures.extra.get("request_latency_mean_us")}


def _ms(value_us) -> str:
    return "not exposed" if value_us is None else f"{value_us / 1000:.3f} ms"


def delay_breakdown(idle: dict, delayed: dict) -> str:
    """Where the 5 ms run's excess over 5 ms goes: inside the server (its own mean less 5 ms) and outside
    it (client mean less server mean), the latter beside the same split of the no-op round trip."""
    if idle["server_latency_mean_us"] is None or delayed["server_latency_mean_us"] is None:
        return "    (the server exposes no latency metric: no breakdown)"
    inside = delayed["server_latency_mean_us"] / 1000 - 5.0
    outside = delayed["latency"]["mean_ms"] - delayed["server_latency_mean_us"] / 1000
    idle_outside = idle["latency"]["mean_ms"] - idle["server_latency_mean_us"] / 1000
    return (f"    excess of the mean over 5 ms: {inside:+.3f} ms inside the server, {outside:+.3f} ms between "
            f"Locust's clock and the server's (transport, both gRPC stacks, wake-ups), against {idle_outside:+.3f} ms "
            f"for the same round trip to the no-op server kept busy back to back")


def rps(summary: dict) -> float:
    return summary["ok_requests"] / summary["measure_s"]


def run(args: argparse.Namespace) -> None:
    base = plans.RunSettings(warmup_s=1.0, measure_s=args.seconds, samples=str(args.samples), check="shape",
                             late_threshold_ms=2.0)
    work = Path(tempfile.mkdtemp(prefix="loadtest-bench-"))
    with null_server(args.model_base_path.resolve(), args.server_cpu) as server:
        measured = server.target
        print(f"{measured.kind} server (null backend, device {measured.device}: {measured.device_name}) on core "
              f"{args.server_cpu}, one Locust process on core {args.loadgen_cpu}; {args.seconds:g} s measured per run")
        for users in (8, 16, 32):
            summary = measure(base, plans.Cell("closed", 1, users, None), server, args.loadgen_cpu, work)
            cpu = 100 * sum(summary["cpu_s_by_pid"].values()) / summary["measure_s"]
            print(f"no-op server, closed loop, {users:2d} users: {rps(summary):7.0f} requests/s "
                  f"(p50 {summary['latency']['p50_ms']:.3f} ms; CPU of a core: load generator {cpu:.0f}%, "
                  f"server {summary['server_cpu_percent']:.0f}%)")
        idle = measure(base, plans.Cell("closed", 1, 1, None), server, args.loadgen_cpu, work)
        print(f"no-op server, closed loop,  1 user:  p50 {idle['latency']['p50_ms']:.3f} ms, mean "
              f"{idle['latency']['mean_ms']:.3f} ms (the server's own mean: {_ms(idle['server_latency_mean_us'])})")
    # The null backend is one "device": concurrent calls queue for it, so one user sees the bare delay.
    with null_server(args.model_base_path.resolve(), args.server_cpu, "--null_delay_ms", "5") as server:
        delayed = measure(base, plans.Cell("closed", 1, 1, None), server, args.loadgen_cpu, work)
        p50 = delayed["latency"]["p50_ms"]
        print(f"fixed 5 ms server delay, closed loop, 1 user: p50 {p50:.3f} ms (off by {p50 - 5.0:+.3f} ms; "
              f"target within 0.3 ms); mean {delayed['latency']['mean_ms']:.3f} ms, the server's own mean "
              f"{_ms(delayed['server_latency_mean_us'])}")
        print(delay_breakdown(idle, delayed))
    stall = ("--null_delay_ms", "5", "--null_stall_ms", "200", "--null_stall_every_s", "2")
    with null_server(args.model_base_path.resolve(), args.server_cpu, *stall) as server:
        closed = measure(base, plans.Cell("closed", 1, 1, None), server, args.loadgen_cpu, work)
        open_run = replace(base, arrival="constant")
        opened = measure(open_run, plans.Cell("open", 1, None, args.open_rate), server, args.loadgen_cpu, work)
        print(f"planted 200 ms stall every 2 s: closed-loop p99 {closed['latency']['p99_ms']:.3f} ms "
              f"({rps(closed):.0f} req/s, 1 user); open-loop p99 {opened['latency']['p99_ms']:.3f} ms "
              f"({rps(opened):.0f} req/s at {args.open_rate:g}/s, {opened['late_sends']} late sends)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.benchmarks.loadgen", description=__doc__.splitlines()[0])
    parser.add_argument("--model_base_path", type=Path, default=Path("models/mnist"))
    parser.add_argument("--samples", type=Path, default=Path("models/mnist-samples.npz"))
    parser.add_argument("--server-cpu", default="0")
    parser.add_argument("--loadgen-cpu", default="1")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--open-rate", type=float, default=100.0, help="open loop: under the 5 ms server's 200/s")
    args = parser.parse_args(argv)
    try:
        if not args.samples.exists() or not args.model_base_path.exists():
            raise FileNotFoundError(f"{args.model_base_path} or {args.samples} missing; run `make export` first")
        run(args)
    except (OSError, RuntimeError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
