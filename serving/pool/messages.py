"""What crosses the frontend <-> owner boundary and how it travels: small typed messages, never pickles, one
datagram each on a Unix SOCK_SEQPACKET socket.

A `Request` names the model version, signature and outputs, and where each input tensor lies in shared
memory (`TensorRef` from `serving.pool.slab`: offset, size, dtype, shape); a `Response` says how it
went (TF Serving's status code name and message), where each output lies, and the owner's own phase
durations, so the frontend can split the round trip into the owner's phases and the hand-off. `Hello`
opens a frontend's connection: its slab.

On the wire a message is its fields as a plain tuple (str, int, float, tuples of them) in `marshal`'s
format, which packs and unpacks in C (about 1 us a message where `struct` field by field took about 10 us
in Python) and, unlike pickle, builds no object of any class: each side rebuilds the typed record itself.
The records are NamedTuples rather than frozen dataclasses for the same reason: they are built on every
request, and a frozen dataclass's constructor costs a few microseconds more. Decoded, a message's tensor refs
stay plain tuples of `TensorRef`'s fields (readers unpack them by position): a NamedTuple per tensor
cost more than all the rest of decoding.

The socket keeps message boundaries (no length prefix to read first) and order, so sending or receiving a
message is one system call; a receiver reads into one buffer it keeps (`Receiver`). Messages are small (the
tensors travel in shared memory), at most `MAX_MESSAGE_BYTES`.

Not for: the shared memory and how arrays lie in it (`serving.pool.slab`).
"""

from __future__ import annotations

import marshal
import socket
from typing import NamedTuple

from serving.pool.slab import TensorRef

MAX_MESSAGE_BYTES = 256 * 1024


def _plain(refs: tuple[TensorRef, ...]) -> tuple:
    return tuple(map(tuple, refs))


class Hello(NamedTuple):
    """A frontend's first message on its connection: who it is and its slab's segment."""

    frontend: int
    segment: str
    slot_bytes: int
    slots: int

    def to_bytes(self) -> bytes:
        return marshal.dumps(tuple(self))

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Hello:
        return cls._make(marshal.loads(data))


class Request(NamedTuple):
    """One validated request for the owner. `segment` "" means the frontend's slab (at `slot`); else a
    one-off segment the frontend made for a request larger than a slot."""

    request_id: int
    slot: int
    segment: str
    model: str
    version: int
    signature: str
    rows: int
    outputs: tuple[str, ...]
    inputs: tuple[TensorRef, ...]

    def to_bytes(self) -> bytes:
        return marshal.dumps((*self[:-1], _plain(self.inputs)))

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Request:
        return cls._make(marshal.loads(data))  # inputs: plain (alias, dtype, shape, offset, nbytes) tuples


class Response(NamedTuple):
    """The owner's answer. `status` "OK" or TF Serving's code name; `segment` where the outputs lie ("" the
    request's own region; else a segment the owner made, which the frontend unlinks once read); `phases_s` the
    owner's phase durations in REQUEST_PHASES order."""

    request_id: int
    status: str
    message: str
    segment: str
    outputs: tuple[TensorRef, ...]
    phases_s: tuple[float, ...]

    def to_bytes(self) -> bytes:
        return marshal.dumps((*self[:4], _plain(self.outputs), self.phases_s))

    @classmethod
    def from_bytes(cls, data: bytes | memoryview) -> Response:
        return cls._make(marshal.loads(data))  # outputs: plain (alias, dtype, shape, offset, nbytes) tuples


def listen(address: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    server.bind(address)
    server.listen(128)
    return server


def connect(address: str) -> socket.socket:
    """A connection to `address`; OSError when nobody listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(address)
    except OSError:
        sock.close()
        raise
    return sock


class Receiver:
    """Reads one message at a time from `sock` into a buffer of its own."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray(MAX_MESSAGE_BYTES)
        self._view = memoryview(self._buffer)

    def recv(self) -> memoryview | None:
        """The next message (valid until the next call), or None once the peer closed the connection."""
        size = self.sock.recv_into(self._buffer)
        return self._view[:size] if size else None


__all__ = ["MAX_MESSAGE_BYTES", "Hello", "Receiver", "Request", "Response", "connect", "listen"]
