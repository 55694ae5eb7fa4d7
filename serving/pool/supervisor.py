"""The pool's parent: holds the port, starts and watches every process, speaks for all of them.

`run_pool(config)` (the server's one `ServerConfig`) refuses a gRPC port that another server holds
(gRPC Python's default SO_REUSEPORT would otherwise let a second server join it silently), keeps the port
reserved, starts the device owner when one is needed (batching on: one scheduler for the whole server; a
GPU: one CUDA context; or `--device_owner always`) and `--workers` frontends on the port, each from a start
record for its role (`serving.pool.control`), serves the one REST/metrics port, and prints the one ready
line, built from the config and frontend 0's ready record. A process that dies is noticed at once (its
sentinel) and started again; its requests in flight fail with UNAVAILABLE (the frontends' side of the owner
link sees to that; a frontend's own connections break with it). More than `MAX_DEATHS` deaths within
`DEATH_WINDOW_S` stop the server with an error rather than restarting for ever. SIGTERM/SIGINT: frontends
drain, then the owner, and no process or shared-memory segment is left behind.

Not for: what the processes do (`serving.pool.frontend`, `serving.pool.owner`).
"""

from __future__ import annotations

import collections
import logging
import multiprocessing
import os
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path

from serving.pool.control import ChildReady, FrontendStart, Launch, OwnerAddress, OwnerStart, Role
from serving.pool.metrics_sum import pool_gauges
from serving.pool.rest_front import PoolRest
from serving.pool.roles import child_main
from serving.pool.slab import owner_prefix, segment_prefix, sweep
from serving.protocol.names import POOL_FRONTENDS, POOL_RESTARTS
from serving.server.app import ready_line
from serving.server.handling.core import ServerConfig
from serving.server.lifecycle import stop_requested

log = logging.getLogger("serving.pool")

START_TIMEOUT_S = 900.0  # loading a large model (and its device floor) may take minutes
STOP_GRACE_S = 35.0  # a frontend's drain (30 s) and a little
MAX_DEATHS = 5
DEATH_WINDOW_S = 60.0


@dataclass
class _Child:
    role: Role
    index: int
    process: BaseProcess
    control: Connection
    ready: ChildReady | None = None


def needs_owner(config: ServerConfig) -> bool:
    """One process must run the model for all: batching on (one scheduler), a GPU (one context), or asked."""
    return config.device_owner == "always" or bool(config.batching) or config.device == "gpu"


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET


def reserve_port(host: str, port: int) -> socket.socket:
    """A socket holding `port` (0: a free one) for the frontends to share; OSError naming the port when
    another server holds it."""
    family, address = _family(host), host.strip("[]")
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no holder; a listener is
        try:
            probe.bind((address, port))
        except OSError as exc:
            raise OSError(f"gRPC port {port} on {host} is already taken by another server ({exc.strerror}); "
                          "stop it or choose another --port") from None
        port = probe.getsockname()[1]
    hold = socket.socket(family, socket.SOCK_STREAM)  # SO_REUSEADDR left off: a probe like ours must fail on it
    hold.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    hold.bind((address, port))
    return hold


class Supervisor:
    """Starts, watches, restarts and stops the processes of one pooled server."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.context = multiprocessing.get_context("spawn")  # gRPC, TensorFlow and CUDA do not survive fork
        self.prefix = segment_prefix(os.getpid())
        self.socket_dir = tempfile.mkdtemp(prefix="serving-pool-")
        self.at = OwnerAddress(str(Path(self.socket_dir) / "owner.sock"), self.prefix)
        self.frontends: list[_Child] = []
        self.owner: _Child | None = None
        self.floor: dict | None = None  # the device floor the owner, or else frontend 0, measured at start
        self.restarts: collections.Counter[str] = collections.Counter()
        self.deaths: collections.deque[float] = collections.deque()

    def _start_of(self, role: Role, index: int) -> FrontendStart | OwnerStart:
        """A child's start record: the config as its role runs it (beside an owner, the owner's device name)."""
        if role == Role.OWNER:
            return OwnerStart(self.config, self.at, os.getpid())
        if self.owner is None or self.owner.ready is None:
            return FrontendStart(self.config, index, None, self.floor, os.getpid())
        config = replace(self.config, device_name=self.owner.ready.device_name)
        return FrontendStart(config, index, self.at, self.floor, os.getpid())

    def _spawn(self, role: Role, index: int) -> _Child:
        receive, send = self.context.Pipe(duplex=False)
        process = self.context.Process(target=child_main, args=(Launch.of(self._start_of(role, index)), send),
                                       name=f"serving-{role}-{index}")
        process.start()
        send.close()
        return _Child(role, index, process, receive)

    def _ready(self, child: _Child, stop) -> ChildReady:
        """Wait for the child's ready message; RuntimeError when it exits first or takes too long."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and not stop.is_set():
            if child.control in wait([child.control, child.process.sentinel], timeout=0.5):
                try:
                    child.ready = child.control.recv()
                    return child.ready
                except EOFError:
                    pass
            if not child.process.is_alive():
                raise RuntimeError(f"the {child.role} process {child.index} exited with code "
                                   f"{child.process.exitcode} before it was ready (its log lines are above)")
        raise RuntimeError(f"the {child.role} process {child.index} was not ready within {START_TIMEOUT_S:.0f} s")

    def start(self, stop) -> None:
        """The owner where one is needed, else frontend 0, ready first (it measures the device floor with the
        cores to itself); then the other frontends, handed that floor."""
        if needs_owner(self.config):
            self.owner = self._spawn(Role.OWNER, 0)
            self.floor = self._ready(self.owner, stop).device_floor
        else:
            self.frontends = [self._spawn(Role.FRONTEND, 0)]
            self.floor = self._ready(self.frontends[0], stop).device_floor
        waiting = [self._spawn(Role.FRONTEND, i) for i in range(len(self.frontends), self.config.frontends)]
        self.frontends += waiting
        for child in waiting:
            self._ready(child, stop)

    def children(self) -> list[_Child]:
        return self.frontends + ([self.owner] if self.owner is not None else [])

    def rest_ports(self) -> list[int]:
        return [c.ready.rest_port for c in self.children() if c.ready is not None and c.process.is_alive()]

    def frontend_ports(self) -> list[int]:
        return [c.ready.rest_port for c in self.frontends if c.ready is not None and c.process.is_alive()]

    def gauges(self) -> str:
        up = sum(1 for c in self.frontends if c.ready is not None and c.process.is_alive())
        return pool_gauges(up, {str(r): self.restarts.get(str(r), 0) for r in Role}, POOL_FRONTENDS, POOL_RESTARTS)

    def watch(self, stop) -> None:
        """Until `stop`: restart whatever dies; RuntimeError when processes keep dying."""
        while not stop.is_set():
            by_sentinel = {c.process.sentinel: c for c in self.children()}
            for sentinel in wait(list(by_sentinel), timeout=0.2):
                if not stop.is_set() and isinstance(sentinel, int):
                    self._restart(by_sentinel[sentinel], stop)

    def _restart(self, dead: _Child, stop) -> None:
        now = time.monotonic()
        self.deaths.append(now)
        while self.deaths and self.deaths[0] < now - DEATH_WINDOW_S:
            self.deaths.popleft()
        log.error("the %s process %d (pid %d) exited with code %s; starting it again", dead.role, dead.index,
                  dead.process.pid, dead.process.exitcode)
        if len(self.deaths) > MAX_DEATHS:
            raise RuntimeError(f"{len(self.deaths)} processes died within {DEATH_WINDOW_S:.0f} s; stopping the server")
        dead.control.close()
        if dead.role == Role.OWNER:
            sweep(owner_prefix(self.prefix))  # answers it made and nobody read
        fresh = self._spawn(dead.role, dead.index)
        if dead.role == Role.OWNER:
            self.owner = fresh
        else:
            self.frontends[dead.index] = fresh
        self._ready(fresh, stop)
        self.restarts[str(dead.role)] += 1

    def stop(self) -> None:
        """Frontends drain first (their owner still answers), then the owner; then the files and segments."""
        for group in (self.frontends, [self.owner] if self.owner is not None else []):
            for child in group:
                if child.process.is_alive():
                    child.process.terminate()
            for child in group:
                child.process.join(STOP_GRACE_S)
                if child.process.is_alive():
                    log.error("the %s process %d did not stop in %.0f s; killing it", child.role, child.index,
                              STOP_GRACE_S)
                    child.process.kill()
                    child.process.join(5)
        shutil.rmtree(self.socket_dir, ignore_errors=True)
        left = sweep(self.prefix)
        if left:
            log.warning("removed %d shared-memory segment(s) the processes left: %s", len(left), ", ".join(left))


def pool_ready_line(config: ServerConfig, first: ChildReady, rest_port: int) -> str:
    """The one ready line: the server's config with the device frontend 0 named and the version it serves, on the
    server's public ports."""
    return ready_line(replace(config, device_name=first.device_name), config.grpc_port, rest_port, first.version)


def run_pool(config: ServerConfig) -> int:
    """Serve with `config.frontends` frontends until SIGTERM/SIGINT; 0 after a clean stop."""
    hold = reserve_port(config.host, config.grpc_port)
    config = replace(config, grpc_port=hold.getsockname()[1])
    supervisor = Supervisor(config)
    stop = stop_requested()
    rest: PoolRest | None = None
    try:
        rest = PoolRest(config.host, config.rest_port, config.monitoring_path, supervisor.rest_ports,
                        supervisor.frontend_ports, supervisor.gauges)
        log.info("pool: %d frontend(s)%s on %s:%d, cores %s", config.frontends,
                 " and a device owner" if needs_owner(config) else "", config.host, config.grpc_port,
                 sorted(os.sched_getaffinity(0)))
        supervisor.start(stop)
        if stop.is_set():
            return 0
        rest.start()
        first = supervisor.frontends[0].ready
        assert first is not None
        line = pool_ready_line(config, first, rest.port)
        log.info("%s", line)
        print(line, flush=True)
        supervisor.watch(stop)
        log.info("stopping: frontends drain, then the device owner")
        return 0
    finally:
        if rest is not None:
            rest.stop()
        supervisor.stop()
        hold.close()


__all__ = ["Supervisor", "needs_owner", "reserve_port", "run_pool"]
