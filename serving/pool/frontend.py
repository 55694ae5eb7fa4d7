"""A gRPC frontend process: decode and validate on the shared port, run the model here or on the owner.

Every frontend binds the server's one gRPC port with SO_REUSEPORT (the kernel spreads connections
over them) and serves REST, with its metrics page, on an internal loopback port the supervisor reads.
With a device owner, its core is the one-process server's `ServingCore` with its models described only
(their signatures) and, as its runner, an `OwnerRunner` that sends each validated request to the owner
(`serving.pool.link`); the hand-off is its own phase. Without one it runs the model itself, as a
one-process server does. The device floor is measured once per server, by the owner or else by frontend 0
before the others start; every frontend holds it (`FrontendStart.floor`), so whichever answers a metadata
request reports it.

Not for: the owner (`serving.pool.owner`) or starting frontends (`serving.pool.supervisor`).
"""

from __future__ import annotations

import os
import threading
from multiprocessing.connection import Connection

from serving.pool.control import ChildReady, FrontendStart, OwnerAddress, Role
from serving.pool.link import OwnerLink, OwnerRunner
from serving.pool.slab import Slab
from serving.server.lifecycle import wait_for_stop


def owner_runner(owner: OwnerAddress, index: int) -> OwnerRunner:
    """Frontend `index`'s runner to the device owner, its link connected (its own slab in shared memory)."""
    link = OwnerLink(owner.socket, Slab(owner.prefix, index), index)
    link.connect(timeout_s=30)
    return OwnerRunner(link)


def frontend_main(start: FrontendStart, control: Connection, stop: threading.Event) -> None:
    """The frontend process (readied and started by serving.pool.roles): serve on the shared port until SIGTERM,
    then drain. It measures the device floor only where no process of the server has (`start.floor` None)."""
    from serving.server.app import on_device, served_version, start_protocols, start_up

    if start.owner is None:
        core = start_up(on_device(start.config), start.floor)
    else:  # with an owner a frontend never loads the model's runtime (nor touches the GPU): serving.pool.roles
        core = start_up(start.config, start.floor, owner_runner(start.owner, start.index))
    protocols = start_protocols(core, reuse_port=True, rest_host="127.0.0.1", rest_port=0)
    control.send(ChildReady(Role.FRONTEND, start.index, os.getpid(), protocols.rest.port, core.config.device_name,
                             served_version(core), core.device_floor))
    wait_for_stop(stop)
    protocols.drain(core)


__all__ = ["frontend_main", "owner_runner"]
