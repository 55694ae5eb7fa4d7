"""Device telemetry of a cell: how busy the server's CPU and GPU were during its measured window.

A `Sampler` reads the server's sources (`loadtest.measure.device_sources`) every ~150 ms from a
background thread of the sweep process while a cell's Locust runs, keeping timestamped samples of
cumulative CPU seconds and current levels. `window_telemetry` turns the samples inside the measured
window into one `Telemetry` (pure arithmetic, tested with hand-made samples): CPU % of the
server's allowed cores (mean over the window and the highest ~150 ms interval), the highest
resident memory, GPU utilisation (mean, max), the highest GPU memory and the mean power.

The Locust run's summary says when its window opened (`LoadSummary.window_start_unix_s`), and
`measured_window` takes the window from there. A summary without it (a failed run) falls back
on the `measure_s` before Locust wrote its summary: at most a drain late.

The sampler costs one /proc read (and one NVML query) per ~150 ms, and keeps its thread off the
cores the server is pinned to, so it does not take CPU from what it measures.

Not for: reading the sources (`loadtest.measure.device_sources`) or the server's own metrics
(`loadtest.measure.scrape`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.load.summary import LoadSummary
from loadtest.measure.device_sources import (
    GpuReading,
    GpuSource,
    ServerReading,
    ServerSource,
    Unavailable,
    open_gpu,
    server_source,
)
from serving.endpoint import ServedEndpoint

INTERVAL_S = 0.15
MIB = 1024 * 1024


@dataclass(frozen=True)
class Sample:
    t_s: float  # wall-clock time (time.time), to match the summary file's time
    server: ServerReading
    gpu: GpuReading | None


@dataclass(frozen=True)
class Telemetry:
    """The device figures of one cell; None where not measured, with the reason in `notes`."""

    server_cpu_percent: float | None = None  # mean over the window, % of the server's allowed cores
    server_cpu_percent_max: float | None = None  # the busiest sampling interval
    server_cpu_cores: float | None = None  # the cores the server may use (affinity or cgroup quota)
    server_rss_mib: float | None = None  # highest resident (or, for a container, charged) memory
    server_pss_mib: float | None = None  # highest PSS summed over the processes (or, for a container, charged)
    gpu_utilization_percent: float | None = None  # mean of NVML's utilisation readings
    gpu_utilization_percent_max: float | None = None
    gpu_memory_mib: float | None = None  # highest memory used on the GPU (all processes)
    gpu_power_w: float | None = None  # mean power draw
    notes: dict = field(default_factory=dict)  # "server" / "gpu" -> why its figures are None


def cpu_percents(samples: Sequence[Sample], cores: float) -> tuple[float | None, float | None]:
    """Mean and highest-interval CPU % of `cores` between the first and last sample with a CPU reading."""
    timed = [(s.t_s, s.server.cpu_s) for s in samples if s.server.cpu_s is not None]
    if len(timed) < 2 or cores <= 0 or timed[-1][0] <= timed[0][0]:
        return None, None
    # /proc counts CPU time in 10 ms ticks, so one ~150 ms interval reads up to ~7% high or low: both figures are
    # capped at 100. The mean is the intervals' time-weighted mean, so it never exceeds their maximum; capped alike,
    # it cannot exceed the capped maximum either (one capped and the other not once read 100.1 against 100.0).
    per_interval = [(c1 - c0) / (t1 - t0) / cores * 100 for (t0, c0), (t1, c1) in zip(timed, timed[1:]) if t1 > t0]
    mean = (timed[-1][1] - timed[0][1]) / (timed[-1][0] - timed[0][0]) / cores * 100
    return round(min(100.0, mean), 1), round(min(100.0, max(per_interval)), 1)


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def _max(values: Sequence[float], scale: float = 1.0) -> float | None:
    return round(max(values) / scale, 1) if values else None


def gpu_figures(samples: Sequence[Sample]) -> dict:
    """Mean/max utilisation, highest memory (MiB) and mean power of the GPU readings."""
    readings = [s.gpu for s in samples if s.gpu is not None]
    util = [r.utilization_percent for r in readings if r.utilization_percent is not None]
    memory = [float(r.memory_bytes) for r in readings if r.memory_bytes is not None]
    power = [r.power_w for r in readings if r.power_w is not None]
    return {"gpu_utilization_percent": _mean(util), "gpu_utilization_percent_max": _max(util),
            "gpu_memory_mib": _max(memory, MIB), "gpu_power_w": _mean(power)}


def window_telemetry(samples: Sequence[Sample], start_s: float, end_s: float, cores: float | None,
                     notes: dict) -> Telemetry:
    """The figures of the samples taken in [start_s, end_s]; `notes` say why a part has none."""
    inside = [s for s in samples if start_s <= s.t_s <= end_s]
    notes = dict(notes)
    mean, peak = cpu_percents(inside, cores) if cores else (None, None)
    if mean is None and "server" not in notes:
        notes["server"] = f"fewer than 2 CPU readings in the {end_s - start_s:.1f} s window"
    gpu = gpu_figures(inside) if "gpu" not in notes else {}
    if "gpu" not in notes and gpu["gpu_utilization_percent"] is None:
        notes["gpu"] = "NVML gave no utilisation reading in the window"
    rss = [float(s.server.memory_bytes) for s in inside if s.server.memory_bytes is not None]
    pss = [float(s.server.pss_bytes) for s in inside if s.server.pss_bytes is not None]
    return Telemetry(server_cpu_percent=mean, server_cpu_percent_max=peak,
                     server_cpu_cores=cores if mean is not None else None, server_rss_mib=_max(rss, MIB),
                     server_pss_mib=_max(pss, MIB),
                     notes=notes, **gpu)


def measured_window(summary: LoadSummary | None, summary_path: Path, measure_s: float,
                    ended_s: float) -> tuple[float, float]:
    """The measured window: from the summary's own start when it has one; else the `measure_s` before
    Locust wrote its summary (after draining), or before `ended_s` without one."""
    if summary is not None and summary.window_start_unix_s is not None:
        return summary.window_start_unix_s, summary.window_start_unix_s + measure_s
    try:
        end = summary_path.stat().st_mtime
    except OSError:
        end = ended_s
    return end - measure_s, end


class Sampler:
    """Samples a server (and its GPU) from a background thread until stopped."""

    def __init__(self, server: ServerSource | None, gpu: GpuSource | None, notes: dict,
                 interval_s: float = INTERVAL_S, clock: Callable[[], float] = time.time) -> None:
        self.server, self.gpu, self.notes = server, gpu, dict(notes)
        self.interval_s, self.clock = interval_s, clock
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="device-telemetry", daemon=True)

    @property
    def cores(self) -> float | None:
        return self.server.cores if self.server is not None else None

    def take(self) -> None:
        """One sample now (the thread calls it; tests call it with a fake clock)."""
        server = self.server.read() if self.server is not None else ServerReading(None, None)
        self.samples.append(Sample(self.clock(), server, self.gpu.read() if self.gpu is not None else None))

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        if self.gpu is not None:
            self.gpu.close()

    def window(self, start_s: float, end_s: float) -> Telemetry:
        return window_telemetry(list(self.samples), start_s, end_s, self.cores, self.notes)

    def _run(self) -> None:
        keep_off(self.server.cpu_set if self.server is not None else frozenset())
        self.take()
        while not self._stop.wait(self.interval_s):
            self.take()
        self.take()


def keep_off(server_cpus: frozenset[int]) -> None:
    """Move the calling thread off the server's pinned cores, when it has any others (Linux: per thread)."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return
    others = allowed - server_cpus
    if server_cpus and others and others != allowed:
        try:
            os.sched_setaffinity(0, others)
        except OSError:
            pass


def sampler_for(endpoint: ServedEndpoint, interval_s: float = INTERVAL_S) -> Sampler:
    """A (not yet started) sampler of the endpoint's server and, when it serves on a GPU, GPU 0."""
    server, gpu = server_source(endpoint), open_gpu(endpoint)
    notes = {part: source.reason for part, source in (("server", server), ("gpu", gpu))
             if isinstance(source, Unavailable)}
    return Sampler(None if isinstance(server, Unavailable) else server,
                   None if isinstance(gpu, Unavailable) else gpu, notes, interval_s)


@contextmanager
def sampling(endpoint: ServedEndpoint, interval_s: float = INTERVAL_S) -> Iterator[Sampler]:
    """Sample the endpoint's devices for the duration of the block (the thread stopped however it ends)."""
    sampler = sampler_for(endpoint, interval_s).start()
    try:
        yield sampler
    finally:
        sampler.stop()
