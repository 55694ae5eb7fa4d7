"""A gRPC frontend process: decode and validate on the shared port, run the model here or on the owner.

Every frontend binds the server's one gRPC port with SO_REUSEPORT (the kernel spreads connections
over them) and serves REST, with its metrics page, on an internal loopback port the supervisor reads.
With a device owner, its models are signatures only and `RemoteCore` sends each validated request to the
owner (`serving.pool.link`); the hand-off is its own phase. Without one it runs the model itself, as a
one-process server does. The device floor is measured once per server, by the owner or else by frontend 0
before the others start; every frontend holds it (`floor`), so whichever answers a metadata request reports it.

Not for: the owner (`serving.pool.owner`) or starting frontends (`serving.pool.supervisor`).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

from serving.pool.control import ChildReady, Role, follow_parent
from serving.pool.link import OwnerLink
from serving.pool.slab import Slab
from serving.server.handling.core import ServingCore
from serving.server.handling.phases import PhaseClock
from serving.server.lifecycle import configure_logging, stop_requested


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


def _core(args: argparse.Namespace, index: int, owner: tuple[str, str, str] | None,
          floor: dict | None) -> ServingCore:
    """The frontend's core: remote (owner = (address, slab prefix, device name)) or running the model; it measures
    the device floor only where no process of the server has (`floor` None) and it is frontend 0."""
    from serving.server.app import load_models, server_metrics
    from serving.server.flags import server_config

    if owner is None:
        from serving.server.handling.core import select_device  # the process was readied (serving.pool.roles)

        config = server_config(args, select_device(args.device, args.backend))
        if index > 0 or floor is not None:  # one floor per server, measured by frontend 0 alone
            config = dataclasses.replace(config, device_floor_s=0.0)
        return ServingCore(config, load_models(config), server_metrics(config))
    # With an owner a frontend never loads the model's runtime (nor touches the GPU): serving.pool.roles
    address, prefix, device_name = owner
    config = dataclasses.replace(server_config(args, device_name), device_floor_s=0.0)
    core = RemoteCore(config, load_models(config, signatures_only), server_metrics(config))
    core.link = OwnerLink(address, Slab(prefix, index), index)
    core.link.connect(timeout_s=30)
    return core


def frontend_main(args: argparse.Namespace, index: int, owner: tuple[str, str, str] | None, floor: dict | None,
                  control: Connection, parent_pid: int) -> None:
    """The frontend process: serve on the shared port until SIGTERM, then drain."""
    configure_logging(args.log_level)
    from serving.server.app import measure_and_freeze, ready_line, start_protocols

    stop = stop_requested()
    follow_parent(parent_pid)
    core = _core(args, index, owner, floor)
    measure_and_freeze(core, floor)
    protocols = start_protocols(core, reuse_port=True, rest_host="127.0.0.1", rest_port=0)
    line = ready_line(core.config, protocols.grpc_port, protocols.rest.port, core.source)
    control.send(ChildReady(Role.FRONTEND, index, os.getpid(), protocols.rest.port, core.config.device_name, line,
                             core.device_floor))
    stop.wait()
    protocols.drain(core)
    if isinstance(core, RemoteCore):
        core.link.slab.close()


__all__ = ["RemoteCore", "frontend_main", "signatures_only"]
