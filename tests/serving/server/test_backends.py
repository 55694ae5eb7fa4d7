"""Backends: the null backend mirrors the signature's outputs; the SavedModel backend runs the model."""

from __future__ import annotations

import time

import numpy as np
import pytest

from serving.server.flags import build_parser
from serving.server.runtimes import RUNTIMES, load_model
from serving.server.runtimes.model_spec import BackendOptions
from serving.server.runtimes.null import hold_until, spend_cpu
from tests.support import timing


def test_registry_names():
    assert set(RUNTIMES) == {"savedmodel", "jax", "torch", "null"}
    backend = next(a for a in build_parser()._actions if a.dest == "backend")
    assert list(backend.choices) == sorted(RUNTIMES)  # the CLI's choices come from the registry


@pytest.mark.integration
@pytest.mark.untimed  # lower bounds, and CPU time, not wall time
def test_null_backend_returns_zeros_of_the_signature_outputs(exported_model):
    model = load_model("null", "mnist", 1, exported_model.model_dir, BackendOptions())
    assert {"predict_images", "serving_default"} <= set(model.signatures)
    out = model.run("predict_images", {"images": np.ones((3, 784), np.float32)}, ["scores", "classes"])
    assert out["scores"].shape == (3, 10) and out["scores"].dtype == np.float32 and not out["scores"].any()
    assert out["classes"].shape == (3,) and out["classes"].dtype == np.int64


@pytest.mark.integration
@pytest.mark.untimed  # lower bounds, and CPU time, not wall time
def test_null_backend_delay_and_periodic_stall(exported_model):
    delayed = load_model("null", "mnist", 1, exported_model.model_dir, BackendOptions(null_delay_ms=50))
    started = time.perf_counter()
    delayed.run("serving_default", {"images": np.ones((1, 784), np.float32)}, ["classes"])
    assert time.perf_counter() - started >= 0.05  # held to its deadline, never shorter
    # The stall window opens as the backend loads, so it is timed from before the load: a call in the window is held
    # to its end, and a call after it comes later still; never under 0.2 s, however slowly this machine runs.
    started = time.perf_counter()
    stalled = load_model("null", "mnist", 1, exported_model.model_dir,
                         BackendOptions(null_stall_ms=200, null_stall_every_s=10))
    stalled.run("serving_default", {"images": np.ones((1, 784), np.float32)}, ["classes"])
    assert time.perf_counter() - started >= 0.2


@pytest.mark.integration  # a wall-time bound (1 ms): with the timed tests, one at a time, not beside the parallel phase
def test_hold_until_never_returns_before_its_deadline():
    lateness = []
    for _ in range(20):
        deadline = time.perf_counter() + 0.003
        hold_until(deadline)
        lateness.append(time.perf_counter() - deadline)
    assert min(lateness) >= 0
    # the final yield-spin ends at the deadline, not a timer tick later; a slow, busy host can wake it later still
    median = sorted(lateness)[10]
    timing.holds("median lateness < 1 ms", median < 0.001, f"{median * 1e3:.3f} ms")
    hold_until(time.perf_counter() - 1)  # a deadline in the past returns at once


@pytest.mark.integration
@pytest.mark.untimed  # lower bounds, and CPU time, not wall time
def test_savedmodel_backend_matches_the_exporters_predictions(exported_model, samples):
    model = load_model("savedmodel", "mnist", 1, exported_model.model_dir, BackendOptions())
    out = model.run("predict_images", {"images": samples["images"][:32]}, ["classes"])
    np.testing.assert_array_equal(out["classes"], samples["expected_classes"][:32])


@pytest.mark.integration
@pytest.mark.untimed  # lower bounds, and CPU time, not wall time
def test_null_backend_spends_a_fixed_cpu_time_per_call(exported_model):
    """--null_cpu_ms: each call keeps its thread busy for that much CPU time (not a sleep)."""
    model = load_model("null", "mnist", 1, exported_model.model_dir, BackendOptions(null_cpu_ms=20))
    model.run("serving_default", {"images": np.ones((1, 784), np.float32)}, ["classes"])  # first-call imports
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(3):
        model.run("serving_default", {"images": np.ones((1, 784), np.float32)}, ["classes"])
    spent = time.thread_time() - cpu
    assert 0.060 <= spent <= 0.060 + 0.040, spent  # three calls of 20 ms of this thread's CPU time
    assert time.perf_counter() - wall >= spent


def test_spend_cpu_is_cpu_time_not_wall_time():
    started = time.thread_time()
    spend_cpu(0.005)
    assert time.thread_time() - started >= 0.005
