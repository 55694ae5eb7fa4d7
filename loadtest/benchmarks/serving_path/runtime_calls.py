"""Per-call cost of the Keras runtimes, side by side on the same cores: JAX (XLA) against PyTorch (the torch
backend: CUDA graphs on a GPU, the model called directly on a CPU).

    mnist-bench bench runtime-calls --model-base-path models/mnist [--cpu 0] [--device cpu]

Each round starts one child process per backend, in turn, pinned to the same cores (Keras's backend is
fixed per process): it loads the newest version's model.keras through the backend itself, warms up, then
times the runner's model call (`serving.server.handling.runner.timed_call`) one call after another at each
request batch for `--seconds`, and prints the median and p99 µs per call and the images/s that makes. Rounds
alternate the order of the backends; the ratio torch / jax per batch is the median of the rounds' ratios,
with their range.

Not for: served throughput (`mnist-bench bench runtimes`, which serves each runtime over gRPC).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from serving.deploy.process import pinned

BACKENDS = ("jax", "torch")
Print = Callable[[str], None]


@dataclass(frozen=True)
class CallsOptions:
    model_base_path: Path = Path("models/mnist")
    cpu: str = "0"
    device: str = "cpu"
    seconds: float = 3.0
    rounds: int = 3
    batches: tuple[int, ...] = (1, 32)


def newest_version(base: Path) -> Path:
    versions = sorted((p for p in base.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    if not versions:
        raise ValueError(f"{base} has no version directory: run make export")
    return versions[-1]


def child(backend: str, model_dir: str, device: str, seconds: float, batches: list[int]) -> dict:
    """In the child process: the per-call figures of one backend."""
    import numpy as np

    from serving.server.runtimes import prepare_process

    prepare_process(backend)
    from serving.server.handling.runner import timed_call
    from serving.server.runtimes import load_model
    from serving.server.runtimes.model_spec import BackendOptions

    model = load_model(backend, "m", 1, Path(model_dir), BackendOptions(device=device))
    signature = next(iter(model.signatures))
    spec = model.signatures[signature]
    out: dict = {"backend": backend}
    for batch in batches:
        inputs = {alias: np.zeros((batch,) + tuple(max(d, 1) for d in (t.shape or (-1,))[1:]), t.numpy_dtype)
                  for alias, t in spec.inputs.items()}
        outputs = sorted(spec.outputs)
        for _ in range(20):
            timed_call(model, signature, inputs, outputs)
        times = []
        stop = time.perf_counter() + seconds
        while time.perf_counter() < stop:
            started = time.perf_counter()
            timed_call(model, signature, inputs, outputs)
            times.append(time.perf_counter() - started)
        median = statistics.median(times)
        out[str(batch)] = {"median_us": median * 1e6, "p99_us": statistics.quantiles(times, n=100)[-1] * 1e6,
                           "images_per_s": batch / median, "calls": len(times)}
    return out


def measure(backend: str, options: CallsOptions) -> dict:
    """One child run; its figures, or {"error": why}."""
    command = pinned([sys.executable, "-m", "loadtest.benchmarks.serving_path.runtime_calls", "--child", backend,
                      str(newest_version(options.model_base_path).resolve()), options.device, str(options.seconds),
                      *map(str, options.batches)], options.cpu)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        return {"backend": backend, "error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def run(options: CallsOptions, echo: Print = print) -> dict:
    rounds: list[dict[str, dict]] = []
    for i in range(options.rounds):
        order = BACKENDS if i % 2 == 0 else tuple(reversed(BACKENDS))
        found = {backend: measure(backend, options) for backend in order}
        rounds.append(found)
        for backend in BACKENDS:
            row = found[backend]
            if "error" in row:
                echo(f"round {i + 1}: {backend}: not measured: {row['error']}")
                continue
            echo(f"round {i + 1}: {backend}: " + ", ".join(
                f"batch {b}: {row[str(b)]['median_us']:,.0f} us a call (p99 {row[str(b)]['p99_us']:,.0f}), "
                f"{row[str(b)]['images_per_s']:,.0f} img/s" for b in options.batches))
    summary = {}
    for batch in options.batches:
        ratios = [r["torch"][str(batch)]["median_us"] / r["jax"][str(batch)]["median_us"] for r in rounds
                  if "error" not in r["torch"] and "error" not in r["jax"]]
        if ratios:
            summary[batch] = statistics.median(ratios)
            echo(f"batch {batch}: torch / jax time a call, median of {len(ratios)} rounds: x{summary[batch]:.2f} "
                 f"(x{min(ratios):.2f}-x{max(ratios):.2f}) on {options.device}, cores {options.cpu}")
    return summary


def main(argv: list[str] | None = None) -> int:
    """The child's entry point: `--child BACKEND MODEL_DIR DEVICE SECONDS BATCH...`, one JSON line out."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", required=True)
    parser.add_argument("model_dir")
    parser.add_argument("device")
    parser.add_argument("seconds", type=float)
    parser.add_argument("batches", type=int, nargs="+")
    args = parser.parse_args(argv)
    print(json.dumps(child(args.child, args.model_dir, args.device, args.seconds, args.batches)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["CallsOptions", "child", "main", "run"]
