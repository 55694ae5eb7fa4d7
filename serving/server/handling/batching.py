"""TF Serving's batch scheduler semantics, for the embedded server.

Mirrors `BasicBatchScheduler` / `SharedBatchScheduler` as TF Serving's `BatchingSession` uses
them (tensorflow/core/kernels/batching_util/shared_batch_scheduler.h,
tensorflow_serving/batching/batching_session.cc):

- tasks (requests) join the open batch at the tail of a queue; a batch closes when the next
  task does not fit (or it is exactly full), and is processed when a batch thread is free and
  it is either closed or `batch_timeout_micros` have passed since it opened;
- at most `num_batch_threads` batches run at once; the queue holds at most
  `max_enqueued_batches` batches (open one included); a task that does not fit then is refused
  with UNAVAILABLE "The batch scheduling queue to which this task was submitted is full...";
- a task larger than `max_batch_size` is INVALID_ARGUMENT, unless
  `enable_large_batch_splitting`, where tasks up to `max_batch_size` are split across batches of
  at most `max_execution_batch_size` and reassembled;
- a batch is padded up to the next `allowed_batch_sizes` entry with copies of the first row of
  its last task, and the padding rows are dropped from the outputs;
- with `pad_variable_length_inputs`, inner dimensions that differ between tasks are padded to
  the largest (with the first element of each task's tensor, as TF Serving does); both in
  `serving.server.handling.batch_rows`.

Request threads enqueue under one lock and wait on their task; batch threads run the model and
answer each task. Not for: protocol handling or validation (see `serving.server.handling.core`).
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from serving.server.handling.batch_rows import merge_inputs, padded_size, split_outputs
from serving.server.handling.errors import ServingError
from serving.server.handling.phases import BatchTiming
from serving.server.runtimes.model_spec import Computed

_PARTS_LOCK = threading.Lock()
QUEUE_FULL_MESSAGE = "The batch scheduling queue to which this task was submitted is full"


@dataclass(frozen=True)
class BatchingOptions:
    """BatchingParameters with TF Serving's defaults filled in (BasicBatchScheduler::Options)."""

    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    num_batch_threads: int = os.cpu_count() or 1
    max_enqueued_batches: int = 10
    allowed_batch_sizes: tuple[int, ...] = ()
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: int = 0  # 0: same as max_batch_size
    pad_variable_length_inputs: bool = False
    thread_pool_name: str = "batch_threads"

    @property
    def execution_batch_size(self) -> int:
        """The most rows one model call gets."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size:
            return self.max_execution_batch_size
        return self.max_batch_size

    def as_dict(self) -> dict:
        """TF Serving field names and values, for metadata, state and results."""
        return {
            "max_batch_size": self.max_batch_size,
            "batch_timeout_micros": self.batch_timeout_micros,
            "num_batch_threads": self.num_batch_threads,
            "max_enqueued_batches": self.max_enqueued_batches,
            "allowed_batch_sizes": list(self.allowed_batch_sizes),
            "enable_large_batch_splitting": self.enable_large_batch_splitting,
            "max_execution_batch_size": self.execution_batch_size,
            "pad_variable_length_inputs": self.pad_variable_length_inputs,
        }


def options_from_proto(params) -> BatchingOptions:
    """Build options from a `BatchingParameters` message, checking them as TF Serving does."""
    defaults = BatchingOptions()

    def wrapped(name: str, default):
        return getattr(params, name).value if params.HasField(name) else default

    options = BatchingOptions(
        max_batch_size=wrapped("max_batch_size", defaults.max_batch_size),
        batch_timeout_micros=wrapped("batch_timeout_micros", defaults.batch_timeout_micros),
        num_batch_threads=wrapped("num_batch_threads", defaults.num_batch_threads),
        max_enqueued_batches=wrapped("max_enqueued_batches", defaults.max_enqueued_batches),
        allowed_batch_sizes=tuple(params.allowed_batch_sizes),
        enable_large_batch_splitting=wrapped("enable_large_batch_splitting", False),
        max_execution_batch_size=wrapped("max_execution_batch_size", 0),
        pad_variable_length_inputs=params.pad_variable_length_inputs,
        thread_pool_name=wrapped("thread_pool_name", defaults.thread_pool_name),
    )
    check_options(options)
    return options


def check_options(o: BatchingOptions) -> None:
    """Raise ValueError with TF Serving's wording for parameters it would refuse at start."""
    if o.max_batch_size <= 0:
        raise ValueError(f"max_batch_size must be positive; was {o.max_batch_size}")
    if o.num_batch_threads <= 0:
        raise ValueError(f"num_batch_threads must be positive; was {o.num_batch_threads}")
    if o.batch_timeout_micros < 0:
        raise ValueError(f"batch_timeout_micros must be non-negative; was {o.batch_timeout_micros}")
    if o.max_enqueued_batches <= 0:
        raise ValueError(f"max_enqueued_batches must be positive; was {o.max_enqueued_batches}")
    if o.enable_large_batch_splitting and o.max_batch_size < o.execution_batch_size:
        raise ValueError("When enable_large_batch_splitting is true, input_batch_size_limit must be greater "
                         "than or equal to max_execution_batch_size.")
    sizes = o.allowed_batch_sizes
    if not sizes:
        return
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise ValueError("allowed_batch_sizes entries must be monotonically increasing")
    if o.enable_large_batch_splitting:
        if sizes[-1] != o.execution_batch_size:
            raise ValueError("Last entry in allowed_batch_sizes must be equal to max_execution_batch_size; last "
                             f"entry was {sizes[-1]}; expected {o.execution_batch_size}")
    elif sizes[-1] != o.max_batch_size:
        raise ValueError("Last entry in allowed_batch_sizes must match max_batch_size; last entry was "
                         f"{sizes[-1]}; expected {o.max_batch_size}")


class Task:
    """One request: its inputs, row count, and where its outputs go.

    The requesting thread waits in `result()` on a lock that the batch thread releases once the
    answer is in: the cheapest cross-thread wake-up CPython has (a `concurrent.futures.Future`
    costs a Condition and a notify_all per request).
    """

    __slots__ = ("inputs", "size", "enqueued_s", "parts", "pending", "timing", "on_answer", "_answer", "_ready")

    def __init__(self, inputs: dict[str, np.ndarray], size: int,
                 on_answer: Callable[[Task], None] | None = None) -> None:
        self.inputs = inputs
        self.size = size
        self.enqueued_s = time.perf_counter()
        self.parts: list | None = None  # per-part outputs when the task was split
        self.pending = 0
        self.timing: BatchTiming | None = None  # the stamps of the batch that answered it
        self.on_answer = on_answer  # called once answered, on the answering thread (no waiter needed)
        self._answer: dict[str, np.ndarray] | BaseException | None = None
        self._ready = threading.Lock()
        self._ready.acquire()

    def answer(self, value: dict[str, np.ndarray] | BaseException) -> None:
        """Set the outputs (a dict) or the error (an exception), once; wakes the waiting thread."""
        if self._answer is None:
            self._answer = value
            self._ready.release()
            if self.on_answer is not None:
                self.on_answer(self)

    def result(self, timeout: float | None = None) -> dict[str, np.ndarray]:
        """Block until answered; returns the outputs or raises the batch's error."""
        if not self._ready.acquire(timeout=-1 if timeout is None else timeout):
            raise TimeoutError("batched task not answered in time")
        self._ready.release()  # let later result() calls return at once
        answer = self._answer
        if isinstance(answer, BaseException):
            raise answer
        assert answer is not None  # the semaphore is released only after an answer is set
        return answer


class Batch:
    """Rows from one or more tasks, processed in one model call."""

    __slots__ = ("slices", "size", "opened_s", "closed")

    def __init__(self) -> None:
        self.slices: list[tuple[Task, int, int, int]] = []  # (task, part index, start row, row count)
        self.size = 0
        self.opened_s = time.monotonic()
        self.closed = False


@dataclass(frozen=True)
class BatchStats:
    """What one processed batch looked like, for the batching metrics."""

    input_sizes: tuple[int, ...]  # rows of each task slice
    processed_size: int  # rows after padding
    padding: int
    queueing_delays_s: tuple[float, ...]  # per slice: enqueue -> processing start


class BatchScheduler:
    """One batching queue (TF Serving keeps one per signature and output set) and its batch threads.

    Request threads call `submit()` and wait on the returned task's `result()`; `num_batch_threads` threads
    take due batches off the queue, run them, and answer every task in them. `process` returns the
    outputs, or a `Computed` whose compute phases the tasks' `timing` then carries.
    """

    def __init__(self, options: BatchingOptions,
                 process: Callable[[dict[str, np.ndarray]], Computed | dict[str, np.ndarray]],
                 on_batch: Callable[[BatchStats], None] = lambda stats: None, name: str = "batch") -> None:
        self.options = options
        self._process = process
        self._on_batch = on_batch
        self._batches: deque[Batch] = deque()
        self._limit = options.execution_batch_size
        self._timeout_s = options.batch_timeout_micros / 1e6
        self._cv = threading.Condition(threading.Lock())
        self._stopping = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(options.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    def submit(self, inputs: dict[str, np.ndarray], size: int,
               on_answer: Callable[[Task], None] | None = None) -> Task:
        """Enqueue a task of `size` rows; its `result()` is {alias: this task's rows of each output}, and
        `on_answer(task)` (optional) runs on the batch thread that answers it."""
        task = Task(inputs, size, on_answer)
        with self._cv:
            if self._stopping:
                raise ServingError("UNAVAILABLE", "the server is shutting down")
            self._check_capacity(size)
            wake = self._enqueue(task)
            if wake:
                self._cv.notify()
        return task

    def _enqueue(self, task: Task) -> bool:
        """Place the task; True when a batch thread should look again (new or newly closed batch)."""
        if task.size > self._limit:
            self._split(task)
            return True
        if self._fits_tail(task.size):
            tail = self._batches[-1]
        else:
            tail = self._new_batch()
        self._add(tail, task, 0, 0, task.size)
        return tail.closed or len(tail.slices) == 1

    def _queue_shape(self) -> tuple[int, int]:
        """(batches counted against max_enqueued_batches, rows in the open tail), TF's view of the deque."""
        if not self._batches:
            return 1, 0
        tail = self._batches[-1]
        return len(self._batches), (self._limit if tail.closed else tail.size)

    def _check_capacity(self, size: int) -> None:
        o = self.options
        if size > o.max_batch_size:
            raise ServingError("INVALID_ARGUMENT",
                               f"Task size {size} is larger than maximum input batch size {o.max_batch_size}")
        enqueued, tail_size = self._queue_shape()
        if o.enable_large_batch_splitting:
            capacity = (o.max_enqueued_batches - enqueued) * self._limit + (self._limit - tail_size)
            if size > capacity:
                raise ServingError(
                    "UNAVAILABLE",
                    f"{QUEUE_FULL_MESSAGE}; task size is {size} but scheduling capacity is only {capacity} "
                    f"(num_enqueued_batches={enqueued}, max_enqueued_batches={o.max_enqueued_batches}, "
                    f"open_batch_size={tail_size}, max_execution_batch_size={self._limit})")
        elif tail_size + size > o.max_batch_size and enqueued >= o.max_enqueued_batches:
            raise ServingError(
                "UNAVAILABLE",
                f"{QUEUE_FULL_MESSAGE}; currently {enqueued} batches enqueued and max_enqueued_batches is "
                f"{o.max_enqueued_batches}")

    def _fits_tail(self, size: int) -> bool:
        return bool(self._batches) and not self._batches[-1].closed and self._batches[-1].size + size <= self._limit

    def _new_batch(self) -> Batch:
        if self._batches:
            self._batches[-1].closed = True
        batch = Batch()
        self._batches.append(batch)
        return batch

    def _add(self, batch: Batch, task: Task, part: int, start: int, count: int) -> None:
        batch.slices.append((task, part, start, count))
        batch.size += count
        if batch.size >= self._limit:
            batch.closed = True

    def _split(self, task: Task) -> None:
        """Spread a large task over the open batch's free rows, then new batches (TF's eager split)."""
        start, part = 0, 0
        task.parts = []
        if self._batches and not self._batches[-1].closed:
            free = self._limit - self._batches[-1].size
            self._add(self._batches[-1], task, 0, 0, free)
            task.parts.append(None)
            start, part = free, 1
        while start < task.size:
            count = min(self._limit, task.size - start)
            self._add(self._new_batch(), task, part, start, count)
            task.parts.append(None)
            start, part = start + count, part + 1
        task.pending = len(task.parts)

    def _next_batch(self) -> Batch | None:
        """Block until a batch is due (closed, or open past its timeout); None once stopped and drained."""
        with self._cv:
            while True:
                if self._batches:
                    front = self._batches[0]
                    wait_s = front.opened_s + self._timeout_s - time.monotonic()
                    if front.closed or wait_s <= 0 or self._stopping:
                        front.closed = True
                        return self._batches.popleft()
                    self._cv.wait(wait_s)
                elif self._stopping:
                    return None
                else:
                    self._cv.wait()

    def _work(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._run_batch(batch)

    def _run_batch(self, batch: Batch) -> None:
        """Merge, pad, run the model once, split the outputs back, answer every task."""
        started = time.perf_counter()
        padded = padded_size(batch.size, self.options.allowed_batch_sizes)
        counts = [c for _, _, _, c in batch.slices]
        timing = None
        try:
            merged = merge_inputs([(t.inputs, s, c) for t, _, s, c in batch.slices], padded - batch.size,
                                  self.options.pad_variable_length_inputs)
            assembled = time.perf_counter()
            result = self._process(merged)
            computed = time.perf_counter()
            if isinstance(result, Computed):
                timing = BatchTiming(started, assembled, result.input_s, result.infer_s, computed)
                result = result.outputs
            else:  # a bare function of the inputs: all its time is inference
                timing = BatchTiming(started, assembled, 0.0, computed - assembled, computed)
            answers: list = split_outputs(result, counts)
        except Exception as exc:  # answered to every task of the batch, never raised into the thread
            answers = [exc] * len(counts)
        for (task, part, _, _), answer in zip(batch.slices, answers):
            task.timing = timing
            _deliver(task, part, answer)
        self._on_batch(BatchStats(tuple(counts), padded, padded - batch.size,
                                  tuple(started - t.enqueued_s for t, _, _, _ in batch.slices)))

    def stop(self) -> None:
        """Refuse new tasks, process every queued one, and join the batch threads."""
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        for thread in self._threads:
            thread.join()


def _deliver(task: Task, part: int, answer: dict[str, np.ndarray] | BaseException) -> None:
    if task.parts is None:
        task.answer(answer)
        return
    with _PARTS_LOCK:  # parts of one split task may finish on different batch threads
        if isinstance(answer, BaseException):
            task.answer(answer)
            return
        task.parts[part] = answer
        task.pending -= 1
        if task.pending == 0:
            task.answer({k: np.concatenate([p[k] for p in task.parts]) for k in task.parts[0]})


__all__ = ["QUEUE_FULL_MESSAGE", "Batch", "BatchScheduler", "BatchStats", "BatchingOptions", "Task",
           "check_options", "options_from_proto", "padded_size"]
