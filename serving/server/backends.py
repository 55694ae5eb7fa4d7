"""Model backends: what actually turns a batch of input arrays into output arrays.

Three backends behind one small interface (load, run, name, version), chosen from `BACKENDS`:
- `savedmodel`: the real SavedModel, run by TensorFlow on the chosen device;
- `jax`: the same trained weights (`model.keras` beside the SavedModel) run by Keras 3 on JAX,
  XLA-compiled (`serving.server.jax_backend`, imported only when chosen);
- `null`: reads only the SavedModel's signatures and returns zeros of the output shapes, after
  an optional fixed delay or periodic stall. It measures the serving harness's own cost (and
  lets tests provoke queueing) with the exact same request path as the real model.

All read the signatures from `saved_model.pb` itself, so validation and metadata never depend
on the backend. Not for: request validation, batching or protocols (see `serving.server.core`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from serving.server.model_spec import (  # noqa: F401  (re-exported: the backends' shared types)
    DEFAULT_SIGNATURE,
    SERVE_TAG,
    BackendOptions,
    Computed,
    LoadedModel,
    SignatureSpec,
    TensorSpec,
    read_signature_defs,
    signature_specs,
)


def _load_savedmodel(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    import tensorflow as tf

    device = "/GPU:0" if options.device == "gpu" else "/CPU:0"
    with tf.device(device):
        loaded = tf.saved_model.load(str(path), tags=[SERVE_TAG])
    functions = dict(loaded.signatures)
    defs = read_signature_defs(path)
    # Eager ops on the CPU return when done; on a GPU they return once queued, so each phase waits for it.
    sync = tf.test.experimental.sync_devices if options.device == "gpu" else _nothing

    def run_timed(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> Computed:
        started = time.perf_counter()
        with tf.device(device):
            tensors = {k: tf.constant(v) for k, v in inputs.items()}
            sync()
            placed = time.perf_counter()
            result = functions[signature](**tensors)
            sync()
        inferred = time.perf_counter()
        arrays = {k: result[k].numpy() for k in outputs}
        return Computed(arrays, placed - started, inferred - placed, time.perf_counter() - inferred)

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        return run_timed(signature, inputs, outputs).outputs

    return LoadedModel(name, version, path, defs, signature_specs(defs), run,
                       unload=lambda: functions.clear(), run_timed=run_timed)


def _nothing() -> None:
    return None


# time.sleep() on these VMs overshoots by ~0.1 ms at the median and ~0.2-0.4 ms at p99: sleep until
# this long before the deadline, then yield the GIL in a loop up to it, so a fixed delay is exact
# to a few microseconds (and the server's core is awake when the answer is due).
_SPIN_MARGIN_S = 0.0005


def hold_until(deadline: float) -> None:
    """Return at `deadline` (time.perf_counter() seconds): sleep most of the way, then yield-spin."""
    remaining = deadline - time.perf_counter()
    if remaining > _SPIN_MARGIN_S:
        time.sleep(remaining - _SPIN_MARGIN_S)
    while time.perf_counter() < deadline:
        os.sched_yield()  # ~1 us, and releases the GIL (time.sleep(0) costs ~85 us here)


class _Stall:
    """A server-wide stall window: every `every_s` seconds, calls wait out `stall_ms`."""

    def __init__(self, stall_ms: float, every_s: float) -> None:
        self.stall_s = stall_ms / 1000.0
        self.every_s = every_s
        self.origin = time.perf_counter()

    def wait(self) -> None:
        if self.stall_s <= 0 or self.every_s <= 0:
            return
        phase = (time.perf_counter() - self.origin) % self.every_s
        if phase < self.stall_s:
            hold_until(time.perf_counter() + self.stall_s - phase)


def _zeros(spec: TensorSpec, batch: int) -> np.ndarray:
    inner = tuple(d if d >= 0 else 1 for d in (spec.shape or (-1,))[1:])
    return np.zeros((batch,) + inner, dtype=spec.numpy_dtype)


def _load_null(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    defs = read_signature_defs(path)
    specs = signature_specs(defs)
    delay_s = options.null_delay_ms / 1000.0
    stall = _Stall(options.null_stall_ms, options.null_stall_every_s)
    lock = threading.Lock()  # one "device": delays of concurrent calls queue up, as a busy model would

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        batch = len(next(iter(inputs.values())))
        stall.wait()
        if delay_s > 0:
            with lock:
                hold_until(time.perf_counter() + delay_s)
        out_specs = specs[signature].outputs
        return {k: _zeros(out_specs[k], batch) for k in outputs}

    # No device: LoadedModel.timed counts the whole call (stall, delay, zeros) as inference.
    return LoadedModel(name, version, path, defs, specs, run)


def _load_jax(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    from serving.server.jax_backend import load_jax  # JAX and Keras load only in a jax server

    return load_jax(name, version, path, options)


def _load_torch(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    from serving.server.torch_backend import load_torch  # PyTorch and Keras load only in a torch server

    return load_torch(name, version, path, options)


# Backend registry: CLI choices are its keys (the names of serving.server.runtimes.Backend).
BACKENDS: dict[str, Callable[[str, int, Path, BackendOptions], LoadedModel]] = {
    "savedmodel": _load_savedmodel,
    "jax": _load_jax,
    "torch": _load_torch,
    "null": _load_null,
}


def load_model(backend: str, name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    """Load `path` (one version directory) with the named backend."""
    try:
        loader = BACKENDS[backend]
    except KeyError:
        raise ValueError(f"unknown backend {backend!r}; choose one of {sorted(BACKENDS)}") from None
    return loader(name, version, Path(path), options)
