"""The socket under the owner link: Unix SOCK_SEQPACKET, one message one datagram, kept in order.

Message boundaries come with the socket (no length prefix to read first), so sending or receiving a
message is one system call; a receiver reads into one buffer it keeps. Messages are small (the tensors
travel in shared memory), at most `MAX_MESSAGE_BYTES`.

Not for: what the messages say (`serving.pool.messages`).
"""

from __future__ import annotations

import socket

MAX_MESSAGE_BYTES = 256 * 1024


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


__all__ = ["MAX_MESSAGE_BYTES", "Receiver", "connect", "listen"]
