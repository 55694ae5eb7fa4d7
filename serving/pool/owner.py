"""The device owner: the one process that runs the model, for the requests of every frontend.

It loads the model once (one CUDA context on a GPU), measures the device floor once, and listens on a
Unix socket. Each frontend connects, names its slab (`Hello`), then sends `Request`s whose inputs lie in
that slab; the owner runs them through one `ServingCore`, so with batching on one scheduler per model
version batches across every frontend, as TF Serving's one scheduler does. Outputs are written back into
the request's slot and a `Response` carries the owner's phases. Request counts and latencies are the
frontends' to record; the owner records the model's own metrics (runtime latency, batch sizes, queueing).

Not for: the frontend's side (`serving.pool.link`) or starting and restarting it (`serving.pool.supervisor`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from serving.pool.control import ChildReady, OwnerStart, Role
from serving.pool.messages import Hello, Receiver, Request, Response, listen
from serving.pool.slab import (
    buffer_of,
    close_segment,
    encode_arrays,
    encoded_bytes,
    open_segment,
    owner_prefix,
    read_arrays,
    slot_region,
    write_encoded,
)
from serving.server.handling.core import ServingCore
from serving.server.handling.errors import ServingError
from serving.server.handling.metrics import DELIVER, PhaseClock
from serving.server.lifecycle import wait_for_stop

log = logging.getLogger("serving.pool")


class _Peer:
    """One frontend's connection and its attached slab."""

    def __init__(self, conn: socket.socket, hello: Hello) -> None:
        self.conn = conn
        self.hello = hello
        self.slab = open_segment(hello.segment)
        self.regions = [slot_region(self.slab, slot, hello.slot_bytes) for slot in range(hello.slots)]

    def send(self, response: Response) -> None:
        try:
            self.conn.send(response.to_bytes())  # one datagram: atomic between batch threads
        except OSError:  # the frontend went away; its requests went with it
            pass


class _Call:
    """One request being served: where its data lies and its clock (started when it arrived)."""

    __slots__ = ("peer", "request", "region", "segment", "clock")

    def __init__(self, peer: _Peer, request: Request) -> None:
        self.clock = PhaseClock()
        self.peer = peer
        self.request = request
        self.segment = open_segment(request.segment) if request.segment else None
        self.region = buffer_of(self.segment) if self.segment is not None else peer.regions[request.slot]


class OwnerServer:
    """Accepts frontends on `address` and serves their requests through `core`."""

    def __init__(self, core: ServingCore, address: str, prefix: str) -> None:
        self.core = core
        self.address = address
        self.prefix = prefix
        Path(address).unlink(missing_ok=True)  # a socket file a killed owner left
        self._listener = listen(address)
        self._oneoff = 0
        self._oneoff_lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._accept, name="owner-accept", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve_peer, args=(conn,), name="owner-peer", daemon=True).start()

    def _serve_peer(self, conn: socket.socket) -> None:
        receiver = Receiver(conn)
        try:
            hello = receiver.recv()
            if hello is None:
                raise EOFError("closed")
            peer = _Peer(conn, Hello.from_bytes(hello))
        except (EOFError, OSError) as exc:
            log.warning("owner: a frontend connected and left before saying hello: %s", exc)
            conn.close()
            return
        log.info("owner: frontend %d connected (slab %s)", peer.hello.frontend, peer.hello.segment)
        while True:
            try:
                data = receiver.recv()
            except OSError:
                break
            if data is None:
                break
            self._dispatch(_Call(peer, Request.from_bytes(data)))
        conn.close()
        peer.regions.clear()
        close_segment(peer.slab)

    def _dispatch(self, call: _Call) -> None:
        """Run the request as every request of this server runs (`ServingCore.runner`: alone, on this frontend's
        connection thread with no hop; batched, answered on the batch thread), on the version the frontend
        resolved."""
        request = call.request
        try:
            model = self.core.source.loaded(request.model, request.version)
            inputs = read_arrays(call.region, request.inputs, copy=False)
            self.core.runner.start(model, request.signature, inputs, request.rows, list(request.outputs), call.clock,
                                   partial(self._reply, call))
        except Exception as exc:  # answered, never raised into the connection's thread
            self._reply(call, exc)

    def _reply(self, call: _Call, answer: dict[str, np.ndarray] | BaseException) -> None:
        request = call.request
        if isinstance(answer, BaseException):
            code = answer.code if isinstance(answer, ServingError) else "INTERNAL"
            message = str(answer.message if isinstance(answer, ServingError) else f"{type(answer).__name__}: {answer}")
            response = Response(request.request_id, code, message, "", (), tuple(call.clock.durations))
        else:
            segment_name, refs = self._write_outputs(call, answer)
            call.clock.lap(DELIVER)
            response = Response(request.request_id, "OK", "", segment_name, refs, tuple(call.clock.durations))
        if call.segment is not None:
            close_segment(call.segment)
        call.peer.send(response)

    def _write_outputs(self, call: _Call, outputs: dict[str, np.ndarray]):
        """Into the request's own region when they fit, else into a one-off segment the frontend unlinks."""
        encoded = encode_arrays(outputs)  # once: its size decides where they go
        size = encoded_bytes(encoded)
        if size <= len(call.region):
            return "", write_encoded(call.region, encoded)
        with self._oneoff_lock:
            self._oneoff += 1
            name = f"{owner_prefix(self.prefix)}{os.getpid()}-{self._oneoff}"
        segment = open_segment(name, size)
        refs = write_encoded(buffer_of(segment), encoded)
        close_segment(segment)
        return name, refs

    def stop(self) -> None:
        """No new frontends; queued batches finished; the socket file removed."""
        self._listener.close()
        self.core.shutdown()
        Path(self.address).unlink(missing_ok=True)


def owner_main(start: OwnerStart, control: Connection, stop: threading.Event) -> None:
    """The owner process (readied and started by serving.pool.roles): load, measure the floor, serve frontends
    until SIGTERM."""
    from serving.server.api.rest import RestServer
    from serving.server.app import on_device, served_version, start_up

    core = start_up(on_device(start.config))
    server = OwnerServer(core, start.at.socket, start.at.prefix)
    server.start()
    rest = RestServer(core, "127.0.0.1", 0)  # its metrics page, summed into the supervisor's
    rest.start()
    core.source.start()
    control.send(ChildReady(Role.OWNER, 0, os.getpid(), rest.port, core.config.device_name, served_version(core),
                             core.device_floor))
    wait_for_stop(stop)
    server.stop()
    rest.stop()
    core.source.stop()


__all__ = ["OwnerServer", "owner_main"]
