"""How a validated request runs: alone on the calling thread, batched through its version's queue, or on the owner.

TF Serving wraps a model's session in a `batching_session` when batching is on, so nothing that calls the
session asks whether batching is on. `runner_for` makes that choice once per server process, here, and
`ServingCore` takes what it chose: `Alone` calls the model on the calling thread; `Batched` hands the request
to the batch queue of its model version, signature and outputs (TF Serving's TensorSignature); a frontend
with a device owner gets the runner `serving.pool` built for it (`serving.pool.link.OwnerRunner`: this
package never imports the pool), which sends each request to the owner. The one-process server, every
frontend and the device owner (`serving.pool.owner`) run their requests through one: `run` answers on the
calling thread; `start` hands the answer to a callback, on the batch thread when batched, so the owner's
connection thread never waits for a batch. The padded batch sizes the device floor measures follow the same
choice (`floor_batch_sizes`).

Not for: validation (`serving.server.handling.core`) or the scheduler itself (`serving.server.handling.batching`).
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

import numpy as np

from serving.server.handling.batching import BatchScheduler, Task
from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import PhaseClock, ServerMetrics
from serving.server.runtimes.model_spec import Computed, LoadedModel, ModelVersion

NO_BATCHING_SIZES = tuple(2 ** i for i in range(10))  # 1, 2, 4, ..., 512

Arrays = dict[str, np.ndarray]
Answer = Callable[[Arrays | BaseException], None]
Versions = Callable[[str], Mapping[int, LoadedModel]]  # a model's loaded versions (ModelSource.versions)
Model = TypeVar("Model", bound=ModelVersion)  # what a runner needs of a version: loaded here, or described only


class Runner(ABC, Generic[Model]):
    """Runs validated requests of the versions its process holds; alone, batched or on the owner by subclass."""

    @abstractmethod
    def run(self, model: Model, signature: str, inputs: Arrays, rows: int, outputs: list[str],
            clock: PhaseClock) -> Arrays:
        """Validated inputs -> outputs, answered on the calling thread; `clock` gets the model's phases."""

    def start(self, model: Model, signature: str, inputs: Arrays, rows: int, outputs: list[str],
              clock: PhaseClock, answer: Answer) -> None:
        """As `run`, but the outputs go to `answer`: here unless batched, on the batch thread when batched (with
        the batch's error instead, should its model call fail). What fails here (a request the queue refuses;
        unbatched, the model's error) raises here."""
        answer(self.run(model, signature, inputs, rows, outputs, clock))  # no hop: an error raises here

    @abstractmethod
    def shutdown(self) -> None:
        """Finish what is queued and stop any threads."""


def timed_call(model: LoadedModel, signature: str, inputs: Arrays, outputs: list[str]) -> Computed:
    """One call of the model with its time split into host -> device, inference and device -> host (`Computed`):
    the runtime's own `run_timed` where it has one, else the whole call counted as inference."""
    if model.run_timed is not None:
        return model.run_timed(signature, inputs, outputs)
    started = time.perf_counter()
    result = model.run(signature, inputs, outputs)
    return Computed(result, 0.0, time.perf_counter() - started, 0.0)


class Local(Runner[LoadedModel]):
    """Runs the model in this process: each model call timed and recorded as runtime latency."""

    def __init__(self, metrics: ServerMetrics, runtime: str) -> None:
        self.metrics = metrics
        self._runtime = runtime  # the runtime latency's label

    def call(self, model: LoadedModel, signature: str, inputs: Arrays, outputs: list[str]) -> Computed:
        """One model call on the calling thread, its time recorded as runtime latency."""
        started = time.perf_counter()
        try:
            return timed_call(model, signature, inputs, outputs)
        except ServingError:
            raise
        except Exception as exc:  # the runtime's own refusal of something validation let through
            raise ServingError("INTERNAL", f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.metrics.record_runtime(model.name, "Predict", self._runtime, time.perf_counter() - started)


class Alone(Local):
    """Batching off: every request its own model call, on the thread that asks."""

    def run(self, model: LoadedModel, signature: str, inputs: Arrays, rows: int, outputs: list[str],
            clock: PhaseClock) -> Arrays:
        computed = self.call(model, signature, inputs, outputs)
        clock.computed(computed)
        return computed.outputs

    def shutdown(self) -> None:
        """Nothing queued, no threads: every call ran on its caller's thread."""


class Batched(Local):
    """Batching on: one queue per model version, signature and output set, each with its batch threads."""

    def __init__(self, options: BatchingOptions, metrics: ServerMetrics, runtime: str, versions: Versions) -> None:
        super().__init__(metrics, runtime)
        self.options = options
        self._versions = versions
        self._schedulers: dict[tuple, BatchScheduler] = {}
        self._lock = threading.Lock()

    def run(self, model: LoadedModel, signature: str, inputs: Arrays, rows: int, outputs: list[str],
            clock: PhaseClock) -> Arrays:
        task = self._scheduler(model, signature, outputs).submit(inputs, rows)
        result = task.result()
        assert task.timing is not None  # set before every successful answer
        clock.batched(task.timing)
        return result

    def start(self, model: LoadedModel, signature: str, inputs: Arrays, rows: int, outputs: list[str],
              clock: PhaseClock, answer: Answer) -> None:
        self._scheduler(model, signature, outputs).submit(inputs, rows, lambda task: _deliver(task, clock, answer))

    def _scheduler(self, model: LoadedModel, signature: str, outputs: list[str]) -> BatchScheduler:
        key = (model.name, model.version, signature, tuple(outputs))
        scheduler = self._schedulers.get(key)
        if scheduler is not None:
            return scheduler
        with self._lock:
            if key not in self._schedulers:
                self._stop_unloaded()
                self._schedulers[key] = BatchScheduler(
                    self.options, lambda merged: self.call(model, signature, merged, outputs),
                    on_batch=lambda stats: self.metrics.record_batch(stats, self.options.thread_pool_name),
                    name=f"batch-{model.name}-{model.version}")
            return self._schedulers[key]

    def _stop_unloaded(self) -> None:
        for key in list(self._schedulers):
            if key[1] not in self._versions(key[0]):
                self._schedulers.pop(key).stop()

    def shutdown(self) -> None:
        """Finish every queued batch and stop the batch threads."""
        with self._lock:
            schedulers, self._schedulers = list(self._schedulers.values()), {}
        for scheduler in schedulers:
            scheduler.stop()


def _deliver(task: Task, clock: PhaseClock, answer: Answer) -> None:
    """On the batch thread: the task's outputs (its batch's phases on `clock`) or its error, to `answer`."""
    try:
        outputs = task.result(timeout=0)
    except Exception as exc:
        answer(exc)
        return
    assert task.timing is not None
    clock.batched(task.timing)
    answer(outputs)


def runner_for(batching: BatchingOptions | None, metrics: ServerMetrics, runtime: str, versions: Versions,
               owner: Runner[ModelVersion] | None = None) -> Runner:
    """The one place a server process chooses how its requests run: on the device owner (`owner`, the runner
    `serving.pool` built for a frontend with one), alone (batching None) or batched with these options."""
    if owner is not None:
        return owner
    if batching is None:
        return Alone(metrics, runtime)
    return Batched(batching, metrics, runtime, versions)


def floor_batch_sizes(batching: BatchingOptions | None) -> tuple[int, ...]:
    """Padded batch sizes the server can run: allowed_batch_sizes, else powers of two up to the largest model
    call (and that size itself); without batching 1, 2, 4, ..., 512."""
    if batching is None:
        return NO_BATCHING_SIZES
    if batching.allowed_batch_sizes:
        return tuple(batching.allowed_batch_sizes)
    limit = batching.execution_batch_size
    sizes = [2 ** i for i in range(limit.bit_length()) if 2 ** i <= limit]
    return tuple(sizes if sizes[-1] == limit else [*sizes, limit])


__all__ = ["NO_BATCHING_SIZES", "Alone", "Answer", "Arrays", "Batched", "Local", "Runner", "floor_batch_sizes",
           "runner_for", "timed_call"]
