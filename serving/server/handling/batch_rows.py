"""How a batch's rows are put together and taken apart: merge the tasks' rows, pad, split the outputs back.

TF Serving's BatchingSession rules (tensorflow_serving/batching/batching_session.cc): a batch is padded
up to the next `allowed_batch_sizes` entry with copies of the first row of its last task; with
`pad_variable_length_inputs`, inner dimensions that differ between tasks are padded to the largest
with the first element of each task's tensor.

Not for: scheduling batches (`serving.server.handling.batching`).
"""

from __future__ import annotations

import numpy as np

from serving.server.handling.errors import ServingError


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


__all__ = ["merge_inputs", "padded_size", "split_outputs"]
