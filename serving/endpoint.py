"""The served-endpoint record and the vocabulary every stage uses to describe a server.

`ServedEndpoint` is the one description of a running model server: what `make serve-*` records
in the state file, what a sweep targets, and what every result is labelled with. `ServerKind` and
`Device` are the fixed vocabularies in it. They live here, in the earlier stage, so the load test
reads them without reaching into the launcher.

Not for: reading or writing the state file (`serving.deploy.state`) or starting servers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from serving.protocol.runtime_names import display_name


class ServerKind(StrEnum):
    EMBEDDED = "embedded"
    CONTAINER = "tfserving-container"
    UNKNOWN = "unknown"  # an address given by hand whose metrics page does not say


_KIND_NAMES = {ServerKind.EMBEDDED: "embedded server", ServerKind.CONTAINER: "TF Serving container"}


def kind_display_name(kind: str) -> str:
    """How reports and status lines name a kind of server (any recorded string is accepted)."""
    return _KIND_NAMES.get(kind, kind)  # type: ignore[call-overload]


def runtime_display_name(kind: str, runtime: str | None) -> str:
    """What ran the model, as reports name it: TF Serving for its containers; for the embedded server
    the runtime its ready line named (`tensorflow`, `jax`, ...); never TF Serving for anything else."""
    if kind == ServerKind.CONTAINER:
        return "TF Serving"
    if not runtime:
        return "runtime not recorded"
    return display_name(runtime)


def server_with_runtime(kind: str, runtime_display: str) -> str:
    """A kind of server and what ran its model: "embedded server (JAX, ...)"; a TF Serving container alone."""
    if kind == ServerKind.CONTAINER:
        return kind_display_name(kind)
    return f"{kind_display_name(kind)} ({runtime_display})"


class Device(StrEnum):
    CPU = "cpu"
    GPU = "gpu"


@dataclass(frozen=True)
class ServedEndpoint:
    """One running model server, described well enough to label every result measured on it."""

    name: str  # e.g. "cpu" or "gpu": the state file's key
    kind: str  # a ServerKind value
    device: str  # a Device value, or "unknown" for an address given by hand
    device_name: str  # CPU model string or GPU name, as the server reports it
    host: str
    grpc_port: int
    rest_port: int  # 0 when unknown (a server given by its gRPC address alone)
    model_name: str
    batching_profile: str  # profile name from the serving config, "off" when batching is disabled
    batching: dict = field(default_factory=dict)  # the batching parameters in force, TF Serving field names
    versions: dict = field(default_factory=dict)  # e.g. {"tensorflow": "2.21.0", "image": "tensorflow/serving:2.19.1"}
    pid: int | None = None  # embedded server process
    container: str | None = None  # container name when kind is ServerKind.CONTAINER
    started_utc: str = ""

    @property
    def grpc_target(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def rest_url(self) -> str:
        """The REST base URL, or "" when the REST port is unknown."""
        return f"http://{self.host}:{self.rest_port}" if self.rest_port else ""
