"""Performance check of the embedded server: the three performance ratios (served vs in-process,
batching vs none, model vs null backend), measured in one run.

    mnist-bench bench server --model-base-path models/mnist [--samples models/mnist-samples.npz]

(1) at request batch 64: served images/s / images/s of the same SavedModel called in-process
    (target >= 0.85);
(2) batch-1 requests from 64 concurrent callers: requests/s with batching (max 64, timeout 2 ms)
    / without (target >= 2.0, with p99 latency not worse);
(3) requests/s of the real model / requests/s of the same server with the null backend, both
    batching as in (2) (target >= 0.7).

Beside (1) it prints where the served path's time goes: the null backend at request batch 64
measures the harness alone (gRPC, decoding, validation, encoding) in server CPU per request,
which bounds ratio (1) even if the model ran inside the server exactly as fast as in-process;
and it splits served, in-process and null CPU per request by kind of thread (TensorFlow's pools,
Python's threads, native gRPC threads), which shows where the rest of the gap runs.

Every server (real model without and with batching, null model without and with batching) and
the in-process baseline run under `taskset -c --server-cpu`, one at a time: each round starts a
server, warms it, measures its phases and stops it before the next, so no idle server shares
the measured core. This process, the load client, pins itself to `--client-cpu` before starting
any thread, so the client never steals the server's core. The client is a grpc.aio loop sending
pre-serialized requests, so its own cost per call stays small. Each ratio is the median of its
per-round values (their range is printed too): on a shared machine, neighbouring phases see the
same background load. One JSON line per run is appended to `--output` when given.

This module holds the phases and the order they run in; the client, the in-process child, the
records and the printed summary are its siblings in `loadtest.benchmarks`.

Not for: sizing or reports (see loadtest); this checks the server's own overhead.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from loadtest.benchmarks.serving_path import bench_client as client
from loadtest.benchmarks.serving_path import inprocess
from loadtest.benchmarks.serving_path.bench_records import BenchOptions, LoadResult, RoundResult
from loadtest.benchmarks.serving_path.bench_summary import BenchSummary, summarize
from loadtest.benchmarks.serving_path.payloads import predict_payloads
from serving.deploy.process import start_server

MODEL = "mnist"
SETTLE_S = 1.0  # the discarded pass each phase starts with
BATCHING_PARAMETERS = ("max_batch_size { value: 64 }\nbatch_timeout_micros { value: 2000 }\n"
                       "num_batch_threads { value: 1 }\nmax_enqueued_batches { value: 64 }\n")


class BenchError(RuntimeError):
    """A bench that cannot run (no model version, a core it cannot pin to); the message says why."""


@dataclass(frozen=True)
class Phase:
    """One timed load against one server: request batch size and concurrent callers."""

    batch: int
    concurrency: int


SERVED_B64 = Phase(64, 2)  # two in flight: the next request is decoded while the model runs the current one
B1_64_CALLERS = Phase(1, 64)


@dataclass(frozen=True)
class ServerSetup:
    """One server a round starts: its extra flags, backend, the phases measured on it, whether its answers
    are checked against the exporter's predictions."""

    batching: bool
    backend: str
    phases: tuple[Phase, ...]
    checked: bool


SERVERS = {"plain": ServerSetup(False, "savedmodel", (SERVED_B64, B1_64_CALLERS), True),
           "batched": ServerSetup(True, "savedmodel", (B1_64_CALLERS,), True),
           "null": ServerSetup(False, "null", (SERVED_B64,), False),
           "null_batched": ServerSetup(True, "null", (B1_64_CALLERS,), False)}


@dataclass(frozen=True)
class Measured:
    """What one server gave in one round: a result per phase, its ready line's fields, wrong answers."""

    results: tuple[LoadResult, ...]
    server: dict[str, str]
    wrong: int


def run(options: BenchOptions) -> BenchSummary:
    """The whole bench: pin this process to the client core, run every round, append the JSON line."""
    if not options.model_base_path.is_dir():
        raise BenchError(f"--model-base-path {options.model_base_path} is not a directory (run `make export` first)")
    pin_client(options.client_cpu)
    summary = run_bench(options)
    if options.output:
        append_json_line(options.output, asdict(summary))
    return summary


def pin_client(cpus: str) -> None:
    """The load client is this process: pin it (and every thread it starts later) to the client cores."""
    try:
        os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
    except OSError as exc:
        raise BenchError(f"cannot pin the client to cpu {cpus}: {exc}") from exc


def append_json_line(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        out.write(json.dumps(record) + "\n")


def run_bench(options: BenchOptions) -> BenchSummary:
    """Every round, then the medians; labelled with the real-model server's ready line."""
    model_dir = latest_version_dir(options.model_base_path)
    payloads = {b: predict_payloads(MODEL, b, options.samples) for b in (1, 64)}
    rounds, wrong, served_by = [], 0, {}
    with batching_file() as params:
        for _ in range(options.rounds):
            result, servers = run_round(model_dir, options, payloads, params)
            rounds.append(result)
            wrong += sum(m.wrong for m in servers.values())
            served_by = servers["plain"].server
    return summarize(rounds, wrong, options, served_by)


def run_round(model_dir: Path, options: BenchOptions, payloads: dict[int, list[bytes]],
              batching_params: Path) -> tuple[RoundResult, dict[str, Measured]]:
    """The in-process baseline, then each server alone on the server core with its phases, in turn."""
    in_process = inprocess.run_child(model_dir, options.server_cpu, SERVED_B64.batch, options.samples,
                                     options.warmup_s, options.duration_s)
    servers = {name: measure_alone(setup, options, payloads, batching_params) for name, setup in SERVERS.items()}
    served_b64, b1_none = servers["plain"].results
    (b1_batching,), (null_b64,), (null_b1,) = (servers[n].results for n in ("batched", "null", "null_batched"))
    return RoundResult(in_process_b64=in_process, served_b64=served_b64, b1_no_batching=b1_none,
                       b1_batching=b1_batching, null_b1_batching=null_b1, null_b64=null_b64), servers


@contextmanager
def batching_file() -> Iterator[Path]:
    """The batching servers' parameters file (max 64, timeout 2 ms, one batch thread), for the run."""
    with tempfile.TemporaryDirectory() as tmp:
        params = Path(tmp) / "batching.txt"
        params.write_text(BATCHING_PARAMETERS)
        yield params


def measure_alone(setup: ServerSetup, options: BenchOptions, payloads: dict[int, list[bytes]],
                  batching_params: Path) -> Measured:
    """Start one server on the server core, check its answers, measure its phases, stop it."""
    flags = ("--enable_batching", "--batching_parameters_file", str(batching_params)) if setup.batching else ()
    with start_server("--model_name", MODEL, "--model_base_path", str(options.model_base_path), *flags,
                      backend=setup.backend, cpu=options.server_cpu) as server:
        bad = client.wrong_answers(server.grpc_target, options.samples, MODEL) if setup.checked else 0
        results = []
        for phase in setup.phases:
            # A discarded pass first: a fresh server's first seconds (thread pools growing,
            # TensorFlow's kernels and caches warming) are slower than its steady state.
            client.measure(server, payloads[phase.batch], phase.concurrency, phase.batch, options.warmup_s, SETTLE_S)
            results.append(client.measure(server, payloads[phase.batch], phase.concurrency, phase.batch,
                                          options.warmup_s, options.duration_s))
        return Measured(tuple(results), server.fields, bad)


def latest_version_dir(base: Path) -> Path:
    """The newest version directory (with a saved_model.pb) under a model's base path."""
    from serving.server.handling.model_source import versions_on_disk  # imports TensorFlow

    versions = versions_on_disk(base)
    if not versions:
        raise BenchError(f"no version directory with a saved_model.pb under {base}")
    return base / str(versions[-1])
