"""The server bench's records: what a run is set to, what one load phase measured, one round's phases.

`LoadResult` is what a phase measured (as the client saw it, plus the server's CPU time in the
window); `RoundResult` holds one round's six phases and derives the per-round ratios from them.
`BenchOptions` is the run's settings, as the `mnist-bench bench server` options give them.

Not for: measuring (`loadtest.benchmarks.serving_path.bench_client`, `loadtest.benchmarks.serving_path.inprocess`)
or the medians over rounds and their text (`loadtest.benchmarks.serving_path.bench_summary`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


def ratio(a: float, b: float) -> float:
    """a / b, 0.0 when b is 0 (a phase that measured nothing)."""
    return a / b if b else 0.0


@dataclass(frozen=True)
class BenchOptions:
    """One server-bench run's settings: files, cores, phase lengths, rounds, where the JSON line goes."""

    model_base_path: Path = Path("models/mnist")
    samples: Path | None = None  # npz with `images` (None: random pixels)
    server_cpu: str = "0"  # `taskset -c` list for every server and the in-process baseline
    client_cpu: str = "1"  # cores this process (the load client) is pinned to
    warmup_s: float = 1.0
    duration_s: float = 4.0
    rounds: int = 3  # rounds of all phases; the ratios are their medians
    output: Path | None = None  # append the summary as one JSON line to this file


@dataclass(frozen=True)
class LoadResult:
    """One timed load phase, as the client saw it."""

    requests: int
    errors: int
    images: int
    elapsed_s: float
    p50_latency_ms: float
    p99_latency_ms: float
    server_cpu_s: float = 0.0  # CPU time the serving process (or the in-process loop) used in the window
    server_batch_mean: float | None = None  # mean processed batch size in the window (batching servers)
    # The same CPU time by kind of thread (serving.deploy.process.thread_cpu_s): TensorFlow's pools, Python's, native
    server_thread_cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def throughput_rps(self) -> float:
        return ratio(self.requests, self.elapsed_s)

    @property
    def images_per_s(self) -> float:
        return ratio(self.images, self.elapsed_s)

    @property
    def requests_per_cpu_s(self) -> float:
        return ratio(self.requests, self.server_cpu_s)

    @property
    def images_per_cpu_s(self) -> float:
        return ratio(self.images, self.server_cpu_s)

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * ratio(self.server_cpu_s, self.requests)

    @property
    def thread_cpu_us_per_request(self) -> dict[str, float]:
        return {kind: 1e6 * ratio(cpu_s, self.requests) for kind, cpu_s in self.server_thread_cpu_s.items()}


@dataclass(frozen=True)
class RoundResult:
    """One round: every phase measured back to back, so the ratios compare like with like."""

    in_process_b64: LoadResult
    served_b64: LoadResult
    b1_no_batching: LoadResult
    b1_batching: LoadResult
    null_b1_batching: LoadResult
    null_b64: LoadResult  # null backend, no batching, request batch 64: the serving harness's own cost

    @property
    def ratios(self) -> tuple[float, float, float]:
        return (ratio(self.served_b64.images_per_s, self.in_process_b64.images_per_s),
                ratio(self.b1_batching.throughput_rps, self.b1_no_batching.throughput_rps),
                ratio(self.b1_batching.throughput_rps, self.null_b1_batching.throughput_rps))

    @property
    def cpu_ratios(self) -> tuple[float, float, float]:
        """The same ratios from work done per CPU-second of the server's core: what the throughput ratios
        would be on a core nobody else uses (a shared machine steals wall time, not CPU time)."""
        return (ratio(self.served_b64.images_per_cpu_s, self.in_process_b64.images_per_cpu_s),
                ratio(self.b1_batching.requests_per_cpu_s, self.b1_no_batching.requests_per_cpu_s),
                ratio(self.b1_batching.requests_per_cpu_s, self.null_b1_batching.requests_per_cpu_s))

    @property
    def harness_b64_cpu_us(self) -> float:
        """Server CPU per batch-64 request with the null backend: everything but the model."""
        return self.null_b64.cpu_us_per_request

    @property
    def ceiling_served_vs_in_process(self) -> float:
        """Ratio (1) if the model cost exactly its in-process CPU inside the server and only the harness
        were added: in-process CPU per call / (that + harness CPU per request)."""
        model = self.in_process_b64.cpu_us_per_request
        return ratio(model, model + self.harness_b64_cpu_us)


def cpu_used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per-kind CPU seconds between two thread_cpu_s readings (threads that ended meanwhile are lost)."""
    return {kind: max(0.0, after[kind] - before.get(kind, 0.0)) for kind in after}
