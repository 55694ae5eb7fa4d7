"""Benchmark of replica shapes: what k cores serve, against k times what one core serves (scaling efficiency).

`mnist-bench bench shapes` (`make bench-shapes`, not in CI) starts one embedded server per shape k (default 1
and 2): `--workers k` frontends pinned to the first k of `--server-cpu`, the null backend spending a fixed CPU
time per request (`--null_cpu_ms`, default 2 ms: a busy loop holding each frontend's GIL, so what a core can do is
known: at most 1000 / cpu_ms requests/s, less the serving path's own cost). h2load, pinned to `--client-cpu`,
drives each in closed loop (16 connections x 8 streams, request batch 1), the shapes interleaved over `--rounds`
rounds. It prints each shape's throughput a round, and each shape's scaling efficiency,
capacity_k / (k x capacity_1), its median and range over the rounds. A shape whose cores include the load
generator's is labelled so: what it served is a lower bound of what k cores alone serve.

Not for: capacity at a p99 objective (`mnist-bench capacity`), or frontends against one core's worth of work
(`loadtest.benchmarks.serving_path.workers`).
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from loadtest.benchmarks.h2load import grpc_frame
from loadtest.benchmarks.serving_path.payloads import predict_payloads
from loadtest.benchmarks.serving_path.workers import MODEL, WorkersOptions, closed_loop_rps
from serving.deploy.process import ServerHandle, cpu_list, start_server

Print = Callable[[str], None]


@dataclass(frozen=True)
class ShapesOptions:
    model_base_path: Path = Path("models/mnist")
    samples: Path | None = None
    server_cpu: str = "0,1"  # a shape k takes the first k of these
    client_cpu: str = "1"
    shapes: tuple[int, ...] = (1, 2)
    cpu_ms: float = 2.0  # CPU time each request spends in the null backend
    duration_s: float = 4.0
    warmup_s: float = 1.0
    rounds: int = 3


@dataclass(frozen=True)
class Shape:
    """k frontends on k cores."""

    cores: tuple[int, ...]
    shares_loadgen: bool  # its cores include the load generator's: what it serves is a lower bound

    @property
    def k(self) -> int:
        return len(self.cores)

    def label(self) -> str:
        return f"{self.k} core{'s' if self.k > 1 else ''}" + (" (shares the load generator's core)"
                                                            if self.shares_loadgen else "")


def cores_of(text: str) -> tuple[int, ...]:
    """`0,1` or `0-3` as core numbers, lowest first (`serving.deploy.process.cpu_list`)."""
    return tuple(sorted(cpu_list(text)))


def shapes_of(options: ShapesOptions) -> list[Shape]:
    """Each shape k on the first k server cores; ValueError where the server cores are fewer than a shape."""
    server, client = cores_of(options.server_cpu), set(cores_of(options.client_cpu))
    too_big = [k for k in options.shapes if k > len(server)]
    if too_big:
        raise ValueError(f"shape(s) {too_big} need more cores than --server-cpu {options.server_cpu} gives")
    return [Shape(server[:k], bool(client & set(server[:k]))) for k in sorted(set(options.shapes))]


def efficiencies(rates: dict[int, list[float]]) -> dict[int, list[float]]:
    """Each shape's scaling efficiency a round: capacity_k / (k x capacity_1), from the same round's rates."""
    return {k: [rate / (k * one) for rate, one in zip(rates[k], rates[1], strict=True)] for k in rates}


@contextmanager
def _servers(options: ShapesOptions, shapes: Sequence[Shape]) -> Iterator[dict[int, ServerHandle]]:
    with ExitStack() as stack:
        yield {shape.k: stack.enter_context(start_server(
            "--model_name", MODEL, "--model_base_path", str(options.model_base_path.resolve()),
            "--workers", str(shape.k), "--null_cpu_ms", f"{options.cpu_ms:g}", "--device_floor_s", "0",
            backend="null", cpu=",".join(map(str, shape.cores)), timeout_s=300)) for shape in shapes}


def run(options: ShapesOptions, echo: Print = print) -> dict[int, float]:
    """Every shape's closed-loop rate over interleaved rounds; returns each shape's median efficiency."""
    shapes = shapes_of(options)
    if 1 not in {s.k for s in shapes}:
        raise ValueError("the shapes must include 1: efficiency is against k times one core")
    body = Path(tempfile.mkdtemp(prefix="bench-shapes-")) / "request.grpc"
    body.write_bytes(grpc_frame(predict_payloads(MODEL, 1, options.samples)[0]))
    h2load = WorkersOptions(client_cpu=options.client_cpu, duration_s=options.duration_s, warmup_s=options.warmup_s)
    echo(f"replica shapes: null backend spending {options.cpu_ms:g} ms of CPU a request (at most "
         f"{1000 / options.cpu_ms:,.0f} req/s a core), request batch 1, closed loop; h2load on core "
         f"{options.client_cpu}; shapes: " + ", ".join(s.label() for s in shapes))
    rates: dict[int, list[float]] = {s.k: [] for s in shapes}
    with _servers(options, shapes) as up:
        for round_ in range(options.rounds):
            for shape in shapes:
                rates[shape.k].append(closed_loop_rps(up[shape.k], body, h2load))
            echo(f"  round {round_ + 1}: " + ", ".join(f"{s.label()} {rates[s.k][-1]:,.0f} req/s" for s in shapes))
    medians = {}
    for shape, (k, values) in zip(shapes, efficiencies(rates).items(), strict=True):
        medians[k] = statistics.median(values)
        echo(f"  {shape.label()}: {statistics.median(rates[k]):,.0f} req/s (median), scaling efficiency "
             f"x{medians[k]:.2f} of {k} x one core (x{min(values):.2f}-x{max(values):.2f} over {options.rounds} "
             f"rounds)" + ("; a lower bound: it shares the load generator's core" if shape.shares_loadgen else ""))
    return medians


__all__ = ["Shape", "ShapesOptions", "cores_of", "efficiencies", "run", "shapes_of"]
