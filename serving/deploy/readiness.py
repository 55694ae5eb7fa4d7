"""Whether a server can start and whether it serves: free ports before, model AVAILABLE after.

Both launchers wait the same way, on TF Serving's own signal: gRPC `GetModelStatus` reporting an
AVAILABLE version, so a container and the embedded server count as up at the same moment.

Not for: the embedded server's ready line (`serving.deploy.process`).
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psutil

from serving.deploy.request import LaunchError

POLL_S = 0.5


def port_holder(port: int) -> str:
    """Who listens on `port`, for the error message ("" when unknown)."""
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
    except (psutil.Error, OSError):
        pass
    return ""


def check_port_free(host: str, port: int) -> None:
    """LaunchError naming the holder when `port` on `host` cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            holder = port_holder(port)
            raise LaunchError(f"port {port} on {host} is already in use{' by ' + holder if holder else ''} "
                              f"({exc.strerror}); stop that process or choose other ports "
                              f"(--grpc-port/--rest-port or SERVING_<DEVICE>_GRPC_PORT)") from None


def free_ports(host: str, count: int) -> tuple[int, ...]:
    """`count` distinct ports the OS says are free on `host` now (held together, then released), for
    servers the tool starts itself; a port taken in between fails that server's start, named."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for held in sockets:
            held.bind((host, 0))
        return tuple(held.getsockname()[1] for held in sockets)
    finally:
        for held in sockets:
            held.close()


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence file descriptor 2 while TensorFlow loads: its C++ start-up lines (oneDNN, CUDA
    stubs) ignore TF_CPP_MIN_LOG_LEVEL and would bury the launcher's one-line answer. Python
    exceptions are unaffected: they are raised after the descriptor is restored."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def wait_available(target: str, model: str, deadline: float, problem: Callable[[], str | None]) -> int:
    """Poll gRPC GetModelStatus until a version is AVAILABLE; returns that version.

    `problem()` reports a server that died meanwhile, so the wait ends at once instead of at
    the deadline.
    """
    _raise_problem(problem)  # before the slow import below (it loads all of TensorFlow)
    import grpc

    with quiet_native_stderr():
        from tensorflow_serving.apis import get_model_status_pb2, model_service_pb2_grpc

    last = "no answer yet"
    with grpc.insecure_channel(target) as channel:
        stub = model_service_pb2_grpc.ModelServiceStub(channel)
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = model
        while time.monotonic() < deadline:
            _raise_problem(problem)
            try:
                version, last = _available_version(stub.GetModelStatus(request, timeout=5))
                if version is not None:
                    return version
            except grpc.RpcError as exc:
                last = f"{exc.code().name}: {exc.details()}"
            time.sleep(POLL_S)
    raise LaunchError(f"model {model!r} not AVAILABLE at {target} in time (last GetModelStatus: {last})")


def _raise_problem(problem: Callable[[], str | None]) -> None:
    reason = problem()
    if reason:
        raise LaunchError(reason)


def _available_version(reply) -> tuple[int | None, str]:
    """The newest AVAILABLE version in a GetModelStatus reply (None if none), and the states seen."""
    from tensorflow_serving.apis.get_model_status_pb2 import ModelVersionStatus

    available = [s.version for s in reply.model_version_status if s.state == ModelVersionStatus.AVAILABLE]
    seen = ", ".join(f"v{s.version} {ModelVersionStatus.State.Name(s.state)}"
                     for s in reply.model_version_status) or "no versions"
    return (max(available) if available else None), seen
