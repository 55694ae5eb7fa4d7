"""The `torch` runtime's model: the export's own `model.keras` on Keras 3's PyTorch backend, a CUDA graph a padded size.

Any `.keras` model whose inputs and outputs the version's signature names loads here (not a hand
re-implementation): the signature's inputs are fed to the model's inputs (by name, or the one input to
the one input), each reshaped to the model's input shape when the element counts agree (the MNIST export
flattens its 28x28x1 digits to 784); each signature output is the model output of that name, the one
model output, or, for an int64 vector beside one float matrix output, its row-wise argmax (the export's
`classes`). Anything else is refused at load with the reason.

Batches run padded (`serving.server.runtimes.padded_batches`). Per padded size a `Replayer` holds static buffers:
a host input buffer (pinned on a GPU), the device input, and host outputs. On a GPU the model's forward
pass is captured once per padded size as a CUDA graph (warmed up on a side stream first) and each call copies
in, replays, copies out and synchronizes: a few tens of microseconds where calling Keras eagerly costs
milliseconds (../shared/data/h100-2026-11-26). On a CPU the same buffers and copies run, and the model is
called directly where the graph would be replayed; `graphs` says which. A replayer serves one call at a
time (its buffers are static), so each has a lock. Keras must not have been imported before
`keras_process.prepare_torch` ran.

Not for: what the server knows of the runtime before a model loads (`keras_torch`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model_export.export import KERAS_FILE
from model_export.provenance import cpu_model_name
from serving.server.runtimes.keras_process import prepare_torch
from serving.server.runtimes.model_spec import (
    DEFAULT_SIGNATURE,
    BackendOptions,
    Computed,
    LoadedModel,
    SignatureSpec,
    read_signature_defs,
    signature_specs,
)
from serving.server.runtimes.padded_batches import MAX_PADDED_SIZE, PADDED_SIZES, chunks, pad_rows, padded_size_for

WARMUP_CALLS = 3  # eager calls on the side stream before a capture (cuDNN picks its kernels there)


def import_keras_on_torch() -> Any:
    """Keras on its PyTorch backend; RuntimeError when this process already runs Keras on another backend."""
    prepare_torch()
    import keras

    return keras


def torch_device(device: str) -> Any:
    """The torch device for --device cpu|gpu; RuntimeError saying what is missing when torch sees no GPU."""
    import torch

    if device == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("--device gpu: PyTorch sees no GPU (torch.cuda.is_available() is False); the torch "
                           "backend needs a CUDA build of PyTorch on a GPU machine, or use --device cpu")
    return torch.device("cuda", 0)


def device_name(device: str) -> str:
    """The CPU model, or the GPU's name as CUDA reports it."""
    found = torch_device(device)
    if found.type == "cpu":
        return cpu_model_name()
    import torch

    return str(torch.cuda.get_device_name(found))


@dataclass(frozen=True)
class OutputRule:
    """How one signature output comes from the model's outputs: output `index`, or its row-wise argmax."""

    alias: str
    index: int
    argmax: bool = False


@dataclass(frozen=True)
class IOPlan:
    """The model's inputs in order (signature alias, model shape after the batch dimension, numpy dtype) and
    one rule per signature output."""

    inputs: tuple[tuple[str, tuple[int, ...], str], ...]
    outputs: tuple[OutputRule, ...]


def _names(tensors) -> list[str]:
    return [str(getattr(t, "name", "")).split(":")[0] for t in tensors]


def _input_order(model: Any, spec: SignatureSpec) -> list[str]:
    """The signature's input aliases in the model's input order."""
    aliases = sorted(spec.inputs)
    names = _names(model.inputs)
    if len(names) != len(aliases):
        raise ValueError(f"model.keras has {len(names)} input(s) ({names}), the signature {len(aliases)} ({aliases})")
    if len(names) == 1:
        return aliases
    if sorted(names) != aliases:
        raise ValueError(f"model.keras inputs {names} do not match the signature's inputs {aliases} by name")
    return names


def _shape_for(alias: str, spec: SignatureSpec, model_shape: tuple) -> tuple[int, ...]:
    inner = tuple(int(d) for d in model_shape[1:])
    given = tuple(spec.inputs[alias].shape or ())[1:]
    if any(d is None or d < 0 for d in inner):
        raise ValueError(f"model.keras input for {alias!r} has an unknown dimension {model_shape}")
    if given and all(d >= 0 for d in given) and int(np.prod(given)) != int(np.prod(inner)):
        raise ValueError(f"signature input {alias!r} {given} cannot be reshaped to the model's {inner}")
    return inner


def _output_rules(model: Any, spec: SignatureSpec) -> tuple[OutputRule, ...]:
    names = list(getattr(model, "output_names", None) or _names(model.outputs))
    rules = []
    for alias, tensor in sorted(spec.outputs.items()):
        if alias in names:
            rules.append(OutputRule(alias, names.index(alias)))
        elif len(names) == 1 and (len(spec.outputs) == 1 or tensor.numpy_dtype.kind in "f"):
            rules.append(OutputRule(alias, 0))
        elif len(names) == 1 and tensor.numpy_dtype == np.int64 and len(tensor.shape or ()) == 1:
            rules.append(OutputRule(alias, 0, argmax=True))
        else:
            raise ValueError(f"signature output {alias!r} is none of model.keras's outputs {names}")
    return tuple(rules)


def io_plan(model: Any, specs: dict[str, SignatureSpec]) -> IOPlan:
    """Inputs and outputs mapped once, for the default signature; every other signature must have the same."""
    spec = specs.get(DEFAULT_SIGNATURE) or next(iter(specs.values()))
    for other in specs.values():
        if set(other.inputs) != set(spec.inputs) or set(other.outputs) != set(spec.outputs):
            raise ValueError(f"signature {other.name!r} differs from {spec.name!r}: the torch backend runs one "
                             "forward pass for all of them")
    order = _input_order(model, spec)
    shapes = list(model.input_shape) if len(order) > 1 else [model.input_shape]
    inputs = tuple((alias, _shape_for(alias, spec, tuple(shape)), spec.inputs[alias].numpy_dtype.str)
                   for alias, shape in zip(order, shapes))
    return IOPlan(inputs, _output_rules(model, spec))


class Replayer:
    """One padded size's static buffers and, on a GPU, its captured CUDA graph."""

    def __init__(self, forward: Callable[..., list[Any]], plan: IOPlan, size: int, device: Any) -> None:
        import torch

        self.device, self.size, self.plan = device, size, plan
        self.cuda = device.type == "cuda"
        self.lock = threading.Lock()
        dtypes = [torch.from_numpy(np.zeros(1, dtype)).dtype for _, _, dtype in plan.inputs]
        self.host_in = [torch.zeros((size,) + shape, dtype=d, pin_memory=self.cuda)
                        for (_, shape, _), d in zip(plan.inputs, dtypes)]
        self.device_in = [h.to(device) for h in self.host_in]
        self.forward = forward
        self.graph = None
        with torch.no_grad():
            if self.cuda:
                self.device_out = self._capture(torch)
            else:
                self.device_out = forward(*self.device_in)
        self.host_out = [torch.empty(o.shape, dtype=o.dtype, pin_memory=self.cuda) for o in self.device_out]

    def _capture(self, torch) -> list[Any]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(WARMUP_CALLS):
                self.forward(*self.device_in)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            outputs = self.forward(*self.device_in)
        return outputs

    def run(self, arrays: list[np.ndarray]) -> tuple[list[np.ndarray], float, float, float]:
        """Padded arrays in, the model's outputs out (copies), and the input, inference and output seconds."""
        import torch

        with self.lock, torch.no_grad():
            started = time.perf_counter()
            for host, device, array in zip(self.host_in, self.device_in, arrays):
                host.numpy()[...] = array
                device.copy_(host, non_blocking=self.cuda)
            self._sync(torch)
            placed = time.perf_counter()
            if self.graph is not None:
                self.graph.replay()
            else:
                self.device_out = self.forward(*self.device_in)
            self._sync(torch)
            inferred = time.perf_counter()
            for host, out in zip(self.host_out, self.device_out):
                host.copy_(out, non_blocking=self.cuda)
            self._sync(torch)
            results = [h.numpy().copy() for h in self.host_out]
            return results, placed - started, inferred - placed, time.perf_counter() - inferred

    def _sync(self, torch) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)


def keras_forward(model: Any) -> Callable[..., list[Any]]:
    """The model's forward pass on torch tensors, its outputs always a list."""

    def forward(*tensors):
        out = model(list(tensors) if len(tensors) > 1 else tensors[0], training=False)
        return list(out) if isinstance(out, (list, tuple)) else [out]

    return forward


@dataclass
class TorchModel:
    """A loaded model.keras and one replayer per padded size."""

    plan: IOPlan
    replayers: dict[int, Replayer]
    graphs: bool  # True: CUDA graphs replayed; False: the model called directly (CPU)

    def run(self, inputs: dict[str, np.ndarray]) -> tuple[list[np.ndarray], float, float, float]:
        """Every input (rows of one request or batch) through the padded sizes; the model's outputs, padding cut."""
        arrays = [np.asarray(inputs[alias], dtype).reshape((-1,) + shape) for alias, shape, dtype in self.plan.inputs]
        rows = len(arrays[0])
        if rows <= MAX_PADDED_SIZE:
            size = padded_size_for(rows)
            outs, a, b, c = self.replayers[size].run([pad_rows(x, size) for x in arrays])
            return [o[:rows] for o in outs], a, b, c
        parts: list[list[np.ndarray]] = []
        phases = [0.0, 0.0, 0.0]
        for chunk in chunks(rows):
            outs, *spent = self.replayers[chunk.padded_size].run(
                [pad_rows(x[chunk.start:chunk.stop], chunk.padded_size) for x in arrays])
            parts.append([o[:chunk.stop - chunk.start] for o in outs])
            phases = [p + s for p, s in zip(phases, spent)]
        joined = [np.concatenate([p[i] for p in parts]) for i in range(len(parts[0]))]
        return joined, phases[0], phases[1], phases[2]

    def outputs(self, model_outputs: list[np.ndarray], wanted: list[str]) -> dict[str, np.ndarray]:
        by_alias = {}
        for rule in self.plan.outputs:
            if rule.alias in wanted:
                value = model_outputs[rule.index]
                by_alias[rule.alias] = value.argmax(axis=1).astype(np.int64) if rule.argmax else value
        return by_alias


def load_torch_model(keras_file: Path, specs: dict[str, SignatureSpec], device: str,
                     padded_sizes: tuple[int, ...] = PADDED_SIZES) -> TorchModel:
    """model.keras on Keras-torch, on `device`, every padded size captured (GPU) or run once (CPU)."""
    keras = import_keras_on_torch()
    target = torch_device(device)
    with keras.device(f"{target.type}:{target.index or 0}" if target.type == "cuda" else "cpu"):
        model = keras.saving.load_model(keras_file, compile=False)
        plan = io_plan(model, specs)
        forward = keras_forward(model)
        replayers = {size: Replayer(forward, plan, size, target) for size in padded_sizes}
    return TorchModel(plan, replayers, graphs=target.type == "cuda")


def load_torch(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    """One version's model.keras on PyTorch; signatures from its saved_model.pb."""
    keras_file = Path(path) / KERAS_FILE
    if not keras_file.is_file():
        raise FileNotFoundError(f"the torch backend needs {KERAS_FILE} beside saved_model.pb ({keras_file}); "
                                "re-run make export")
    defs = read_signature_defs(path)
    specs = signature_specs(defs)
    loaded = load_torch_model(keras_file, specs, options.device)

    def run_timed(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> Computed:
        model_outputs, input_s, infer_s, output_s = loaded.run(inputs)
        started = time.perf_counter()  # host-side post-processing (argmax, selection) counts as output
        arrays = loaded.outputs(model_outputs, outputs)
        return Computed(arrays, input_s, infer_s, output_s + time.perf_counter() - started)

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        return run_timed(signature, inputs, outputs).outputs

    return LoadedModel(name, version, path, defs, specs, run, run_timed=run_timed)


__all__ = ["IOPlan", "OutputRule", "Replayer", "TorchModel", "device_name", "import_keras_on_torch", "io_plan",
           "keras_forward", "load_torch", "load_torch_model", "torch_device"]
