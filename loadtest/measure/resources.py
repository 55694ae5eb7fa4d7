"""What one server had while a sweep measured it: its cores, CPU model and GPUs, recorded with every cell.

Sizing (`loadtest.report.sizing.instances`) maps the measured server, one replica, onto the instances a
price file lists; for that it needs the replica's size in the units people rent: the cores it was
pinned to (its CPU affinity, or its container's cpuset) or its container's CPU limit, the CPU model, and its GPUs.

The cores come from the same source the telemetry samples (`loadtest.measure.device_sources`), so the
record says what the server could use, not what the plan asked for. A server given by address has
no known pid or container: its cores are None, with source "unknown".

Not for: sampling how busy the server was (`loadtest.measure.telemetry`) or pricing (`loadtest.report.sizing`).
"""

from __future__ import annotations

from collections.abc import Iterable

from loadtest.evidence.cell_parts import ServerResources
from loadtest.measure.device_sources import CgroupSource, ProcessSource, ServerSource
from serving.endpoint import Device, ServedEndpoint


def core_list(cores: Iterable[int]) -> str:
    """A `taskset -c` style list: {0, 1, 2, 5} -> "0-2,5"."""
    runs: list[list[int]] = []  # [first, last] of each run of consecutive cores
    for core in sorted(set(cores)):
        if runs and core == runs[-1][1] + 1:
            runs[-1][1] = core
        else:
            runs.append([core, core])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def cpu_resources(source: ServerSource | None, machine_cores: int) -> tuple[float | None, str]:
    """The server's cores and where that figure comes from."""
    if isinstance(source, ProcessSource):
        if source.cpu_set and len(source.cpu_set) < machine_cores:
            return float(len(source.cpu_set)), f"pinned cores {core_list(source.cpu_set)}"
        return source.cores, f"affinity (all {machine_cores} cores)"
    if isinstance(source, CgroupSource):
        if source.cpu_set and source.cores == len(source.cpu_set):  # a replica shape: the cores it was given
            return source.cores, f"container cpuset {core_list(source.cpu_set)}"
        if source.cores < machine_cores:
            return source.cores, "container CPU limit"
        return source.cores, f"container without a CPU limit (all {machine_cores} cores)"
    return None, "unknown"


def server_resources(endpoint: ServedEndpoint, source: ServerSource | None, machine_cores: int,
                     host_cpu_model: str) -> ServerResources:
    """The record's `server_resources`.

    A local server (its pid or container known) runs on this host's CPU; a GPU server is taken to
    use one GPU, the one it reported (`device_name`), which is the one the telemetry samples."""
    cpus, where = cpu_resources(source, machine_cores)
    local = endpoint.pid is not None or endpoint.container is not None
    cpu_model = host_cpu_model if local else (endpoint.device_name if endpoint.device == Device.CPU else "")
    gpu = endpoint.device == Device.GPU
    return ServerResources(cpus, cpu_model, 1 if gpu else 0, endpoint.device_name if gpu else "", where)
