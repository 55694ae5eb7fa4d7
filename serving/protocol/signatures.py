"""A SignatureDef as both sides read it: each input and output's alias, dtype and shape.

The server reads SignatureDefs from `saved_model.pb` (`serving.server.runtimes.model_spec`) to validate
requests; the load generator reads them from the server's GetModelMetadata (`loadtest.load.signature`)
to make inputs and check outputs. Both turn the same `tensorflow.SignatureDef` messages into these
records here. Shapes keep TensorFlow's `-1` for "any size"; `None` is an unknown rank.

Not for: reading a SavedModel or asking a server (the modules above), or tensor encoding
(`serving.protocol.tensors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from serving.protocol.tensors import CODECS_BY_ENUM, dtype_name


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a signature: its alias, dtype and shape (-1 = any size)."""

    alias: str
    tensor_name: str
    dtype_enum: int
    shape: tuple[int, ...] | None  # None when the rank is unknown

    @property
    def numpy_dtype(self) -> np.dtype:
        """numpy's dtype for it; ValueError for a TensorFlow dtype the TF Serving protocol cannot carry here."""
        codec = CODECS_BY_ENUM.get(self.dtype_enum)
        if codec is None:
            raise ValueError(f"{self.alias}: dtype {dtype_name(self.dtype_enum)} is not supported")
        return codec.numpy

    @property
    def batched(self) -> bool:
        """Its first dimension is the request batch (`-1`), or its rank is unknown (taken as [batch])."""
        return self.shape is None or (len(self.shape) > 0 and self.shape[0] == -1)

    def describe(self) -> str:
        """`ids DT_INT64 [-1, 8]`."""
        dims = "?" if self.shape is None else f"[{', '.join(map(str, self.shape))}]"
        return f"{self.alias} {dtype_name(self.dtype_enum)} {dims}"


@dataclass(frozen=True)
class SignatureSpec:
    """A SignatureDef reduced to its name, method and tensors by alias."""

    name: str
    method_name: str
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]

    def describe(self) -> str:
        ins = ", ".join(t.describe() for t in self.inputs.values())
        outs = ", ".join(t.describe() for t in self.outputs.values())
        return f"{self.name}: inputs {ins}; outputs {outs}"


def tensor_spec(alias: str, info) -> TensorSpec:
    """A `tensorflow.TensorInfo` message as a TensorSpec."""
    shape = None if info.tensor_shape.unknown_rank else tuple(int(d.size) for d in info.tensor_shape.dim)
    return TensorSpec(alias=alias, tensor_name=info.name, dtype_enum=int(info.dtype), shape=shape)


def signature_spec(name: str, sig_def) -> SignatureSpec:
    """A `tensorflow.SignatureDef` message as a SignatureSpec, tensors in alias order."""
    return SignatureSpec(name=name, method_name=sig_def.method_name,
                         inputs={a: tensor_spec(a, i) for a, i in sorted(sig_def.inputs.items())},
                         outputs={a: tensor_spec(a, i) for a, i in sorted(sig_def.outputs.items())})


def signature_specs(defs: Mapping) -> dict[str, SignatureSpec]:
    """SignatureSpecs for every signature that can be served (TF-internal ones, `__...`, skipped)."""
    return {name: signature_spec(name, sig) for name, sig in defs.items() if not name.startswith("__")}


__all__ = ["SignatureSpec", "TensorSpec", "signature_spec", "signature_specs", "tensor_spec"]
