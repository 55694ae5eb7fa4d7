"""The `null` runtime: no model run. It reads only the SavedModel's signatures and answers zeros of the output
shapes, after an optional fixed delay or periodic stall, and optionally a fixed CPU time spent on the calling
thread (`--null_cpu_ms`: busy, holding the GIL, so one process spends at most one core and more frontends on more
cores serve more: scaling over cores that is real and known).

It measures the serving path's own cost with the exact request path of a real model, and lets tests provoke
queueing (a fixed service time) or stalls independent of the load.

Not for: the registry (`serving.server.runtimes`).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from model_export.provenance import cpu_model_name
from serving.protocol.generated import use_protos_without_runtime
from serving.protocol.runtime_names import names_of
from serving.server.runtimes.runtime import RoundTrip, Runtime

if TYPE_CHECKING:
    from serving.server.runtimes.model_spec import BackendOptions, LoadedModel, TensorSpec

NULL_GPU_NAME = "no GPU used (null backend)"
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


def spend_cpu(seconds: float) -> None:
    """Keep this thread busy until it has used `seconds` of CPU time (its own clock: time spent waiting for a core,
    or for the GIL, does not count)."""
    started = time.thread_time()
    while time.thread_time() - started < seconds:
        pass


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


def load(name: str, version: int, path: Path, options: BackendOptions) -> LoadedModel:
    from serving.server.runtimes.model_spec import LoadedModel, read_signature_defs, signature_specs

    defs = read_signature_defs(path)
    specs = signature_specs(defs)
    delay_s = options.null_delay_ms / 1000.0
    cpu_s = options.null_cpu_ms / 1000.0
    stall = _Stall(options.null_stall_ms, options.null_stall_every_s)
    lock = threading.Lock()  # one "device": delays of concurrent calls queue up, as a busy model would

    def run(signature: str, inputs: dict[str, np.ndarray], outputs: list[str]) -> dict[str, np.ndarray]:
        batch = len(next(iter(inputs.values())))
        stall.wait()
        if delay_s > 0:
            with lock:
                hold_until(time.perf_counter() + delay_s)
        if cpu_s > 0:
            spend_cpu(cpu_s)
        out_specs = specs[signature].outputs
        return {k: _zeros(out_specs[k], batch) for k in outputs}

    # No device: the runner's timed_call counts the whole call (stall, delay, zeros) as inference.
    return LoadedModel(name, version, path, defs, specs, run)


def device_name(device: str) -> str:
    """The CPU's model; on --device gpu, a name saying no GPU is used (the runtime touches none)."""
    return cpu_model_name() if device == "cpu" else NULL_GPU_NAME


def round_trip(device: str) -> RoundTrip:
    return None, "not applicable: the null backend runs nothing on a device"


def prepare() -> None:
    """TensorFlow's protos without its runtime: the null runtime reads signatures and builds zeros, and a server
    that imported all of TensorFlow for that spent ~4 s and ~500 MB starting (the tool ceiling's twins are null)."""
    use_protos_without_runtime()


RUNTIME = Runtime(names_of("null"), load, device_name, round_trip, prepare=prepare, runs_model=False)

__all__ = ["NULL_GPU_NAME", "RUNTIME", "hold_until", "spend_cpu"]
