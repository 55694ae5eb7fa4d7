"""Run the CPU-vs-GPU comparison from a device bundle, offline: `python3 run.py --out DIR`.

Copied into the bundle as `run.py` (`loadtest.bundle.build`); runs on the bundle's machine with
its own Python and the standard library only, until it has installed the bundle:

1. installs `wheels/` into `site/` with no index (`pip install --no-index --no-deps --target`):
   nothing is fetched; what the machine's image already has (JAX, numpy, grpcio, ...) is used;
2. finds which of the asked devices can serve: `gpu` only where JAX sees one (else it says why
   and goes on with the others);
3. per device, one `mnist-bench capacity` run: the embedded server with the jax backend (the same
   trained weights as the SavedModel, on Keras 3's JAX backend) started on that device with
   batching `off` and with the device's profile, a capacity search at p99 ≤ `--p99-ms` per request
   batch, Locust processes on their own cores (the server gets the rest);
4. with `--tune-minutes M`, tunes the batching on each device for M minutes at the first request
   batch (`mnist-bench tune`: from the device's profile, one BatchingParameters field at a time);
5. writes the report over every device's results into `--out`.

Every result names its runtime (JAX), never TF Serving. Bounded: each search by its steps and
minutes (`--max-steps`, `--max-minutes`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BUNDLE = Path(__file__).resolve().parent
PROJECT = BUNDLE / "project"
SITE = BUNDLE / "site"
DEVICES = ("gpu", "cpu")


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="CPU vs GPU capacity from the device bundle, offline")
    parser.add_argument("--out", type=Path, required=True, help="results and the report go here")
    parser.add_argument("--devices", default="gpu,cpu", help="comma-separated: gpu, cpu")
    parser.add_argument("--batches", default="1,8,32,128", help="request batch sizes, comma-separated")
    parser.add_argument("--p99-ms", type=float, default=10.0)
    parser.add_argument("--measure-s", type=float, default=2.0)
    parser.add_argument("--max-steps", type=int, default=12)
    parser.add_argument("--max-minutes", type=float, default=4.0, help="per search")
    parser.add_argument("--loadgen-cores", type=int, default=0, help="cores for Locust (default: a quarter, ≥ 1)")
    parser.add_argument("--tune-minutes", type=float, default=0.0,
                        help="also tune the batching on each device for this long, at the first batch (0: no tuning)")
    args = parser.parse_args(argv)
    unknown = set(args.devices.split(",")) - set(DEVICES)
    if unknown:
        parser.error(f"--devices: unknown {sorted(unknown)}; choose from {', '.join(DEVICES)}")
    return args


def install() -> None:
    """The bundle's wheels into `site/`, once, from the bundle alone."""
    marker = SITE / ".installed"
    if marker.is_file():
        return
    wheels = sorted(str(p) for p in (BUNDLE / "wheels").glob("*.whl"))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", str(SITE),
               *wheels]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"run.py: installing the bundle's wheels failed: {done.stderr.strip()[-800:]}")
    marker.write_text(f"{len(wheels)} wheels\n")


def environment() -> dict[str, str]:
    """The project, its protos and the installed wheels ahead of the image's packages; Keras on JAX."""
    path = [str(SITE), str(PROJECT), str(BUNDLE / "protos"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p), "KERAS_BACKEND": "jax",
            "PYTHONUNBUFFERED": "1"}


def gpu_problem(env: dict[str, str]) -> str:
    """"" when JAX sees a GPU here; else why not."""
    probe = "import jax; print(len(jax.devices('gpu')))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip().isdigit() or int(done.stdout.strip()) < 1:
        return f"JAX sees no GPU: {(done.stderr.strip().splitlines() or ['no GPU devices'])[-1]}"
    return ""


def core_split(loadgen_cores: int) -> tuple[str, str, int]:
    """(server cores, load-generator cores, Locust processes): the last cores go to Locust."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return "", "", 1
    count = loadgen_cores or max(1, len(cores) // 4)
    count = min(count, len(cores) - 1)
    server, loadgen = cores[:-count], cores[-count:]
    return ",".join(map(str, server)), ",".join(map(str, loadgen)), count


def write_plan(out: Path, args: argparse.Namespace) -> Path:
    server_cpus, loadgen_cpus, processes = core_split(args.loadgen_cores)
    lines = ['name = "device-bundle"', "[run]", "warmup_s = 0.5", f"measure_s = {args.measure_s}", "window_s = 0.5",
             f"processes = {processes}", 'protocol = "grpc"', 'arrival = "poisson"', 'check = "classes"',
             "request_timeout_s = 10.0", "late_threshold_ms = 2.0",
             f'samples = "{PROJECT / "models" / "mnist-samples.npz"}"']
    if loadgen_cpus:
        lines.append(f'loadgen_cpus = "{loadgen_cpus}"')
    lines += ["[grid]", "batch_sizes = [1]", "concurrency = [4]", "rates_rps = []", "[servers.launch]",
              'kind = "embedded"']
    if server_cpus:
        lines.append(f'server_cpus = "{server_cpus}"')
    plan = out / "device-plan.toml"
    plan.write_text("\n".join(lines) + "\n")
    return plan


def capacity(device: str, plan: Path, out: Path, args: argparse.Namespace, env: dict[str, str]) -> int:
    batches = [b for b in args.batches.split(",") if b]
    command = [sys.executable, "-m", "loadtest", "capacity", "--plan", str(plan), "--p99-ms", str(args.p99_ms),
               "--serve", f"{device}/off", "--serve", f"{device}/{device}", "--server-flags=--backend jax",
               "--models-dir", str(PROJECT / "models"), "--results-dir", str(out / "results"),
               "--max-steps", str(args.max_steps), "--max-minutes", str(args.max_minutes), "--unmet-ok", "--no-report",
               *(f"--batch={b}" for b in batches)]
    print(f"run.py: {device}: {' '.join(command[2:])}", flush=True)
    return subprocess.run(command, cwd=PROJECT, env=env).returncode


def tune(device: str, plan: Path, out: Path, args: argparse.Namespace, env: dict[str, str]) -> int:
    """`mnist-bench tune` on the device: the BatchingParameters with the highest capacity, from its profile."""
    command = [sys.executable, "-m", "loadtest", "tune", "--plan", str(plan), "--p99-ms", str(args.p99_ms),
               "--device", device, "--batch", args.batches.split(",")[0], "--budget-min", str(args.tune_minutes),
               "--server-flags=--backend jax", "--models-dir", str(PROJECT / "models"),
               "--results-dir", str(out / "results"), "--max-steps", str(args.max_steps)]
    print(f"run.py: {device}: {' '.join(command[2:])}", flush=True)
    return subprocess.run(command, cwd=PROJECT, env=env).returncode


def report(out: Path, args: argparse.Namespace, env: dict[str, str]) -> int:
    results = sorted(str(p) for p in (out / "results").glob("*/results.jsonl"))
    if not results:
        print("run.py: no results to report", flush=True)
        return 1
    command = [sys.executable, "-m", "loadtest", "report", *results, "--p99-ms", str(args.p99_ms),
               "--out", str(out / "report")]
    return subprocess.run(command, cwd=PROJECT, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    install()
    env = environment()
    skipped, codes = {}, {}
    for device in args.devices.split(","):
        problem = gpu_problem(env) if device == "gpu" else ""
        if problem:
            skipped[device] = problem
            print(f"run.py: {device} skipped: {problem}", flush=True)
            continue
        plan = write_plan(args.out, args)
        codes[device] = capacity(device, plan, args.out, args, env)
        if args.tune_minutes > 0:
            codes[f"{device}-tune"] = tune(device, plan, args.out, args, env)
    codes["report"] = report(args.out, args, env) if codes else 1
    summary = {"exit_codes": codes, "skipped": skipped, "seconds": round(time.time() - started, 1),
               "python": sys.version.split()[0]}
    (args.out / "device-run.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"run.py: {json.dumps(summary)}", flush=True)
    return 0 if codes and all(code == 0 for code in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
