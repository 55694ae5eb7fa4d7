"""A server on this host that the tool did not start: its processes, found by the port it listens on.

A `--target` address or a state-file server has no pid the tool knows. Its processes are the ones listening
on its gRPC port (every frontend of a pooled server shares it), what runs under each of them, and, where they
all share one parent that is not one of this tool's own ancestors, that parent and everything under it (a
pooled server's supervisor, its device owner). Their cores are the union of their CPU affinities: where the
host probe and the telemetry look for the server.

Not for: reading what the processes use (`loadtest.sweep.device_sources.ProcessSource`).
"""

from __future__ import annotations

import os

import psutil


def listening_on(port: int) -> list[int]:
    """The pids listening on TCP `port` (any address); raises psutil.Error where the host does not say."""
    return sorted({c.pid for c in psutil.net_connections(kind="tcp")
                   if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid})


def server_roots(port: int) -> list[int] | str:
    """The processes at the top of the server's tree (their children are the sampler's to find), or why none."""
    try:
        listeners = listening_on(port)
    except psutil.Error as exc:
        return f"the processes listening on port {port} could not be listed ({exc})"
    if not listeners:
        return f"no process on this host listens on port {port} (or it is not visible to this tool)"
    roots = [pid for pid in listeners if not _ancestors(pid) & set(listeners)]
    parents = {_parent(pid) for pid in roots}
    if len(parents) == 1 and (parent := parents.pop()) not in (None, 1) and parent not in _ancestors(os.getpid()) \
            and parent != os.getpid():
        return [parent]
    return roots


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _ancestors(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).parents()}
    except psutil.Error:
        return set()
