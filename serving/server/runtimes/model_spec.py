"""The model-facing types every backend shares: signatures read from `saved_model.pb`, and a loaded model.

`read_signature_defs` parses the SavedModel's SignatureDefs from the protobuf file itself, with
TensorFlow's generated protos only (no TensorFlow ops), so validation and metadata never depend on
the backend, and a server without TensorFlow's runtime (the `jax` backend) reads them too.

Not for: loading or running a model (`serving.server.runtimes`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tensorflow.core.protobuf import meta_graph_pb2, saved_model_pb2

from serving.protocol.signatures import SignatureSpec, TensorSpec, signature_specs  # noqa: F401  (re-exported)

SERVE_TAG = "serve"
DEFAULT_SIGNATURE = "serving_default"


@dataclass(frozen=True)
class BackendOptions:
    """Everything a backend may need besides the model path; only the chosen backend reads its part."""

    device: str = "cpu"  # "cpu" or "gpu"
    null_delay_ms: float = 0.0
    null_stall_ms: float = 0.0
    null_stall_every_s: float = 0.0
    null_cpu_ms: float = 0.0  # CPU time each call spends on its thread (holding the GIL), after any delay


def read_signature_defs(model_dir: Path) -> dict[str, meta_graph_pb2.SignatureDef]:
    """The serving MetaGraph's SignatureDefs, parsed from saved_model.pb without TensorFlow ops."""
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((Path(model_dir) / "saved_model.pb").read_bytes())
    for meta_graph in saved_model.meta_graphs:
        if SERVE_TAG in meta_graph.meta_info_def.tags:
            return dict(meta_graph.signature_def)
    raise ValueError(f"{model_dir}: SavedModel has no MetaGraph tagged '{SERVE_TAG}'")


class Computed(NamedTuple):
    """One model call's outputs and where its time went on the device (seconds, each synchronised).

    `input_s`: host -> device; `infer_s`: the model itself; `output_s`: device -> host numpy, plus the
    backend's own bookkeeping after the model (slicing, host-side post-processing)."""

    outputs: dict[str, np.ndarray]
    input_s: float
    infer_s: float
    output_s: float


RunFunction = Callable[[str, dict[str, np.ndarray], list[str]], dict[str, np.ndarray]]
TimedRunFunction = Callable[[str, dict[str, np.ndarray], list[str]], Computed]


@dataclass
class ModelVersion:
    """One version of one model as its signatures describe it: all that resolving a request, validating it and
    answering metadata need. A frontend with a device owner holds only this (`described`); what runs the model
    holds a `LoadedModel`."""

    name: str
    version: int
    path: Path
    signature_defs: dict[str, meta_graph_pb2.SignatureDef]
    signatures: dict[str, SignatureSpec]

    def unload(self) -> None:
        """Nothing to let go of: no runtime holds it."""


def described(name: str, version: int, path: Path) -> ModelVersion:
    """A version directory's signatures, read without loading the model (nor its runtime)."""
    defs = read_signature_defs(path)
    return ModelVersion(name, version, path, defs, signature_specs(defs))


@dataclass
class LoadedModel(ModelVersion):
    """One loaded version of one model: its signatures and a function running a batch.

    `run` gives the outputs only; `run_timed`, where the backend has one, gives them with the call's compute
    sub-phases (`Computed`); `serving.server.handling.runner.timed_call` times a call either way."""

    # run(signature_name, {alias: array}, [output aliases]) -> {alias: array}; thread-safe.
    run: RunFunction
    unload: Callable[[], None] = field(default=lambda: None)  # ModelVersion's `unload`, given by the runtime
    run_timed: TimedRunFunction | None = None  # same arguments as `run`; thread-safe
