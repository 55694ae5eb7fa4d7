"""How busy the serving device was: the server's CPU % and GPU utilisation beside throughput, and a
note where a configuration's peak throughput left its device far from busy, so the bottleneck is
elsewhere (the load generator, the network, or the server's request path rather than the model).

Not for: measuring them (`loadtest.sweep.telemetry`) or the tables' other columns (`loadtest.analysis.details`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.analysis.answers import Config, config_of
from loadtest.analysis.blocks import Table, cell_mark
from loadtest.analysis.formatting import MISSING
from loadtest.analysis.formatting import number as fmt
from loadtest.analysis.series import level_name, load_level, sustained
from loadtest.records import CellResult

CPU_BUSY_PERCENT = 60.0  # a CPU server below this share of its cores at peak is far from busy
GPU_BUSY_PERCENT = 50.0  # a GPU below this utilisation at peak is far from busy
ELSEWHERE = "the bottleneck is elsewhere (client, network, or the server's request path)"


def busy_text(cpu_percent: float | None, gpu_percent: float | None) -> str:
    """`GPU 40%, CPU 12%`, `CPU 85%`, or "—" when neither was measured."""
    parts = [f"{name} {value:.0f}%" for name, value in (("GPU", gpu_percent), ("CPU", cpu_percent))
             if value is not None]
    return ", ".join(parts) or MISSING


def device_busy(cell: CellResult) -> tuple[str, float, float] | None:
    """The serving device's busy % and its far-from-busy limit: GPU utilisation on a GPU server, else
    the server's CPU % of its cores; None when that was not measured."""
    if cell.server.device == "gpu":
        util = cell.gpu_utilization_percent
        return None if util is None else ("GPU", util, GPU_BUSY_PERCENT)
    cpu = cell.server_cpu_percent
    return None if cpu is None else ("CPU", cpu, CPU_BUSY_PERCENT)


def idle_note(cell: CellResult) -> str:
    """At a peak cell: the note when its device was far from busy, else ""."""
    busy = device_busy(cell)
    if busy is None or busy[1] >= busy[2]:
        return ""
    return f"the device was {busy[1]:.0f}% busy at peak: {ELSEWHERE}"


def unmeasured_reason(cell: CellResult) -> str:
    """Why a cell has no busy figure for its device (records made before telemetry say nothing)."""
    part = "gpu" if cell.server.device == "gpu" else "server"
    return f"not measured: {cell.telemetry_note.get(part, 'no device telemetry in this record')}"


def peak_by_config(results: Sequence[CellResult]) -> dict[Config, CellResult]:
    """Each configuration's valid cell with the highest throughput (images/s), overloaded cells skipped."""
    peaks: dict[Config, CellResult] = {}
    for cell in results:
        config = config_of(cell)
        if sustained(cell) and (config not in peaks or cell.throughput_ips > peaks[config].throughput_ips):
            peaks[config] = cell
    return peaks


def device_use_table(results: Sequence[CellResult], labels: Mapping[Config, str]) -> Table:
    """One row per configuration at its peak valid throughput: how busy its CPU and GPU were."""
    rows, marks = [], []
    for config, c in sorted(peak_by_config(results).items()):
        note = idle_note(c) or ("" if device_busy(c) else unmeasured_reason(c))
        rows.append((labels[config], config.device, fmt(c.throughput_ips), fmt(c.throughput_rps),
                     f"{level_name(c.load.mode)} {load_level(c):g} (req batch {c.load.request_batch_size})",
                     fmt(c.server_cpu_percent, 0), fmt(c.server_cpu_percent_max, 0), fmt(c.server_cpu_cores, 1),
                     fmt(c.server_rss_mib, 0), fmt(c.gpu_utilization_percent, 0),
                     fmt(c.gpu_utilization_percent_max, 0), fmt(c.gpu_memory_mib, 0), fmt(c.gpu_power_w, 0), note))
        marks.append(cell_mark(c))
    return Table("Device use at peak throughput",
                 "Each configuration's valid cell with the highest throughput (never an overloaded one), and how "
                 "busy its device was over "
                 "the measured window: the server's CPU as a share of the cores it may use (mean, and its busiest "
                 "~150 ms), its highest resident memory, and the GPU's utilisation, memory and power (NVML). "
                 f"A CPU server below {CPU_BUSY_PERCENT:.0f}% or a GPU below {GPU_BUSY_PERCENT:.0f}% at its peak "
                 "is far from busy: more load would not come from a faster device.",
                 ("configuration", "device", "images/s", "requests/s", "at", "server CPU %", "server CPU max %",
                  "server cores", "server RSS MiB", "GPU util %", "GPU util max %", "GPU memory MiB", "GPU power W",
                  "note"), tuple(rows), tuple(marks))
