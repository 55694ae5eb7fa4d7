"""The device's own floor: the model alone on its device per padded batch size, and a bare round trip.

Measured once at start, after warm-up and before the server reports ready, by calling the backend
directly with zeros of the signature's inputs: the latency no request can beat and the images/s no
server on this device can pass, whatever the serving path around it costs. Beside it, the round trip
of a trivial computation to the device and back (`device_put` + add + fetch on JAX, `tf.constant` +
`tf.add` + `.numpy()` on TensorFlow) bounds any single device call.

A batch size's latency is one caller's. On a CPU its images/s come from one caller per core the server
was given (`callers_for`: its CPU affinity), each a thread calling the model back to back at once: their
calls' images over the wall time they ran together, so "the CPU alone" is what those cores do, not one
caller's share of them (the runtimes release the GIL while the model runs). A GPU has one caller: one
process owns it and calls it one batch at a time, as the server does. Where that runtime's own dispatch
is what costs (JAX on a GPU: ~0.6 ms per call where the GPU's own round trip is ~0.04 ms), the device's
own round trip measured by another runtime (PyTorch's, probed by the device bundle before it starts a
server, handed over in `DEVICE_ROUND_TRIP_ENV`) is kept beside it, so a report can tell the two apart.

`measure_floor` is pure apart from the calls it times, so the load test can call it in-process too
(for a TF Serving container's host). Not for: the per-request phases or
exporting the figures (`serving.server.handling.metrics`, `serving.server.api.grpc_api.server_info`).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np

from serving.server.handling.runner import (  # the sizes follow the alone-or-batched choice
    NO_BATCHING_SIZES,
    floor_batch_sizes,
)
from serving.server.runtimes.model_spec import LoadedModel, TensorSpec

SOURCE_EMBEDDED = "embedded server at start, after warm-up"
MAX_RUNS = 500  # per batch size: enough for a p99; the budget usually stops it first
ROUND_TRIP_SHARE = 0.1  # of the budget, for the round trip
DEVICE_ROUND_TRIP_ENV = "MNIST_BENCH_DEVICE_ROUND_TRIP_US"  # the device's own round trip, µs, measured elsewhere
DEVICE_ROUND_TRIP_NOTE_ENV = "MNIST_BENCH_DEVICE_ROUND_TRIP_NOTE"  # what measured it


@dataclass(frozen=True)
class BatchFloor:
    """The model alone on its device at one padded batch size."""

    batch_size: int
    latency_us: float  # median
    latency_p99_us: float
    images_per_s: float  # batch_size / median seconds
    runs: int


@dataclass(frozen=True)
class DeviceFloor:
    """Every batch size measured within the budget, and the bare round trip (None, with the reason, when not)."""

    source: str
    device: str  # "cpu" or "gpu"
    runtime: str
    batches: tuple[BatchFloor, ...]
    round_trip_us: float | None
    round_trip_note: str
    budget_s: float
    device_round_trip_us: float | None = None  # the device's own, by another runtime (None: not known)
    device_round_trip_note: str = ""
    callers: int = 1  # threads calling the model at once (a CPU: one per core the server was given)

    def as_dict(self) -> dict:
        """The JSON form served in server_info["device_floor"]."""
        return {"source": self.source, "device": self.device, "runtime": self.runtime,
                "batches": [asdict(b) for b in self.batches], "round_trip_us": self.round_trip_us,
                "round_trip_note": self.round_trip_note, "budget_s": self.budget_s,
                "device_round_trip_us": self.device_round_trip_us,
                "device_round_trip_note": self.device_round_trip_note, "callers": self.callers}

    @classmethod
    def from_dict(cls, data: dict) -> DeviceFloor:
        """Inverse of as_dict (numbers may arrive as floats, e.g. through a protobuf Struct)."""
        batches = tuple(BatchFloor(int(b["batch_size"]), float(b["latency_us"]), float(b["latency_p99_us"]),
                                   float(b["images_per_s"]), int(b["runs"])) for b in data["batches"])
        trip, own = data.get("round_trip_us"), data.get("device_round_trip_us")
        return cls(str(data["source"]), str(data["device"]), str(data["runtime"]), batches,
                   None if trip is None else float(trip), str(data.get("round_trip_note", "")),
                   float(data["budget_s"]), None if own is None else float(own),
                   str(data.get("device_round_trip_note", "")), int(data.get("callers", 1)))


def device_round_trip_given(environ: Mapping[str, str] | None = None) -> tuple[float | None, str]:
    """The device's own round trip (µs) and what measured it, as handed over in `DEVICE_ROUND_TRIP_ENV`;
    (None, "") when not given or not a positive number."""
    given: Mapping[str, str] = os.environ if environ is None else environ
    try:
        value = float(given.get(DEVICE_ROUND_TRIP_ENV, ""))
    except ValueError:
        return None, ""
    return (value, given.get(DEVICE_ROUND_TRIP_NOTE_ENV, "")) if value > 0 else (None, "")


def not_measured(reason: str, *, device: str, runtime: str, source: str = SOURCE_EMBEDDED) -> DeviceFloor:
    """A floor with no figures, saying why (e.g. `--device_floor_s 0`)."""
    return DeviceFloor(source, device, runtime, (), None, f"not measured: {reason}", 0.0)


def zeros_for(spec: TensorSpec, batch: int) -> np.ndarray:
    """Zeros of one input's dtype and shape with `batch` rows (unknown inner dims as 1)."""
    inner = tuple(d if d >= 0 else 1 for d in (spec.shape or (-1,))[1:])
    return np.zeros((batch,) + inner, dtype=spec.numpy_dtype)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1) of sorted values."""
    index = max(0, min(len(sorted_values) - 1, int(np.ceil(q * len(sorted_values))) - 1))
    return sorted_values[index]


def time_calls(call: Callable[[], object], budget_s: float, max_runs: int = MAX_RUNS,
               warm_up: bool = True, clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Seconds of each timed call (on `clock`): one untimed call first (`warm_up`), then at least one timed, until
    the budget is spent."""
    if warm_up:
        call()
    deadline = clock() + budget_s
    times: list[float] = []
    while len(times) < max_runs and (not times or clock() < deadline):
        started = clock()
        call()
        times.append(clock() - started)
    return times


def time_calls_at_once(call: Callable[[], object], callers: int, budget_s: float, max_runs: int = MAX_RUNS,
                       clock: Callable[[], float] = time.perf_counter) -> tuple[list[float], float]:
    """`callers` threads calling at once, each as `time_calls` does (every one warmed up before any is timed):
    (seconds of every timed call, the wall seconds from the first timed call to the last one's end; on `clock`)."""
    times: list[list[float]] = [[] for _ in range(callers)]
    ready = threading.Barrier(callers + 1)
    spans: list[tuple[float, float]] = []

    def caller(index: int) -> None:
        call()
        ready.wait()
        began = clock()
        times[index] = time_calls(call, budget_s, max_runs, warm_up=False, clock=clock)
        spans.append((began, clock()))

    threads = [threading.Thread(target=caller, args=(i,), name=f"floor-{i}") for i in range(callers)]
    for thread in threads:
        thread.start()
    ready.wait()
    for thread in threads:
        thread.join()
    wall = max(end for _, end in spans) - min(begin for begin, _ in spans)
    return [t for caller_times in times for t in caller_times], wall


def callers_for(device: str) -> int:
    """One caller per core this process may use on a CPU (its affinity: the server's cores); one on a GPU."""
    return len(os.sched_getaffinity(0)) if device == "cpu" else 1


def batch_floor(batch_size: int, times_s: list[float], images_per_s: float | None = None,
                runs: int | None = None) -> BatchFloor:
    """Median and p99 of one caller's calls; images/s = batch / median unless measured otherwise (`images_per_s`:
    callers at once, `runs` then counting their calls too)."""
    ordered = sorted(times_s)
    median = statistics.median(ordered)
    if images_per_s is None:
        images_per_s = batch_size / median if median > 0 else float("inf")
    return BatchFloor(batch_size, median * 1e6, _percentile(ordered, 0.99) * 1e6, images_per_s,
                      len(ordered) if runs is None else runs)


def floor_of(batch_size: int, call: Callable[[], object], callers: int, budget_s: float,
             clock: Callable[[], float] = time.perf_counter) -> BatchFloor:
    """One batch size's floor: one caller's latency; with `callers` > 1, half the budget goes to them all at once,
    whose calls' images over their wall time are the images/s."""
    if callers <= 1:
        return batch_floor(batch_size, time_calls(call, budget_s, clock=clock))
    alone = time_calls(call, budget_s / 2, clock=clock)
    together, wall_s = time_calls_at_once(call, callers, budget_s / 2, clock=clock)
    rate = batch_size * len(together) / wall_s if wall_s > 0 else float("inf")
    return batch_floor(batch_size, alone, rate, len(alone) + len(together))


def measure_floor(model: LoadedModel, signature: str, batch_sizes: Sequence[int], budget_s: float,
                  round_trip: Callable[[], None] | None, *, device: str = "cpu", runtime: str = "",
                  round_trip_note: str = "", source: str = SOURCE_EMBEDDED, callers: int = 1) -> DeviceFloor:
    """Time `model.run` on zeros at each batch size (ascending; sizes the budget no longer reaches are left out),
    by `callers` threads at once, and `round_trip` (None: not applicable, `round_trip_note` says why), within
    about `budget_s` seconds."""
    spec = model.signatures[signature]
    outputs = list(spec.outputs)
    started = time.perf_counter()
    trip_us = None
    if round_trip is not None:
        trip_us = statistics.median(time_calls(round_trip, budget_s * ROUND_TRIP_SHARE)) * 1e6
    sizes = sorted(set(batch_sizes))
    batches = []
    for i, size in enumerate(sizes):
        left = budget_s - (time.perf_counter() - started)
        if left <= 0:
            break
        zeros = {alias: zeros_for(tensor, size) for alias, tensor in spec.inputs.items()}
        call = partial(model.run, signature, zeros, outputs)
        batches.append(floor_of(size, call, callers, left / (len(sizes) - i)))
    note = round_trip_note or ("measured" if round_trip is not None else "not measured")
    own_us, own_note = device_round_trip_given()
    return DeviceFloor(source, device, runtime, tuple(batches), trip_us, note, budget_s, own_us, own_note,
                       max(1, callers))


__all__ = ["BatchFloor", "DEVICE_ROUND_TRIP_ENV", "DEVICE_ROUND_TRIP_NOTE_ENV", "DeviceFloor", "MAX_RUNS",
           "NO_BATCHING_SIZES", "SOURCE_EMBEDDED", "batch_floor", "callers_for", "floor_of", "device_round_trip_given",
           "floor_batch_sizes", "measure_floor", "not_measured", "time_calls", "time_calls_at_once",
           "zeros_for"]
