"""The server bench's in-process baseline: the SavedModel called directly, in a child pinned to the server's core.

`run_child` starts `python -m loadtest.benchmarks.serving_path.inprocess MODEL_DIR ...` under `taskset -c` and
reads the one JSON line (a `LoadResult`) it prints. The child is internal to the bench, not a user
command, so its entry point is a bare argparse:

    python -m loadtest.benchmarks.serving_path.inprocess MODEL_DIR --batch 64 --warmup-s 1 --duration-s 4 \
        [--samples FILE]

Not for: anything served (`loadtest.benchmarks.serving_path.bench_client`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from loadtest.benchmarks.serving_path.bench_records import LoadResult, cpu_used
from loadtest.benchmarks.serving_path.payloads import batches
from model_export.provenance import REPO
from serving.deploy.process import pinned, thread_cpu_s

CHILD_TIMEOUT_S = 600


class InProcessFailed(RuntimeError):
    """The baseline child failed; the message ends with its stderr's last lines."""


def measure_in_process(model_dir: Path, batch: int, samples: Path | None, warmup_s: float,
                       duration_s: float) -> LoadResult:
    """The SavedModel called directly, the way a user would without any server, on the same batches the
    served phases send (in turn, as their callers do)."""
    import tensorflow as tf

    fn = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    inputs = batches(batch, samples)

    def call(n: int) -> None:
        fn(images=tf.constant(inputs[n % len(inputs)]))["classes"].numpy()

    end_warmup, calls = time.perf_counter() + warmup_s, 0
    while time.perf_counter() < end_warmup:
        call(calls)
        calls += 1
    calls, start, cpu_start, threads_start = 0, time.perf_counter(), time.process_time(), thread_cpu_s(os.getpid())
    while time.perf_counter() - start < duration_s:
        call(calls)
        calls += 1
    elapsed = time.perf_counter() - start
    return LoadResult(calls, 0, calls * batch, elapsed, 0.0, 0.0, time.process_time() - cpu_start,
                      server_thread_cpu_s=cpu_used(threads_start, thread_cpu_s(os.getpid())))


def child_command(model_dir: Path, cpu: str, batch: int, samples: Path | None, warmup_s: float,
                  duration_s: float) -> list[str]:
    """The pinned child's command line."""
    cmd = [sys.executable, "-m", "loadtest.benchmarks.serving_path.inprocess", str(model_dir),
           "--batch", str(batch), "--warmup-s", str(warmup_s), "--duration-s", str(duration_s)]
    return pinned(cmd + (["--samples", str(samples)] if samples else []), cpu)


def run_child(model_dir: Path, cpu: str, batch: int, samples: Path | None, warmup_s: float,
              duration_s: float) -> LoadResult:
    """The in-process baseline in its own process, pinned to `cpu` (the server's core)."""
    done = subprocess.run(child_command(model_dir, cpu, batch, samples, warmup_s, duration_s), capture_output=True,
                          text=True, cwd=REPO, timeout=CHILD_TIMEOUT_S, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    if done.returncode != 0:
        raise InProcessFailed(f"in-process measurement failed: {done.stderr[-2000:]}")
    return LoadResult(**json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    """The child: measure, print the result as one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m loadtest.benchmarks.serving_path.inprocess",
                                     description="The in-process baseline child: one measurement, one JSON line.")
    parser.add_argument("model_dir", type=Path, help="a version directory (with saved_model.pb)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--samples", type=Path, default=None, help="npz with `images` (default: random pixels)")
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--duration-s", type=float, default=4.0)
    args = parser.parse_args(argv)
    result = measure_in_process(args.model_dir, args.batch, args.samples, args.warmup_s, args.duration_s)
    print(json.dumps(asdict(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
