"""Where one request's time went inside the server: one chain of `time.perf_counter()` stamps, cut into phases.

A `PhaseClock` starts when a Predict arrives; each step ends with `lap(phase)`, which adds the time
since the previous stamp to that phase, so the phases of a request sum to `total_s()` (the latency the
server records in `request_latency`) up to float rounding. Model time comes from the backend's own
split (`Computed`); with batching, from the batch's shared stamps (`BatchTiming`): each request in a
batch sees the batch's assemble and compute times, and its own queue and deliver times.

Not for: exporting the phases (`serving.server.handling.metrics`) or the names of the phases
(`serving.protocol.names.REQUEST_PHASES`, whose order the indices below follow).
"""

from __future__ import annotations

import time
from typing import NamedTuple

from serving.protocol.names import REQUEST_PHASES
from serving.server.runtimes.model_spec import Computed

DECODE, VALIDATE, QUEUE, ASSEMBLE, COMPUTE_INPUT, COMPUTE_INFER, COMPUTE_OUTPUT, DELIVER, ENCODE, HANDOFF = range(10)
assert REQUEST_PHASES[COMPUTE_INFER] == "compute_infer" and REQUEST_PHASES[HANDOFF] == "handoff"


class BatchTiming(NamedTuple):
    """The stamps one batch shares with every request in it (perf_counter seconds)."""

    started: float  # taken off the queue
    assembled: float  # merged and padded; the model call starts
    input_s: float
    infer_s: float
    computed: float  # the model call returned


class PhaseClock:
    """One request's stamps: `durations[i]` is the seconds spent in REQUEST_PHASES[i]."""

    __slots__ = ("started", "last", "durations")

    def __init__(self) -> None:
        self.started = self.last = time.perf_counter()
        self.durations = [0.0] * len(REQUEST_PHASES)

    def lap(self, phase: int) -> float:
        """End the current step: the time since the last stamp goes to `phase`; returns the new stamp."""
        now = time.perf_counter()
        self.durations[phase] += now - self.last
        self.last = now
        return now

    def computed(self, computed: Computed) -> None:
        """End an unbatched model call: the backend's input and inference split, the rest is output."""
        now = time.perf_counter()
        d = self.durations
        d[COMPUTE_INPUT] += computed.input_s
        d[COMPUTE_INFER] += computed.infer_s
        d[COMPUTE_OUTPUT] += (now - self.last) - computed.input_s - computed.infer_s
        self.last = now

    def batched(self, timing: BatchTiming) -> None:
        """End a wait for a batch: queued until it started, its shared phases, then delivery up to now."""
        now = time.perf_counter()
        d = self.durations
        d[QUEUE] += timing.started - self.last
        d[ASSEMBLE] += timing.assembled - timing.started
        d[COMPUTE_INPUT] += timing.input_s
        d[COMPUTE_INFER] += timing.infer_s
        d[COMPUTE_OUTPUT] += (timing.computed - timing.assembled) - timing.input_s - timing.infer_s
        d[DELIVER] += now - timing.computed
        self.last = now

    def remote(self, durations_s: list[float] | tuple[float, ...]) -> None:
        """End a call run in another process (serving.pool's owner): its own phases as it timed them, and the
        rest of the time since the last stamp as the hand-off there and back."""
        now = time.perf_counter()
        d = self.durations
        for i, seconds in enumerate(durations_s):
            d[i] += seconds
        d[HANDOFF] += max(0.0, (now - self.last) - sum(durations_s))
        self.last = now

    def total_s(self) -> float:
        """Seconds from the first stamp to the last: the sum of the phases."""
        return self.last - self.started


__all__ = ["ASSEMBLE", "BatchTiming", "COMPUTE_INFER", "COMPUTE_INPUT", "COMPUTE_OUTPUT", "DECODE", "DELIVER",
           "ENCODE", "HANDOFF", "PhaseClock", "QUEUE", "VALIDATE"]
