"""numpy arrays <-> raw bytes in a buffer, for arrays that cross between the server's processes.

Arrays are written one after another into a buffer (a shared-memory slot or segment), each at an offset
aligned to 64 bytes; a `TensorRef` per array says where it lies and how to read it back (numpy dtype string,
shape, offset, size). Numbers are copied as their raw bytes; strings (dtype object) as length-prefixed bytes.
Reading can return views into the buffer (no copy) or copies.

Not for: TensorProto encoding (`serving.protocol.tensors`), the shared memory itself (`serving.pool.slab`) or
the messages that carry the refs (`serving.pool.messages`).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import numpy as np

ALIGN = 64
_LENGTH = struct.Struct("<I")

Encoded = list[tuple[str, tuple[int, ...], bytes | np.ndarray]]  # (alias, shape, contiguous data) per array


class TensorRef(NamedTuple):
    """One tensor in a shared-memory region: numpy dtype string ('<f4', or 'O' for length-prefixed bytes)."""

    alias: str
    dtype: str
    shape: tuple[int, ...]
    offset: int
    nbytes: int


def _aligned(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _object_bytes(array: np.ndarray) -> bytes:
    parts = []
    for item in array.reshape(-1):
        data = item if isinstance(item, bytes) else str(item).encode()
        parts += [_LENGTH.pack(len(data)), data]
    return b"".join(parts)


def _object_array(data: memoryview, shape: tuple[int, ...]) -> np.ndarray:
    items, at = [], 0
    while at < len(data):
        (size,) = _LENGTH.unpack_from(data, at)
        items.append(bytes(data[at + 4:at + 4 + size]))
        at += 4 + size
    out = np.empty(len(items), dtype=object)
    out[:] = items
    return out.reshape(shape)


def encode_arrays(arrays: dict[str, np.ndarray]) -> Encoded:
    """(alias, shape, contiguous data) per array: what `write_encoded` copies; strings as length-prefixed bytes."""
    return [(alias, a.shape, _object_bytes(a) if a.dtype == object else np.ascontiguousarray(a))
            for alias, a in arrays.items()]


def encoded_bytes(encoded: Encoded) -> int:
    """Bytes `write_encoded` takes for them (each aligned)."""
    return sum(_aligned(len(data) if isinstance(data, bytes) else data.nbytes) for _, _, data in encoded)


def write_encoded(buffer: memoryview, encoded: Encoded) -> tuple[TensorRef, ...]:
    """Copy encoded arrays into `buffer` one after another; ValueError when they do not fit."""
    refs, at = [], 0
    for alias, shape, data in encoded:
        if isinstance(data, bytes):
            size, dtype = len(data), "O"
        else:
            size, dtype = data.nbytes, data.dtype.str
        if at + size > len(buffer):
            raise ValueError(f"{at + size} bytes do not fit in {len(buffer)}")
        buffer[at:at + size] = data if isinstance(data, bytes) else memoryview(data.reshape(-1)).cast("B")  # type: ignore[arg-type]
        refs.append(TensorRef(alias, dtype, shape, at, size))
        at += _aligned(size)
    return tuple(refs)


def write_arrays(buffer: memoryview, arrays: dict[str, np.ndarray]) -> tuple[TensorRef, ...]:
    """Copy arrays into `buffer` one after another; ValueError when they do not fit."""
    return write_encoded(buffer, encode_arrays(arrays))


def read_arrays(buffer: memoryview, refs: tuple[TensorRef, ...], copy: bool) -> dict[str, np.ndarray]:
    """Arrays from `buffer`: views into it (`copy` False: valid while the region is held) or copies."""
    out = {}
    for alias, dtype_text, shape, offset, nbytes in refs:  # TensorRefs, or plain tuples of their fields
        if dtype_text == "O":
            out[alias] = _object_array(buffer[offset:offset + nbytes], tuple(shape))
            continue
        dtype = np.dtype(dtype_text)
        view = np.frombuffer(buffer, dtype, nbytes // dtype.itemsize if dtype.itemsize else 0, offset).reshape(shape)
        out[alias] = view.copy() if copy else view
    return out


__all__ = ["ALIGN", "Encoded", "TensorRef", "encode_arrays", "encoded_bytes", "read_arrays",
           "write_arrays", "write_encoded"]
