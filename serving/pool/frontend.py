"""A gRPC frontend process: decode and validate on the shared port, run the model here or on the owner.

Every frontend binds the server's one gRPC port with SO_REUSEPORT (the kernel spreads connections
over them) and serves REST, with its metrics page, on an internal loopback port the supervisor reads.
With a device owner, its models are signatures only and `RemoteCore` sends each validated request to the
owner (`serving.pool.link`); the hand-off is its own phase. Without one it runs the model itself, as a
one-process server does. The device floor is measured once per server, by the owner or else by frontend 0
before the others start; every frontend holds it (`FrontendStart.floor`), so whichever answers a metadata
request reports it.

Not for: the owner (`serving.pool.owner`) or starting frontends (`serving.pool.supervisor`).
"""

from __future__ import annotations

import os
import threading
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from serving.pool.control import ChildReady, FrontendStart, OwnerAddress, Role
from serving.pool.link import OwnerLink
from serving.pool.slab import Slab
from serving.server.handling.core import ServerConfig, ServingCore
from serving.server.handling.phases import PhaseClock


class RemoteCore(ServingCore):
    """A frontend's core whose model runs in the device owner process."""

    link: OwnerLink

    def execute(self, model, signature: str, inputs: dict[str, np.ndarray], rows: int, outputs: list[str],
                clock: PhaseClock) -> dict[str, np.ndarray]:
        result, phases = self.link.call(model.name, model.version, signature, rows, outputs, inputs)
        clock.remote(phases)
        return result

    def shutdown(self) -> None:
        self.link.close()


def signatures_only(entry, version: int):
    """A model version as a frontend with an owner holds it: its signatures, nothing to run."""
    from serving.server.runtimes.model_spec import LoadedModel, read_signature_defs, signature_specs

    path = Path(entry.base_path) / str(version)
    defs = read_signature_defs(path)

    def run(signature, inputs, outputs):
        raise RuntimeError("a frontend with a device owner does not run the model itself")

    return LoadedModel(entry.name, version, path, defs, signature_specs(defs), run)


def remote_core(owner: OwnerAddress, index: int, config: ServerConfig) -> RemoteCore:
    """Frontend `index`'s core whose model runs in the owner: its models signatures only, its link connected. With
    an owner a frontend never loads the model's runtime (nor touches the GPU): serving.pool.roles."""
    from serving.server.app import load_models, server_metrics

    core = RemoteCore(config, load_models(config, signatures_only), server_metrics(config))
    core.link = OwnerLink(owner.socket, Slab(owner.prefix, index), index)
    core.link.connect(timeout_s=30)
    return core


def frontend_main(start: FrontendStart, control: Connection, stop: threading.Event) -> None:
    """The frontend process (readied and started by serving.pool.roles): serve on the shared port until SIGTERM,
    then drain. It measures the device floor only where no process of the server has (`start.floor` None)."""
    from serving.server.app import on_device, served_version, start_protocols, start_up

    if start.owner is None:
        core = start_up(on_device(start.config), known_floor=start.floor)
    else:
        core = start_up(start.config, partial(remote_core, start.owner, start.index), start.floor)
    protocols = start_protocols(core, reuse_port=True, rest_host="127.0.0.1", rest_port=0)
    control.send(ChildReady(Role.FRONTEND, start.index, os.getpid(), protocols.rest.port, core.config.device_name,
                             served_version(core), core.device_floor))
    stop.wait()
    protocols.drain(core)
    if isinstance(core, RemoteCore):
        core.link.slab.close()


__all__ = ["RemoteCore", "frontend_main", "remote_core", "signatures_only"]
