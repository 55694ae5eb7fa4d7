"""TensorFlow against JAX as the embedded server's runtime: served images/s side by side, in one run.

    mnist-bench bench runtimes --model-base-path models/mnist [--samples models/mnist-samples.npz]

For each runtime (the `savedmodel` backend on TensorFlow, the `jax` backend on Keras/JAX under
XLA) and each batching setting (off; on with the server bench's parameters: max 64, timeout 2 ms,
one batch thread), one server is started alone under `taskset -c --server-cpu`, its answers are
checked against the exporter's predictions, and two phases are measured: request batch 1 from 64
concurrent callers, and request batch 64 from 2 callers (the server bench's phases). This process,
the load client, is pinned to `--client-cpu`, so both runtimes see the same cores and the same
client. Each phase starts with a discarded settling pass.

Not for: the server's overhead ratios (`loadtest.benchmarks.serving_path.overhead`), whose phases and client it reuses.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from rich import box
from rich.table import Table

from loadtest.benchmarks.serving_path import bench_client as client
from loadtest.benchmarks.serving_path.bench_records import BenchOptions, LoadResult, ratio
from loadtest.benchmarks.serving_path.overhead import (
    B1_64_CALLERS,
    MODEL,
    SERVED_B64,
    SETTLE_S,
    BenchError,
    Phase,
    append_json_line,
    batching_file,
    latest_version_dir,
    pin_client,
)
from loadtest.benchmarks.serving_path.payloads import predict_payloads
from loadtest.evidence.tables import plain_table
from serving.deploy.process import start_server

BACKENDS = ("savedmodel", "jax")  # TensorFlow, then JAX
PHASES = (B1_64_CALLERS, SERVED_B64)
TABLE_WIDTH = 110


@dataclass(frozen=True)
class RuntimeRow:
    """One server (runtime x batching) and what its two phases served."""

    backend: str
    runtime: str
    runtime_versions: str
    batching: str  # "off" or "on"
    b1_images_per_s: float
    b1_p99_latency_ms: float
    b64_images_per_s: float
    b64_p99_latency_ms: float
    server_cpu_us_per_image_b64: float
    errors: int
    wrong_answers: int


@dataclass(frozen=True)
class RuntimesSummary:
    """The whole run: a row per server, and how it was set up."""

    rows: tuple[RuntimeRow, ...]
    device: str
    device_name: str
    server_cpu: str
    client_cpu: str
    duration_s: float
    utc: str


def run(options: BenchOptions) -> RuntimesSummary:
    """Pin this process to the client cores, measure every runtime x batching server, append the JSON line."""
    if not options.model_base_path.is_dir():
        raise BenchError(f"--model-base-path {options.model_base_path} is not a directory (run `make export` first)")
    check_keras_file(options)
    pin_client(options.client_cpu)
    payloads = {p.batch: predict_payloads(MODEL, p.batch, options.samples) for p in PHASES}
    rows: list[RuntimeRow] = []
    fields: dict[str, str] = {}
    with batching_file() as params:
        for backend in BACKENDS:
            for batching in (False, True):
                flags = ("--enable_batching", "--batching_parameters_file", str(params)) if batching else ()
                row, fields = measure_server(backend, flags, options, payloads)
                rows.append(row)
    summary = RuntimesSummary(tuple(rows), fields.get("device", ""), fields.get("device_name", ""),
                              options.server_cpu, options.client_cpu, options.duration_s,
                              time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    if options.output:
        append_json_line(options.output, {"bench": "runtimes", **asdict(summary)})
    return summary


def check_keras_file(options: BenchOptions) -> None:
    """The jax backend needs the version's model.keras (exports before it existed lack one)."""
    version_dir = latest_version_dir(options.model_base_path)
    if not (version_dir / "model.keras").is_file():
        raise BenchError(f"{version_dir} has no model.keras for the jax backend; re-run make export")


def measure_server(backend: str, flags: tuple[str, ...], options: BenchOptions,
                   payloads: dict[int, list[bytes]]) -> tuple[RuntimeRow, dict[str, str]]:
    """Start one server alone on the server cores, check its answers, measure both phases, stop it."""
    with start_server("--model_name", MODEL, "--model_base_path", str(options.model_base_path), *flags,
                      backend=backend, cpu=options.server_cpu) as server:
        wrong = client.wrong_answers(server.grpc_target, options.samples, MODEL)
        b1, b64 = (measure_phase(server, phase, payloads[phase.batch], options) for phase in PHASES)
        fields = server.fields
    row = RuntimeRow(backend=backend, runtime=fields.get("runtime") or "", batching=fields["batching"],
                     runtime_versions=fields.get("runtime_versions") or "",
                     b1_images_per_s=b1.images_per_s, b1_p99_latency_ms=b1.p99_latency_ms,
                     b64_images_per_s=b64.images_per_s, b64_p99_latency_ms=b64.p99_latency_ms,
                     server_cpu_us_per_image_b64=b64.server_cpu_s * 1e6 / b64.images if b64.images else 0.0,
                     errors=b1.errors + b64.errors, wrong_answers=wrong)
    return row, fields


def measure_phase(server, phase: Phase, payloads: list[bytes], options: BenchOptions) -> LoadResult:
    """A discarded settling pass, then the measured one."""
    client.measure(server, payloads, phase.concurrency, phase.batch, options.warmup_s, SETTLE_S)
    return client.measure(server, payloads, phase.concurrency, phase.batch, options.warmup_s, options.duration_s)


def runtimes_table(s: RuntimesSummary) -> Table:
    table = Table(box=box.SIMPLE_HEAD, title="served images/s by runtime (same cores, same client)")
    for header in ("runtime", "batching", "b1 img/s", "b1 p99 ms", "b64 img/s", "b64 p99 ms",
                   "b64 server CPU us/img", "errors", "wrong"):
        table.add_column(header, justify="left" if header in ("runtime", "batching") else "right")
    for r in s.rows:
        table.add_row(r.runtime, r.batching, f"{r.b1_images_per_s:,.0f}",
                      f"{r.b1_p99_latency_ms:.2f}", f"{r.b64_images_per_s:,.0f}", f"{r.b64_p99_latency_ms:.2f}",
                      f"{r.server_cpu_us_per_image_b64:.1f}", str(r.errors), str(r.wrong_answers))
    return table


def format_summary(s: RuntimesSummary) -> str:
    """The table, then the JAX/TensorFlow ratios and the run's setup."""
    lines = [plain_table(runtimes_table(s), TABLE_WIDTH)]
    by_key = {(r.backend, r.batching): r for r in s.rows}
    for batching in ("off", "on"):
        tf_row, jax_row = by_key.get(("savedmodel", batching)), by_key.get(("jax", batching))
        if tf_row and jax_row:
            lines.append(f"jax / tensorflow, batching {batching}: "
                         f"b1 {ratio(jax_row.b1_images_per_s, tf_row.b1_images_per_s):.2f}x, "
                         f"b64 {ratio(jax_row.b64_images_per_s, tf_row.b64_images_per_s):.2f}x")
    versions = "; ".join(sorted({f"{r.runtime}: {r.runtime_versions}" for r in s.rows}))
    lines.append(f"{s.device} ({s.device_name}); server cores {s.server_cpu}, client cores {s.client_cpu}; "
                 f"{s.duration_s:g} s per phase; {versions}; {s.utc}")
    return "\n".join(lines)


__all__ = ["RuntimeRow", "RuntimesSummary", "format_summary", "run"]
