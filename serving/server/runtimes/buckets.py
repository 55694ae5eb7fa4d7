"""Padded batch sizes shared by the runtimes that compile (XLA) or capture (CUDA graphs) one program per shape.

A batch of `rows` runs padded up to its bucket, the next power of two up to `MAX_BUCKET`; larger batches
run as `MAX_BUCKET`-row chunks, and the padding is sliced off the outputs. Every bucket is prepared at
load time, so no request pays for a compilation or a capture.

Not for: TF Serving's own padding (`allowed_batch_sizes`, `serving.server.handling.batch_rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_BUCKET = 512
BUCKETS = tuple(2 ** i for i in range(MAX_BUCKET.bit_length()))  # 1, 2, 4, ..., 512


@dataclass(frozen=True)
class Chunk:
    """Rows [start, stop) of a batch, run padded to `bucket` rows."""

    start: int
    stop: int
    bucket: int


def bucket_for(rows: int) -> int:
    """The smallest bucket holding `rows` (1 <= rows <= MAX_BUCKET): the next power of two."""
    return 1 << (max(rows, 1) - 1).bit_length()


def chunks(rows: int) -> list[Chunk]:
    """How a batch of `rows` runs: MAX_BUCKET-row chunks, the rest padded to its bucket."""
    return [Chunk(start, min(start + MAX_BUCKET, rows), bucket_for(min(MAX_BUCKET, rows - start)))
            for start in range(0, rows, MAX_BUCKET)]


def pad_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """`array` with zero rows appended up to `rows` (one allocation, one copy; none when it fits)."""
    if len(array) == rows:
        return array
    padded = np.zeros((rows,) + array.shape[1:], array.dtype)
    padded[:len(array)] = array
    return padded


__all__ = ["BUCKETS", "MAX_BUCKET", "Chunk", "bucket_for", "chunks", "pad_rows"]
