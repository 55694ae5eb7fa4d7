"""The one alone-or-batched choice: where each runner answers, and what reaches the caller when the model fails."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import COMPUTE_INFER, PhaseClock
from serving.server.handling.runner import Alone, Batched, Runner, runner_for
from serving.server.runtimes.model_spec import LoadedModel


class _Metrics:
    """What a runner records, kept."""

    def __init__(self) -> None:
        self.runtime: list[str] = []

    def record_runtime(self, model: str, api: str, runtime: str, seconds: float) -> None:
        self.runtime.append(model)

    def record_batch(self, stats, pool: str) -> None:
        pass


def _model(broken: bool = False) -> LoadedModel:
    """Version 1 doubles its input; version 2 fails (a batch queue is per version)."""
    def run(signature, inputs, outputs):
        if broken:
            raise FloatingPointError("no")
        return {"y": inputs["x"] * 2}

    version = 2 if broken else 1
    return LoadedModel("m", version, Path(f"m/{version}"), {}, {}, run)


X = {"x": np.ones((2, 1), np.float32)}


def _answers(runner, model: LoadedModel) -> list:
    """What `start` handed its callback, and the thread it ran on."""
    got: list = []
    done = threading.Event()

    def answer(outputs) -> None:
        got.append((outputs, threading.current_thread().name))
        done.set()

    runner.start(model, "s", X, 2, ["y"], PhaseClock(), answer)
    assert done.wait(5)
    return got


class _Elsewhere(Runner):
    """A runner built outside `handling/` (as serving.pool builds its runner to the device owner)."""

    def run(self, model, signature, inputs, rows, outputs, clock):
        return {"y": inputs["x"] * 3}

    def shutdown(self) -> None:
        pass


def test_the_choice_is_the_owner_given_else_batching_none_or_its_options():
    metrics = _Metrics()
    assert type(runner_for(None, metrics, "TF2", lambda name: {})) is Alone
    assert type(runner_for(BatchingOptions(), metrics, "TF2", lambda name: {})) is Batched
    owner = _Elsewhere()
    assert runner_for(BatchingOptions(), metrics, "TF2", lambda name: {}, owner) is owner
    assert runner_for(None, metrics, "TF2", lambda name: {}, owner) is owner
    [(outputs, thread)] = _answers(owner, _model())  # unbatched `start`: answered here, no hop
    assert outputs["y"].tolist() == [[3.0], [3.0]] and thread == threading.current_thread().name


def test_alone_answers_on_the_calling_thread_and_raises_the_models_error_there():
    metrics = _Metrics()
    runner = Alone(metrics, "TF2")
    clock = PhaseClock()
    assert runner.run(_model(), "s", X, 2, ["y"], clock)["y"].tolist() == [[2.0], [2.0]]
    assert clock.durations[COMPUTE_INFER] > 0 and metrics.runtime == ["m"]
    [(outputs, thread)] = _answers(runner, _model())
    assert outputs["y"].tolist() == [[2.0], [2.0]] and thread == threading.current_thread().name
    with pytest.raises(ServingError, match="FloatingPointError: no") as caught:
        runner.start(_model(broken=True), "s", X, 2, ["y"], PhaseClock(), lambda outputs: None)
    assert caught.value.code == "INTERNAL"


def test_batched_answers_on_the_batch_thread_with_the_outputs_or_the_models_error():
    options = BatchingOptions(max_batch_size=4, batch_timeout_micros=1000, num_batch_threads=1)
    runner = Batched(options, _Metrics(), "TF2", lambda name: {1: _model(), 2: _model(broken=True)})
    try:
        assert runner.run(_model(), "s", X, 2, ["y"], PhaseClock())["y"].tolist() == [[2.0], [2.0]]
        [(outputs, thread)] = _answers(runner, _model())
        assert outputs["y"].tolist() == [[2.0], [2.0]] and thread != threading.current_thread().name
        [(error, _)] = _answers(runner, _model(broken=True))
        assert isinstance(error, ServingError) and error.code == "INTERNAL"
        with pytest.raises(ServingError) as refused:  # refused before any batch: raised to the caller
            runner.start(_model(), "s", {"x": np.ones((5, 1), np.float32)}, 5, ["y"], PhaseClock(), print)
        assert refused.value.code == "INVALID_ARGUMENT"
    finally:
        runner.shutdown()
