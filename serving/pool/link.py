"""The frontend's side of the owner connection: send a request, wait for its answer, fail fast when the owner is gone.

`OwnerRunner` is a frontend's runner when the device owner runs the model (`serving.server.handling.runner`
chooses it for such a frontend): each validated request goes over its `OwnerLink`. `OwnerLink` keeps one
Unix-socket connection to the device owner (reconnecting while the supervisor restarts it). A request thread
writes its inputs into a slab slot (or a one-off segment when they do not fit), sends a `Request`, and waits
on a lock released when its `Response` arrives. When the connection ends (the owner died), every request in
flight fails at once with UNAVAILABLE, as do new ones until the owner is back: nothing waits on a process that
is gone.

Not for: the owner's side (`serving.pool.owner`) or the message layout (`serving.pool.messages`).
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import threading
import time

import numpy as np

from serving.pool.messages import Hello, Receiver, Request, Response, connect
from serving.pool.slab import (
    Slab,
    buffer_of,
    encode_arrays,
    encoded_bytes,
    open_segment,
    read_arrays,
    remove_segment,
    write_encoded,
)
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import PhaseClock
from serving.server.handling.runner import Arrays, Runner
from serving.server.runtimes.model_spec import ModelVersion

log = logging.getLogger("serving.pool")

RECONNECT_S = 0.02
GONE = "the device owner process is not answering (it exited; the supervisor restarts it)"


_LEAD = object()  # a waiter woken with this is to read the connection for everyone (the reader left)


class _Waiter:
    """One request in flight: its answer (a Response, an error, or `_LEAD`) and the lock its thread waits on.

    `set` and the re-arming in `wait` run under the link's lock, so an answer arriving after a `_LEAD` (or
    a second `_LEAD`) never releases the lock twice."""

    __slots__ = ("answer", "_ready")

    def __init__(self) -> None:
        self.answer: object = None
        self._ready = threading.Lock()
        self._ready.acquire()

    def set(self, answer: object) -> None:
        """Under the link's lock. A real answer replaces a `_LEAD`; a `_LEAD` never replaces anything."""
        was = self.answer
        if answer is _LEAD and was is not None:
            return
        self.answer = answer
        if was is None:
            self._ready.release()

    def wait(self, lock: threading.Lock) -> object:
        """The answer, or `_LEAD` (then this waiter is armed again)."""
        self._ready.acquire()
        with lock:
            answer = self.answer
            if answer is _LEAD:
                self.answer = None
            else:
                self._ready.release()  # a later wait() returns at once
        return answer


class OwnerLink:
    """One frontend's connection to the owner, shared by all its request threads.

    No reader thread: the request threads take turns reading the connection (leader/followers). The one
    holding the read lock reads answers and hands each to its waiting thread until its own arrives, then
    wakes a waiting thread to read next; one request at a time so costs no thread hop on the way back. The
    connection is made when first needed, and again after the owner was restarted."""

    def __init__(self, address: str, slab: Slab, frontend: int) -> None:
        self.address = address
        self.slab = slab
        self.frontend = frontend
        self._conn: socket.socket | None = None
        self._receiver: Receiver | None = None
        self._pending: dict[int, _Waiter] = {}
        self._lock = threading.Lock()  # the connection and the pending map change together
        self._read_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False

    def connect(self, timeout_s: float) -> bool:
        """Connect now (retrying up to `timeout_s`); True when connected."""
        deadline = time.monotonic() + timeout_s
        while self._connection() is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(RECONNECT_S)
        return True

    def _connection(self) -> socket.socket | None:
        """The open connection, or a new one; None when the owner does not answer (it is being restarted)."""
        with self._lock:
            if self._conn is not None or self._closed:
                return self._conn
            try:
                conn = connect(self.address)
                conn.send(Hello(self.frontend, self.slab.name, self.slab.slot_bytes, self.slab.slots).to_bytes())
            except OSError:
                return None
            self._conn, self._receiver = conn, Receiver(conn)
        log.info("frontend %d (pid %d): connected to the device owner", self.frontend, os.getpid())
        return conn

    def call(self, model: str, version: int, signature: str, rows: int, outputs: list[str],
             inputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], tuple[float, ...]]:
        """Run one validated request on the owner: its outputs and the owner's phase durations."""
        request_id = next(self._ids)
        encoded = encode_arrays(inputs)
        slot, oneoff = self._place(request_id, encoded_bytes(encoded))
        try:
            region = self.slab.region(slot) if oneoff is None else buffer_of(oneoff)
            refs = write_encoded(region, encoded)
            request = Request(request_id, slot, "" if oneoff is None else oneoff.name, model, version, signature,
                              rows, tuple(outputs), refs)
            response = self._round_trip(request)
            if response.status != "OK":
                raise ServingError(response.status, response.message)
            return self._outputs(region, response), response.phases_s
        finally:
            if oneoff is None:
                self.slab.release(slot)
            else:
                remove_segment(oneoff)

    def _place(self, request_id: int, size: int):
        """A free slot when the inputs fit one, else a one-off segment of their size (slot -1)."""
        if size <= self.slab.slot_bytes:
            slot = self.slab.acquire()
            if slot is not None:
                return slot, None
        name = f"{self.slab.name}-x{request_id}"
        return -1, open_segment(name, max(size, self.slab.slot_bytes))

    def _round_trip(self, request: Request) -> Response:
        conn = self._connection()
        if conn is None:
            raise ServingError("UNAVAILABLE", GONE)
        waiter = _Waiter()
        with self._lock:
            self._pending[request.request_id] = waiter
        try:
            conn.send(request.to_bytes())  # one datagram: no lock needed between senders
        except OSError:
            self._lost(conn)
        while True:
            if self._read_lock.acquire(blocking=False):
                self._read_until_answered(conn, waiter)
            answer = waiter.wait(self._lock)
            if answer is _LEAD:
                continue
            if isinstance(answer, BaseException):
                raise answer
            assert isinstance(answer, Response)
            return answer

    def _read_until_answered(self, conn: socket.socket, waiter: _Waiter) -> None:
        """As the reader: hand out answers until `waiter`'s own is in, then pass the read lock on."""
        receiver = self._receiver
        try:
            while waiter.answer is None:
                try:
                    data = receiver.recv() if receiver is not None and self._conn is conn else None
                except OSError:
                    data = None
                if data is None:
                    self._lost(conn)
                    return
                response = Response.from_bytes(data)
                with self._lock:
                    other = self._pending.pop(response.request_id, None)
                    if other is not None:
                        other.set(response)
        finally:
            self._read_lock.release()
            self._wake_next_reader()

    def _wake_next_reader(self) -> None:
        with self._lock:
            for waiter in self._pending.values():
                if waiter.answer is None:
                    waiter.set(_LEAD)
                    return

    def _lost(self, conn: socket.socket) -> None:
        """The owner went away: every request in flight fails UNAVAILABLE; the next call reconnects."""
        with self._lock:
            if self._conn is conn:
                self._conn = None
            pending, self._pending = self._pending, {}
            for waiter in pending.values():
                waiter.set(ServingError("UNAVAILABLE", GONE))
        _close(conn)
        if pending:
            log.warning("frontend %d: the device owner went away; %d request(s) in flight failed UNAVAILABLE",
                        self.frontend, len(pending))

    @staticmethod
    def _outputs(region, response: Response) -> dict[str, np.ndarray]:
        if not response.segment:
            return read_arrays(region, response.outputs, copy=True)
        segment = open_segment(response.segment)
        try:
            return read_arrays(buffer_of(segment), response.outputs, copy=True)
        finally:
            remove_segment(segment)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            _close(conn)


class OwnerRunner(Runner[ModelVersion]):
    """Runs each validated request on the device owner, over `link`: the owner's phases go on the request's clock
    and the rest of the round trip as the hand-off."""

    def __init__(self, link: OwnerLink) -> None:
        self.link = link

    def run(self, model: ModelVersion, signature: str, inputs: Arrays, rows: int, outputs: list[str],
            clock: PhaseClock) -> Arrays:
        result, phases = self.link.call(model.name, model.version, signature, rows, outputs, inputs)
        clock.remote(phases)
        return result

    def shutdown(self) -> None:
        """The connection closed, then the frontend's slab."""
        self.link.close()
        self.link.slab.close()


def _close(conn: socket.socket) -> None:
    """Wake any thread reading it (close alone would not), then close."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    conn.close()


__all__ = ["GONE", "OwnerLink", "OwnerRunner"]
