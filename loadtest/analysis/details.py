"""The report's detail tables, after the answer and the curves: every search, every configuration
(stated once: server kind, device, versions, batching parameters, provenance), peaks, CPU against
GPU, invalid cells, a comparison with another run, and every cell.

Not for: the answer the report leads with (`loadtest.analysis.summary`) or layout (`loadtest.analysis.report`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.analysis.answers import Config, SearchAnswer, config_of
from loadtest.analysis.blocks import Table, cell_mark, device_name
from loadtest.analysis.device_use import busy_text
from loadtest.analysis.formatting import change as pct
from loadtest.analysis.formatting import number as fmt
from loadtest.analysis.formatting import params
from loadtest.analysis.series import Series, level_name, load_level, overloaded_note, sustained, unusable_reason, usable
from loadtest.overload import overloaded_reason
from loadtest.records import CellResult
from loadtest.sweep.conclusion import describe_pair
from loadtest.vocab import CellStatus
from serving.endpoint import kind_display_name, server_with_runtime

Labels = Mapping[Config, str]


def series_labels(series: Sequence[Series], labels: Labels) -> list[str]:
    """`S<n> <configuration>, req batch <b>, <mode> loop` (and the run when there are several)."""
    with_run = len({s.key.run_id for s in series}) > 1
    return [f"S{i + 1} {labels[config_of(s.cells[0])]}, req batch {s.key.request_batch_size}, {s.key.mode} loop"
            + (f", run {s.key.run_id}" if with_run else "") for i, s in enumerate(series)]


# ----------------------------------------------------------------------------- what was measured


def _loadgen(cells: Sequence[CellResult]) -> str:
    prov = cells[0].provenance
    commits = sorted({str(c.provenance.get("git_commit", "?"))[:12]
                      + (" (dirty)" if c.provenance.get("git_dirty") else "") for c in cells})
    return f"{prov.get('host', '?')} @ {', '.join(commits)}; {params(prov.get('versions', {}))}"


def configurations_table(results: Sequence[CellResult], labels: Labels) -> Table:
    """One row per configuration: what was measured, stated once for the whole report."""
    by_config: dict[Config, list[CellResult]] = {}
    for cell in results:
        by_config.setdefault(config_of(cell), []).append(cell)
    rows = []
    for config, cells in sorted(by_config.items()):
        first = cells[0]
        rows.append((labels[config], server_with_runtime(config.kind, config.runtime), config.device,
                     device_name(config.device_name),
                     config.batching_profile, config.batching or "—", config.versions or "versions not recorded",
                     first.server.protocol, f"{first.server.model_name} v{first.server.model_version}",
                     ", ".join(sorted({c.run_id for c in cells})), _loadgen(cells),
                     f"{sum(usable(c) for c in cells)}/{len(cells)}"))
    return Table("Configurations", "What was measured, once per configuration; every other table names "
                 "configurations by these labels.",
                 ("configuration", "server kind (runtime)", "device", "device name", "batching profile",
                  "batching parameters", "server versions", "protocol", "model", "runs",
                  "load generator (host @ commit; versions)", "valid/all cells"), tuple(rows))


def _search_note(s: SearchAnswer) -> str:
    if not s.met:
        return s.reason
    pairs = s.conclusion.not_monotone if s.conclusion else ()
    return s.uncertainty() + "".join(f"; not monotone: {describe_pair(p)}" for p in pairs)


def searches_table(searches: Sequence[SearchAnswer], labels: Labels) -> Table:
    rows = tuple((labels[s.config], str(s.request_batch_size), f"{s.p99_objective_ms:g}", "yes" if s.met else "NO",
                  fmt(s.capacity_rps), fmt(s.capacity_ips), busy_text(s.server_cpu_percent, s.gpu_utilization_percent),
                  fmt(s.p50_ms, 2), fmt(s.p99_ms, 2), fmt(s.estimate_ms, 2),
                  fmt(s.lowest_failing_rps), str(s.cells), s.search_id, _search_note(s)) for s in searches)
    return Table("Capacity searches", "Each search's answer: the highest offered rate whose confirmation passed "
                 "(valid, and p99 within the objective at the stated confidence: est. p99 is the early-stopping "
                 "estimate of the true p99; p99 is the cell's raw one), the images/s, device use and latency of "
                 "that cell, the lowest rate above it that failed with confidence, and the uncertainty. Not met: "
                 "no confirmation passed.",
                 ("configuration", "request batch", "p99 objective ms", "met", "capacity req/s", "images/s",
                  "device busy", "p50 ms", "p99 ms", "est. p99 ms", "lowest failing req/s", "cells", "search",
                  "uncertainty, or not met because"),
                 rows,
                 tuple("" if s.met else "invalid" for s in searches))


# ----------------------------------------------------------------------------- peaks


def peak_cell(s: Series) -> CellResult | None:
    """The series' valid cell with the highest throughput, overloaded cells skipped (never a peak)."""
    valid = [c for c in s.cells if sustained(c)]
    return max(valid, key=lambda c: c.throughput_ips) if valid else None


def peak_table(series: Sequence[Series], labels: Sequence[str]) -> Table:
    rows, marks = [], []
    for label, s in zip(labels, series):
        c = peak_cell(s)
        note = overloaded_note(s.cells)
        if c is None:
            rows.append((label, "no valid cell", *["—"] * 8, note))
            marks.append("invalid")
            continue
        rows.append((label, fmt(c.throughput_ips), fmt(c.throughput_rps), fmt(c.server_cpu_percent, 0),
                     fmt(c.gpu_utilization_percent, 0), f"{level_name(s.key.mode)} {load_level(c):g}",
                     fmt(c.latency_p50_ms, 2), fmt(c.latency_p99_ms, 2), fmt(c.latency_p999_ms, 2),
                     fmt(None if c.accuracy is None else c.accuracy * 100, 2), note))
        marks.append("")
    return Table("Peak valid throughput per series", "The highest valid throughput each series measured, "
                 "whatever its latency, and how busy the server's CPU (% of its cores) and GPU were there. "
                 "Overloaded cells (the server fell behind its schedule, or its queue grew) are never a peak: "
                 "the note names them.",
                 ("series", "images/s", "requests/s", "server CPU %", "GPU util %", "at", "p50 ms", "p99 ms",
                  "p99.9 ms", "accuracy %", "note"),
                 tuple(rows), tuple(marks))


def best_by_kind(results: Sequence[CellResult], device: str, batching_on: bool, batch: int, mode: str):
    """The highest valid throughput cell of any `device` configuration with batching on/off, at this batch
    (overloaded cells skipped)."""
    cells = [c for c in results if sustained(c) and c.server.device == device and c.load.request_batch_size == batch
             and c.load.mode == mode and config_of(c).batching_on == batching_on]
    return max(cells, key=lambda c: c.throughput_ips) if cells else None


def cpu_gpu_table(results: Sequence[CellResult], labels: Labels) -> Table:
    """CPU against GPU at equal request batch size, batching on or off, and load mode."""
    keys = sorted({(c.load.request_batch_size, config_of(c).batching_on, c.load.mode) for c in results})
    rows = []
    for batch, on, mode in keys:
        cpu, gpu = (best_by_kind(results, d, on, batch, mode) for d in ("cpu", "gpu"))
        ratio = (f"{gpu.throughput_ips / cpu.throughput_ips:.2f}x"
                 if cpu is not None and gpu is not None and cpu.throughput_ips else "—")
        rows.append((str(batch), "on" if on else "off", mode,
                     fmt(cpu and cpu.throughput_ips), fmt(cpu and cpu.latency_p99_ms, 2),
                     labels[config_of(cpu)] if cpu else "not measured",
                     fmt(gpu and gpu.throughput_ips), fmt(gpu and gpu.latency_p99_ms, 2),
                     labels[config_of(gpu)] if gpu else "not measured", ratio))
    missing = [d.upper() for d in ("cpu", "gpu") if d not in {c.server.device for c in results}]
    note = (f" No {' or '.join(missing)} measurements in these results, so that side is empty."
            if missing else "")
    return Table("CPU vs GPU at equal request batch size",
                 "Peak valid throughput (images/s) and the p99 of that cell, for each request batch size, "
                 "batching on or off, and load mode, whatever the latency (the answer above compares "
                 "capacities under the objective)." + note,
                 ("request batch", "batching", "load", "CPU images/s", "CPU p99 ms", "CPU configuration",
                  "GPU images/s", "GPU p99 ms", "GPU configuration", "GPU/CPU"), tuple(rows))


# ----------------------------------------------------------------------------- cells


def cells_table(series: Sequence[Series], labels: Sequence[str], only_unusable: bool) -> Table:
    rows, marks = [], []
    for label, s in zip(labels, series):
        for c in s.cells:
            if only_unusable and usable(c):
                continue
            errors = sum(c.errors_by_code.values())
            overloaded = overloaded_reason(c) if usable(c) else None
            rows.append((label, f"{level_name(s.key.mode)} {load_level(c):g}", c.status,
                         ("overloaded" if overloaded else "yes") if usable(c) else "NO",
                         fmt(c.throughput_ips), fmt(c.throughput_rps),
                         fmt(c.server_cpu_percent, 0), fmt(c.gpu_utilization_percent, 0),
                         fmt(c.latency_p50_ms, 2), fmt(c.latency_p99_ms, 2), *latency_split(c), f"{c.requests:,}",
                         f"{errors:,}", f"{c.wrong_answers:,}", f"{c.late_send_fraction:.1%}",
                         fmt(c.dispatch_lag_p99_us, 0), fmt(c.loadgen_cpu_percent, 0), fmt(c.server_batch_size_mean, 2),
                         (f"overloaded: {overloaded}" if overloaded else "") if usable(c) else unusable_reason(c)))
            marks.append("invalid" if overloaded else cell_mark(c))
    title = "Invalid and failed cells" if only_unusable else "Every cell"
    caption = ("Not used for sizing, and drawn hollow (invalid) or as crosses (failed) in the plots."
               if only_unusable else "Invalid and failed cells are marked and give their reasons. Server mean: "
               "the server's own mean request latency over the cell (TF Serving's request_latency, scraped "
               "before and after, warm-up included); outside: the client's mean minus it, the time in the "
               "load generator, both gRPC stacks and the wire. Server CPU %: the server's CPU over the measured "
               "window as a share of the cores it may use; GPU util %: NVML's, on a GPU server.")
    return Table(title, caption,
                 ("series", "load", "status", "valid", "images/s", "requests/s", "server CPU %", "GPU util %",
                  "p50 ms", "p99 ms",
                  "server mean ms", "outside ms",
                  "requests", "errors", "wrong answers", "late sends", "dispatch lag p99 µs", "loadgen CPU %",
                  "server batch mean", "reason"), tuple(rows), tuple(marks),
                 in_summary=only_unusable)


def latency_split(cell: CellResult) -> tuple[str, str]:
    """The server's own mean latency over the cell and what the client saw beyond it ("—" when not exposed)."""
    server_us = cell.server_metrics.get("request_latency_mean_us")
    if server_us is None or cell.latency_mean_ms is None:
        return "—", "—"
    return fmt(server_us / 1000, 3), fmt(cell.latency_mean_ms - server_us / 1000, 3)


# ----------------------------------------------------------------------------- comparison


def compare_key(c: CellResult) -> tuple:
    """Cells compare across runs when server kind, device, batching and load match (not host)."""
    return (c.server.kind, c.server.device, c.server.batching_profile, c.load.mode,
            c.load.request_batch_size, load_level(c))


def latest_by_key(cells: Sequence[CellResult]) -> dict:
    out: dict = {}
    for c in sorted(cells, key=lambda c: (c.utc_time, c.cell_index)):
        out[compare_key(c)] = c
    return out


def compare_table(base: Sequence[CellResult], other: Sequence[CellResult]) -> Table:
    """Side by side: A = the results reported, B = the ones compared against; deltas are A vs B."""
    a, b = latest_by_key(base), latest_by_key(other)
    rows, marks = [], []
    for key in sorted(set(a) | set(b), key=lambda k: tuple(str(x) for x in k[:5]) + (k[5],)):
        ca, cb = a.get(key), b.get(key)
        kind, device, profile, mode, batch, level = key
        rows.append((f"{device} {kind_display_name(kind)}", profile, str(batch), f"{level_name(mode)} {level:g}",
                     fmt(cb and cb.throughput_ips), fmt(ca and ca.throughput_ips),
                     pct(ca and ca.throughput_ips, cb and cb.throughput_ips),
                     fmt(cb and cb.latency_p99_ms, 2), fmt(ca and ca.latency_p99_ms, 2),
                     pct(ca and ca.latency_p99_ms, cb and cb.latency_p99_ms),
                     _validity(cb), _validity(ca)))
        marks.append("" if ca and cb and usable(ca) and usable(cb) else "invalid")
    runs_a = ", ".join(sorted({c.run_id for c in base}))
    runs_b = ", ".join(sorted({c.run_id for c in other}))
    names_a = ", ".join(sorted({c.server.device_name for c in base}))
    names_b = ", ".join(sorted({c.server.device_name for c in other}))
    return Table("Comparison with another run",
                 f"A = runs {runs_a} ({names_a}); B = runs {runs_b} ({names_b}). Δ = (A − B) / B. "
                 "Cells match on server kind, device, batching profile, load mode, request batch "
                 "size and load level; '—' where one side has no such cell.",
                 ("server", "batching", "request batch", "load", "B images/s", "A images/s",
                  "Δ throughput", "B p99 ms", "A p99 ms", "Δ p99", "B cell", "A cell"),
                 tuple(rows), tuple(marks))


def _validity(c: CellResult | None) -> str:
    if c is None:
        return "absent"
    return "valid" if usable(c) else ("failed" if c.status != CellStatus.OK else "invalid")
