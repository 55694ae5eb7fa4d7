"""What the lent machine has, asked before anything runs on it: the packages' versions, whether PyTorch
sees a GPU, the bundle's source record, and PyTorch's GPU round trip handed to the servers.

Standard library only (`run.py` asks before its wheels are installed; each probe runs in a child Python with
the bundle's environment). Not for: the run (`loadtest.bundle.device_run`) or PyTorch's round trip itself
(`loadtest.bundle.profiling.torch_round_trip`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# serving.server.handling.floor's names (not imported: run.py starts before the bundle's numpy is installed).
DEVICE_ROUND_TRIP_ENV = "MNIST_BENCH_DEVICE_ROUND_TRIP_US"
DEVICE_ROUND_TRIP_NOTE_ENV = "MNIST_BENCH_DEVICE_ROUND_TRIP_NOTE"
VERSIONS = ("jax", "jaxlib", "keras", "torch", "numpy", "grpcio", "protobuf", "locust", "py-spy")


def round_trip_env(torch_trip: dict) -> dict[str, str]:
    """The servers' environment that hands them PyTorch's GPU round trip (`serving.server.handling.floor`), so each
    record's device floor can set the device's own round trip beside its runtime's; {} when not measured."""
    median = torch_trip.get("median_us")
    if not median:
        return {}
    return {DEVICE_ROUND_TRIP_ENV: f"{median}",
            DEVICE_ROUND_TRIP_NOTE_ENV: f"PyTorch {torch_trip.get('torch', '')}: {torch_trip.get('what', '')}"}


def gpu_problem(env: dict[str, str]) -> str:
    """"" when PyTorch (the GPU servers' runtime) sees a GPU here; else why not."""
    probe = "import torch; print(torch.cuda.device_count())"
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return "PyTorch did not list its devices within 120 s"
    if done.returncode != 0 or not done.stdout.strip().isdigit() or int(done.stdout.strip()) < 1:
        return f"PyTorch sees no GPU: {(done.stderr.strip().splitlines() or ['no GPU devices'])[-1]}"
    return ""


def versions(env: dict[str, str]) -> dict[str, str]:
    probe = ("import json, platform\nfrom importlib import metadata\nv = {'python': platform.python_version()}\n"
             f"for n in {VERSIONS!r}:\n    try: v[n] = metadata.version(n)\n"
             "    except metadata.PackageNotFoundError: v[n] = 'not installed'\nprint(json.dumps(v))")
    try:
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return {"note": "the version probe did not finish within 60 s"}
    return json.loads(done.stdout) if done.returncode == 0 else {"note": done.stderr.strip()[-300:]}


def source(project: Path) -> dict:
    """The bundle's source record (`make device-bundle` writes it into `project`), or why there is none."""
    try:
        return json.loads((project / "SOURCE.json").read_text())
    except (OSError, ValueError) as exc:
        return {"commit": "unknown", "note": f"no source record: {exc}"}
