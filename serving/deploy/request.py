"""What a launcher is asked to start, which kinds of launcher there are, and how a launch refuses.

Shared by the launcher (`serving.deploy.launcher`) and the two ways it serves
(`serving.deploy.docker`, `serving.deploy.embedded`), so neither imports the other.

Not for: deciding which launcher serves (`serving.deploy.launcher`) or the configuration itself
(`serving.deploy.config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from serving.deploy.config import ServingConfig
from serving.deploy.tfs_files import ServingFiles
from serving.endpoint import Device


class LaunchKind(StrEnum):
    """What `serve start --kind` may ask for."""

    AUTO = "auto"  # the container when Docker can serve the device, else the embedded server
    CONTAINER = "container"
    EMBEDDED = "embedded"


class LaunchError(Exception):
    """A start/stop that cannot go ahead; the message is the one line the user sees."""


@dataclass(frozen=True)
class StartRequest:
    device: Device | str  # a Device value
    kind: LaunchKind | str  # a LaunchKind value
    config: ServingConfig
    files: ServingFiles
    timeout_s: float
    server_name: str = ""  # the state file's key; "" = the device (`make serve-cpu` records "cpu")
    server_flags: tuple[str, ...] = field(default=())  # extra embedded-server flags (e.g. a null backend)
    log_path: Path | None = None  # the embedded server's output; None = beside the state file
    # The server's cores (`taskset -c` list, "0-1"): the embedded server's taskset, the container's cpuset; "" = all
    cpus: str = ""

    @property
    def name(self) -> str:
        """The state file's key for this server."""
        return self.server_name or str(self.device)

    @property
    def grpc_port(self) -> int:
        return self.config.ports(self.device).grpc_port

    @property
    def rest_port(self) -> int:
        return self.config.ports(self.device).rest_port
