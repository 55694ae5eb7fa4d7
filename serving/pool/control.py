"""What the supervisor and each process it starts tell each other: the start record of its role, and who is ready.

A child starts from a typed record for its role, `FrontendStart` or `OwnerStart`, holding the server's one
`ServerConfig` (built once from the flags, in `serving.server.__main__`) as that role runs it. It travels
sealed in a `Launch`: unpickling a config imports the server (and TensorFlow's protos, or its runtime), which
a child may only do once it is readied for its role (`serving.pool.roles`), so the launch carries beside it
what readying needs. Once serving, the child answers with a `ChildReady` over a `multiprocessing` pipe
(control plane, not the request path), from which the supervisor builds the server's one ready line.

Not for: the request path's messages (`serving.pool.messages`).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:  # unpickled only once the process is readied (Launch.open)
    from serving.server.handling.core import ServerConfig


class Role(StrEnum):
    FRONTEND = "frontend"
    OWNER = "owner"


@dataclass(frozen=True)
class OwnerAddress:
    """Where the device owner listens (its Unix socket) and the prefix the server's shared memory is named under."""

    socket: str
    prefix: str


@dataclass(frozen=True)
class FrontendStart:
    """A frontend's start: the server's config as it runs it (with an owner, the owner's device name), its index,
    its owner (None: it runs the model itself), the device floor the server measured (None: it measures it, as
    frontend 0 does where no owner did), and its supervisor's pid."""

    config: ServerConfig
    index: int
    owner: OwnerAddress | None
    floor: dict | None
    parent_pid: int

    @property
    def runs_model(self) -> bool:
        return self.owner is None


@dataclass(frozen=True)
class OwnerStart:
    """The device owner's start: the server's config, where it listens, and its supervisor's pid."""

    config: ServerConfig
    at: OwnerAddress
    parent_pid: int
    runs_model: ClassVar[bool] = True


@dataclass(frozen=True)
class Launch:
    """A started process's one argument: its runtime and log level, read before it imports the server, and its
    start record, pickled (`open` it once the process is readied)."""

    backend: str
    runs_model: bool
    log_level: str
    start: bytes

    @classmethod
    def of(cls, start: FrontendStart | OwnerStart) -> Launch:
        return cls(start.config.backend, start.runs_model, start.config.log_level, pickle.dumps(start))

    def open(self) -> FrontendStart | OwnerStart:
        return pickle.loads(self.start)


@dataclass(frozen=True)
class ChildReady:
    """A started process, ready: its role and index, pid, internal REST (metrics) port, device name, the newest
    version of the first model it serves (the ready line names it), and the device floor it holds
    (`DeviceFloor.as_dict()`: the one the server measured at start, handed to the frontends after it)."""

    role: Role
    index: int
    pid: int
    rest_port: int
    device_name: str
    version: int
    device_floor: dict | None = None


_PR_SET_PDEATHSIG = 1


def follow_parent(parent_pid: int) -> None:
    """Have the kernel send this process SIGTERM when its supervisor dies (Linux's PR_SET_PDEATHSIG), so a
    killed supervisor leaves no frontend serving on its port; exits at once if it is already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the supervisor's own stop is all there is
        return
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


__all__ = ["FrontendStart", "Launch", "OwnerAddress", "OwnerStart", "Role", "ChildReady", "follow_parent"]
