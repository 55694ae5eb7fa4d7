"""TF Serving's batching parameters for the embedded server: their defaults, read from a `BatchingParameters`
message, and checked as TF Serving checks them at start.

Read once at start-up (`serving.server.flags`); the scheduler (`serving.server.handling.batching`) and the
device floor's padded sizes (`serving.server.handling.runner.floor_batch_sizes`) read the fields of the one
`BatchingOptions` they were given.

Not for: scheduling batches or putting their rows together (`serving.server.handling.batching`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass


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


__all__ = ["BatchingOptions", "check_options", "options_from_proto"]
