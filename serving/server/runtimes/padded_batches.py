"""Padded batch sizes shared by the runtimes that compile (XLA) or capture (CUDA graphs) one program per shape.

A batch of `rows` runs padded up to its padded size, the next power of two up to `MAX_PADDED_SIZE`; larger
batches run as `MAX_PADDED_SIZE`-row chunks, and the padding is sliced off the outputs. Every padded size is
prepared at load time, so no request pays for a compilation or a capture.

Not for: TF Serving's own padding (`allowed_batch_sizes`, `serving.server.handling.batching`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_PADDED_SIZE = 512
PADDED_SIZES = tuple(2 ** i for i in range(MAX_PADDED_SIZE.bit_length()))  # 1, 2, 4, ..., 512


@dataclass(frozen=True)
class Chunk:
    """Rows [start, stop) of a batch, run padded to `padded_size` rows."""

    start: int
    stop: int
    padded_size: int


def padded_size_for(rows: int) -> int:
    """The smallest padded size holding `rows` (1 <= rows <= MAX_PADDED_SIZE): the next power of two."""
    return 1 << (max(rows, 1) - 1).bit_length()


def chunks(rows: int) -> list[Chunk]:
    """How a batch of `rows` runs: MAX_PADDED_SIZE-row chunks, the rest padded to its size."""
    return [Chunk(start, min(start + MAX_PADDED_SIZE, rows), padded_size_for(min(MAX_PADDED_SIZE, rows - start)))
            for start in range(0, rows, MAX_PADDED_SIZE)]


def pad_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """`array` with zero rows appended up to `rows` (one allocation, one copy; none when it fits)."""
    if len(array) == rows:
        return array
    padded = np.zeros((rows,) + array.shape[1:], array.dtype)
    padded[:len(array)] = array
    return padded


__all__ = ["PADDED_SIZES", "MAX_PADDED_SIZE", "Chunk", "padded_size_for", "chunks", "pad_rows"]
