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
  the largest (with the first element of each task's tensor, as TF Serving does): `merge_inputs`,
  `split_outputs` below.

Request threads enqueue under one lock and wait on their task; batch threads run the model and
answer each task. Not for: protocol handling or validation (see `serving.server.handling.core`) or the
options themselves, their defaults and checks (`serving.server.handling.batching_options`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np

from serving.server.handling.batching_options import BatchingOptions
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import BatchStats, BatchTiming
from serving.server.runtimes.model_spec import Computed

_PARTS_LOCK = threading.Lock()
QUEUE_FULL_MESSAGE = "The batch scheduling queue to which this task was submitted is full"


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


# A batch's rows put together and taken apart, as TF Serving's BatchingSession does (batching_session.cc).
def padded_size(size: int, allowed: tuple[int, ...]) -> int:
    """Smallest allowed batch size holding `size` rows (`size` itself when none is configured)."""
    for candidate in allowed:
        if candidate >= size:
            return candidate
    return size


def merge_inputs(batch_slices: list[tuple[dict[str, np.ndarray], int, int]], padding: int,
                 pad_variable_length: bool) -> dict[str, np.ndarray]:
    """Concatenate the tasks' rows per input and append `padding` copies of the last task's first row."""
    merged = {}
    for name in batch_slices[0][0]:
        parts = [inputs[name][start:start + count] for inputs, start, count in batch_slices]
        if pad_variable_length:
            parts = _pad_inner_dims(parts)
        elif any(p.shape[1:] != parts[0].shape[1:] for p in parts):
            raise ServingError(
                "FAILED_PRECONDITION",
                f"Tensors with name '{name}' from different tasks have different shapes and padding is turned off. "
                "Set pad_variable_length_inputs to true, or ensure that all tensors with the same name have equal "
                "dimensions starting with the first dim.")
        if padding:
            parts.append(np.repeat(parts[-1][:1], padding, axis=0))
        merged[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return merged


def _pad_inner_dims(parts: list[np.ndarray]) -> list[np.ndarray]:
    """Pad every part's inner dims up to the largest, with that part's first element (TF Serving's rule)."""
    target = tuple(max(dims) for dims in zip(*(p.shape[1:] for p in parts)))
    out = []
    for p in parts:
        if p.shape[1:] == target:
            out.append(p)
            continue
        widths = [(0, 0)] + [(0, t - s) for s, t in zip(p.shape[1:], target)]
        fill = p.flat[0] if p.size else 0
        out.append(np.pad(p, widths, mode="constant", constant_values=fill))
    return out


def split_outputs(outputs: dict[str, np.ndarray], sizes: list[int]) -> list[dict[str, np.ndarray]]:
    """Cut batched outputs back into per-slice rows (padding rows at the end are dropped)."""
    answers, offset = [], 0
    for count in sizes:
        answers.append({k: v[offset:offset + count] for k, v in outputs.items()})
        offset += count
    return answers


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


__all__ = ["QUEUE_FULL_MESSAGE", "Batch", "BatchScheduler", "Task", "merge_inputs", "padded_size", "split_outputs"]
