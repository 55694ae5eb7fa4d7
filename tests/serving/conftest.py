"""Fixtures for the serving tests: real server processes on free ports, (helpers in `tests.support`).

Servers are session-scoped where tests only read from them, so the whole set starts a
handful of processes (each costs a TensorFlow import) rather than one per test.
"""

from __future__ import annotations

import numpy as np
import pytest

from serving.deploy.process import start_server
from tests.support.batching import write_batching_file


@pytest.fixture(scope="session")
def samples(exported_model) -> dict[str, np.ndarray]:
    with np.load(exported_model.samples_path) as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def plain_server(exported_model):
    """The real SavedModel, no batching."""
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path)) as server:
        yield server


@pytest.fixture(scope="session")
def batching_server(exported_model, tmp_path_factory):
    """The real SavedModel, batching with a long timeout and allowed sizes so merging is observable."""
    params = write_batching_file(tmp_path_factory.mktemp("batching") / "batching.txt",
                                 max_batch_size=32, batch_timeout_micros=50_000, num_batch_threads=1,
                                 max_enqueued_batches=100, allowed_batch_sizes=[4, 8, 16, 32])
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--enable_batching", "--batching_parameters_file", str(params)) as server:
        yield server
