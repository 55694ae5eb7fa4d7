"""Python's garbage collector inside the server: each collection's pause, and the start-up heap frozen.

A collection of the oldest generation walks every tracked object; a server that has loaded TensorFlow
or JAX and a model holds ~300,000 of them, and one such walk measured 110-120 ms on the 2-core build
machine (a single `gc.collect()` with the jax backend loaded). A pause like that holds every request
thread (the GIL), at a pace set by allocations, not by the load's latency objective, which is how the
first H100 run's stalls looked. Two things here:

- `GcPauses` times every collection through `gc.callbacks` (start -> stop, per generation) into a µs
  histogram, GC_PAUSE{generation}, beside the request phases, so a run shows whether its stalls were
  collections (a histogram, not a guess);
- `freeze_start_up_heap()` (`--gc_freeze`, on by default) collects once and moves everything alive
  after start-up (the runtime, the model, the protos) into the permanent generation (`gc.freeze()`),
  so later collections walk only what requests allocate.

Not for: request phases or exporting the other metrics (`serving.server.handling.metrics`).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator, Sequence

from prometheus_client.core import HistogramMetricFamily

from serving.protocol.names import GC_PAUSE
from serving.server.handling.bucket_counts import bucket_of, cumulative_buckets, empty_counts

GC_BUCKETS_US = [10 * 1.5 ** i for i in range(30)]  # 10 us .. ~1.9 s


def freeze_start_up_heap() -> int:
    """Collect once, then freeze every object alive now; returns how many were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class GcPauses:
    """GC_PAUSE{generation}: every collection's pause in µs, as a Prometheus collector.

    The callback runs on whichever thread triggered the collection, with the GIL held, so it only
    takes a stamp and adds to plain counts (no lock needed beyond the GIL for these few operations,
    but one is taken for the exposition's consistent copy).
    """

    def __init__(self, bounds_us: Sequence[float] = GC_BUCKETS_US) -> None:
        self._bounds = list(bounds_us)
        self._lock = threading.Lock()
        self._counts: dict[int, list[int]] = {}
        self._sums: dict[int, float] = {}
        self._started = 0.0

    def install(self) -> None:
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)

    def uninstall(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        self.observe(int(info.get("generation", 0)), (time.perf_counter() - self._started) * 1e6)

    def observe(self, generation: int, pause_us: float) -> None:
        """One collection of `generation` that paused the process for `pause_us`."""
        with self._lock:
            counts = self._counts.setdefault(generation, empty_counts(self._bounds))
            counts[bucket_of(self._bounds, pause_us)] += 1
            self._sums[generation] = self._sums.get(generation, 0.0) + pause_us

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(GC_PAUSE, "Pause (in microseconds) of each Python garbage collection in "
                                       "the server process, per generation.", labels=["generation"])
        with self._lock:
            snapshot = {g: (list(c), self._sums[g]) for g, c in self._counts.items()}
        for generation, (counts, total) in sorted(snapshot.items()):
            family.add_metric([str(generation)], cumulative_buckets(self._bounds, counts), total)
        yield family


__all__ = ["GC_BUCKETS_US", "GcPauses", "freeze_start_up_heap"]
