"""Shared memory between a frontend and the device owner: a slab of fixed slots per frontend, one-off segments,
and how numpy arrays lie in them.

Each frontend makes one segment of `slots` slots (`Slab`); a request's inputs are written into a free slot
and the owner writes the outputs back into the same slot, so a request crosses the boundary as two small
messages and no copy through a socket. A request or answer larger than a slot gets a one-off segment of its
own, unlinked by whoever reads it last. Every segment's name starts with the supervisor's prefix, so the
supervisor can remove whatever a process that died left behind (`sweep`).

Python's resource tracker is kept out: it would unlink a segment when any process that merely attached to
it exits. Creators unlink their own segments; the supervisor sweeps the rest.

Arrays are written one after another into a slot or segment, each at an offset aligned to 64 bytes; a
`TensorRef` per array says where it lies and how to read it back (numpy dtype string, shape, offset, size).
Numbers are copied as their raw bytes; strings (dtype object) as length-prefixed bytes. Reading can return
views into the buffer (no copy) or copies.

Not for: TensorProto encoding (`serving.protocol.tensors`) or the messages that point into the segments
(`serving.pool.messages`).
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from multiprocessing import resource_tracker, shared_memory
from pathlib import Path
from typing import NamedTuple

import numpy as np

SHM_DIR = Path("/dev/shm")
DEFAULT_SLOT_BYTES = 256 * 1024
DEFAULT_SLOTS = 64
ALIGN = 64
_LENGTH = struct.Struct("<I")

Encoded = list[tuple[str, tuple[int, ...], bytes | np.ndarray]]  # (alias, shape, contiguous data) per array


def segment_prefix(supervisor_pid: int) -> str:
    """The prefix of every segment one pooled server makes."""
    return f"mnsb{supervisor_pid}-"


def owner_prefix(prefix: str) -> str:
    """The prefix of the segments a device owner makes (the supervisor sweeps them when it dies)."""
    return f"{prefix}o"


def open_segment(name: str, size: int = 0) -> shared_memory.SharedMemory:
    """Attach to segment `name`, or create it when `size` > 0; never tracked by Python's resource tracker."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, create=size > 0, size=size, track=False)  # type: ignore[call-arg]
    segment = shared_memory.SharedMemory(name=name, create=size > 0, size=size)
    resource_tracker.unregister(segment._name, "shared_memory")  # type: ignore[attr-defined]
    return segment


def buffer_of(segment: shared_memory.SharedMemory) -> memoryview:
    """The segment's mapped bytes (typed: `buf` is None only once closed)."""
    buffer = segment.buf
    assert buffer is not None, f"shared-memory segment {segment.name} is closed"
    return buffer


def remove_segment(segment: shared_memory.SharedMemory) -> None:
    """Close and unlink a segment this process made (a segment already gone is fine)."""
    close_segment(segment)
    try:
        segment.unlink() if sys.version_info >= (3, 13) else _unlink_untracked(segment)
    except FileNotFoundError:
        pass


def close_segment(segment: shared_memory.SharedMemory) -> None:
    """Unmap a segment; while arrays still view it the mapping stays until they are gone (no error)."""
    try:
        segment.close()
    except BufferError:
        pass


def _unlink_untracked(segment: shared_memory.SharedMemory) -> None:
    from multiprocessing import shared_memory as sm

    sm._posixshmem.shm_unlink(segment._name)  # type: ignore[attr-defined]  # unlink() would unregister again


def segments(prefix: str) -> list[str]:
    """Names of the segments in /dev/shm that start with `prefix`."""
    try:
        return sorted(p.name for p in SHM_DIR.iterdir() if p.name.startswith(prefix))
    except OSError:
        return []


def sweep(prefix: str) -> list[str]:
    """Remove every segment whose name starts with `prefix`; returns their names."""
    removed = []
    for name in segments(prefix):
        try:
            (SHM_DIR / name).unlink()
            removed.append(name)
        except OSError:
            pass
    return removed


class Slab:
    """A frontend's segment of `slots` slots of `slot_bytes` each, handed out to requests in flight."""

    def __init__(self, prefix: str, frontend: int, slot_bytes: int = DEFAULT_SLOT_BYTES,
                 slots: int = DEFAULT_SLOTS) -> None:
        self.name = f"{prefix}f{frontend}-{os.getpid()}"
        self.slot_bytes = slot_bytes
        self.slots = slots
        self.segment = open_segment(self.name, slot_bytes * slots)
        buffer = buffer_of(self.segment)
        self._regions = [buffer[i * slot_bytes:(i + 1) * slot_bytes] for i in range(slots)]
        self._free = list(range(slots))
        self._lock = threading.Lock()

    def acquire(self) -> int | None:
        """A free slot, or None when all are in use."""
        with self._lock:
            return self._free.pop() if self._free else None

    def release(self, slot: int) -> None:
        with self._lock:
            self._free.append(slot)

    def region(self, slot: int) -> memoryview:
        return self._regions[slot]

    def close(self) -> None:
        for region in self._regions:
            try:
                region.release()
            except BufferError:  # an array still views it: the mapping goes when that does
                pass
        remove_segment(self.segment)


def slot_region(segment: shared_memory.SharedMemory, slot: int, slot_bytes: int) -> memoryview:
    """Slot `slot` of an attached slab (the owner's side of `Slab.region`)."""
    start = slot * slot_bytes
    return buffer_of(segment)[start:start + slot_bytes]


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


__all__ = ["ALIGN", "DEFAULT_SLOTS", "DEFAULT_SLOT_BYTES", "Encoded", "Slab", "TensorRef", "buffer_of", "close_segment",
           "encode_arrays", "encoded_bytes", "open_segment", "owner_prefix", "read_arrays", "remove_segment",
           "segment_prefix", "segments", "slot_region", "sweep", "write_arrays", "write_encoded"]
