"""The report's detail tables, after the answer and the curves: every search, every configuration
(stated once: server kind, device, versions, batching parameters, provenance), one peak table (each
series' highest throughput, device use there, CPU against GPU), invalid cells, a comparison with
another run, and every cell.

Not for: the answer the report leads with (`loadtest.report.headline`) or layout (`loadtest.report.page`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus
from loadtest.judge.conclusion import describe_pair
from loadtest.judge.overload import overloaded_reason
from loadtest.report.answers.answers import SearchAnswer
from loadtest.report.answers.figure_text import range_text
from loadtest.report.answers.tool_ceiling import ToolCeiling, ceiling_for
from loadtest.report.blocks import OFFERED_VS_SERVED_REF, Table, cell_mark, device_name
from loadtest.report.configs import Config, config_of
from loadtest.report.device_use import (
    CPU_BUSY_PERCENT,
    GPU_BUSY_PERCENT,
    busy_text,
    device_busy,
    idle_note,
    unmeasured_reason,
)
from loadtest.report.figures import MS_DIGITS, Figures, highest_sustained, load_words, mean_ms, peak_images, wire_ms
from loadtest.report.formatting import change as pct
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import params
from loadtest.report.series import Series, level_name, load_level, overloaded_note, unusable_reason, usable
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
    commits = sorted({_or(c.provenance.git_commit, "?")[:12] + (" (dirty)" if c.provenance.git_dirty else "")
                      for c in cells})
    return f"{_or(prov.host, '?')} @ {', '.join(commits)}; {versions_text(params(prov.versions or {}, ''))}"


def _or(value: str | None, absent: str) -> str:
    """A provenance key's text, `absent` where the record lacks it."""
    return absent if value is None else str(value)


def configurations_table(results: Sequence[CellResult], labels: Labels) -> Table:
    """One row per configuration: what was measured, stated once for the whole report."""
    by_config: dict[Config, list[CellResult]] = {}
    for cell in results:
        by_config.setdefault(config_of(cell), []).append(cell)
    rows = []
    for config, cells in sorted(by_config.items()):
        first = cells[0]
        rows.append((labels[config], server_with_runtime(config.kind, config.runtime), config.device,
                     device_name(config.device_name, config.machine),
                     config.batching_profile, config.batching or "—", versions_text(config.versions),
                     first.server.protocol, f"{first.server.model_name} v{first.server.model_version}",
                     ", ".join(sorted({c.run_id for c in cells})), _loadgen(cells),
                     f"{sum(usable(c) for c in cells)}/{len(cells)}"))
    return Table("Configurations", "What was measured, once per configuration; every other table names "
                 "configurations by these labels.",
                 ("configuration", "server kind (runtime)", "device", "device name", "batching profile",
                  "batching parameters", "server versions", "protocol", "model", "runs",
                  "load generator (host @ commit; versions)", "valid/all cells"), tuple(rows))


def versions_text(versions: str) -> str:
    """The server's versions as a reader takes them: what is not installed left out (a JAX server records no
    TensorFlow), and the TensorFlow that exported the model named as such, not as the server's."""
    if not versions:
        return "versions not recorded"
    pairs = [pair.partition("=") for pair in versions.split(", ")]
    shown = [f"model exported by TensorFlow {v}" if k == "model_tensorflow" else f"{k}={v}"
             for k, _, v in pairs if v != "not installed"]
    return ", ".join(shown) or "versions not recorded"


def _search_note(s: SearchAnswer) -> str:
    if not s.met:
        return s.reason
    pairs = s.conclusion.not_monotone if s.conclusion else ()
    return range_text(s.figure_rps, s.upper_rps, s.bound) + "".join(f"; not monotone: {describe_pair(p)}"
                                                                    for p in pairs)


def searches_table(searches: Sequence[SearchAnswer], labels: Labels,
                   ceilings: Mapping[str, ToolCeiling] | None = None) -> Table:
    """Each search's answer, with its tool ceiling (`ceilings`, by search id: not measured where absent)."""
    rows = tuple((labels[s.config], str(s.request_batch_size), f"{s.p99_objective_ms:g}", "yes" if s.met else "NO",
                  fmt(s.capacity_rps), fmt(s.capacity_ips),
                  busy_text(s.server_cpu_percent, s.gpu_utilization_percent, s.server_cpu_cores),
                  fmt(s.p50_ms, 2), fmt(s.estimate_ms, 2),
                  fmt(s.upper_rps), ceiling_for(s.search_id, ceilings or {}).value(), str(s.cells), s.search_id,
                  _search_note(s)) for s in searches)
    return Table("Capacity searches", "Each search's answer: the highest offered rate whose confirmation passed "
                 "(valid, and p99 within the objective at the stated confidence: est. p99 is the early-stopping "
                 "estimate of the true p99), the images/s, device use and latency of that cell, its upper end (the "
                 "lowest rate above it shown to fail; why, in the last column), its tool ceiling (what the load "
                 "generator and the path to the model carried in the same run with a model that costs nothing) and "
                 "the uncertainty. Not met: no confirmation passed. " + OFFERED_VS_SERVED_REF + ".",
                 ("configuration", "request batch", "p99 objective ms", "met", "capacity req/s", "images/s served",
                  "device busy", "p50 ms", "est. p99 ms", "upper end req/s", "tool ceiling", "cells", "search",
                  "uncertainty, or not met because"),
                 rows,
                 tuple("" if s.met else "invalid" for s in searches))


# ----------------------------------------------------------------------------- per series, and peaks


PEAK_HEADER = ("configuration", "request batch", "device", "peak images/s", "peak req/s", "peak load",
               "server CPU %", "server CPU max %", "server cores", "server RSS MiB", "GPU util %", "GPU util max %",
               "GPU memory MiB", "GPU power W", "device note", "p50 ms", "p99 ms", "p99.9 ms", "accuracy %",
               "series", "configuration's peak", "GPU/CPU peaks", "note")


def peak_table(series: Sequence[Series], names: Sequence[str], labels: Labels,
               figures: Mapping[tuple[Config, int], Figures]) -> Table:
    """The one peak table: per series (one load mode of one configuration and request batch), its highest valid
    throughput, how busy the device was there and its latency; which row is the configuration's peak
    (`loadtest.report.figures`), and on each device's best peak the GPU/CPU ratio of peaks."""
    ratios = _peak_ratios(figures)
    rows, marks = [], []
    for name, s in zip(names, series):
        config, batch = config_of(s.cells[0]), s.key.request_batch_size
        c, note = highest_sustained(s.cells), overloaded_note(s.cells)
        head = (labels.get(config, config.name), str(batch), config.device)
        if c is None:
            rows.append((*head, "no valid cell", *["—"] * 15, name, "", "—", note))
            marks.append("invalid")
            continue
        f = figures.get((config, batch))
        peak = f is not None and f.peak is not None and f.peak.cell == c
        rows.append((*head, fmt(c.throughput_ips), fmt(c.throughput_rps), load_words(c), *_use_cells(c),
                     idle_note(c) or ("" if device_busy(c) else unmeasured_reason(c)),
                     fmt(c.latency_p50_ms, 2), fmt(c.latency_p99_ms, 2), fmt(c.latency_p999_ms, 2),
                     fmt(None if c.accuracy is None else c.accuracy * 100, 2), name, "yes" if peak else "",
                     ratios.get((config, batch), "—") if peak else "—", note))
        marks.append(cell_mark(c))
    missing = [d.upper() for d in ("cpu", "gpu") if d not in {f.config.device for f in figures.values()}]
    return Table("Peak throughput",
                 "Per series (one load mode of one configuration and request batch): its highest valid throughput, "
                 "whatever the latency, the load it was measured at, and how busy the device was over the measured "
                 "window: the server's CPU as a share of the cores it may use (mean, and its busiest ~150 ms), its "
                 "highest resident memory, and the GPU's utilisation, memory and power (NVML). Overloaded cells (the "
                 "server fell behind its schedule, or its queue grew) never count: the last note names them. A "
                 "configuration's peak is the highest of its series (\"yes\"); GPU/CPU peaks, on the best peak of "
                 "each device at a request batch and batching on or off: the GPU's ÷ the CPU's. Peaks are not "
                 "capacities: the decision above compares capacities under the objective. A CPU server below "
                 f"{CPU_BUSY_PERCENT:.0f}% or a GPU below {GPU_BUSY_PERCENT:.0f}% at its peak is far from busy: "
                 "more load would not come from a faster device."
                 + (f" No {' or '.join(missing)} measurements in these results: no GPU/CPU ratio." if missing else ""),
                 PEAK_HEADER, tuple(rows), tuple(marks))


def _use_cells(c: CellResult) -> tuple[str, ...]:
    return (fmt(c.server_cpu_percent, 0), fmt(c.server_cpu_percent_max, 0), fmt(c.server_cpu_cores, 1),
            fmt(c.server_rss_mib, 0), fmt(c.gpu_utilization_percent, 0), fmt(c.gpu_utilization_percent_max, 0),
            fmt(c.gpu_memory_mib, 0), fmt(c.gpu_power_w, 0))


def _best_peak(figures: Sequence[Figures], device: str, batching_on: bool, batch: int) -> Figures | None:
    here = [f for f in figures if f.peak is not None and f.config.device == device and f.request_batch == batch
            and f.config.batching_on == batching_on]
    return max(here, key=peak_images, default=None)


def _peak_ratios(figures: Mapping[tuple[Config, int], Figures]) -> dict[tuple[Config, int], str]:
    """`×3.41 (gpu-off ÷ cpu-off)` on both sides' best peaks, per request batch and batching on or off."""
    kept = list(figures.values())
    out = {}
    for batch, on in sorted({(f.request_batch, f.config.batching_on) for f in kept}):
        cpu, gpu = (_best_peak(kept, d, on, batch) for d in ("cpu", "gpu"))
        if cpu and gpu and cpu.peak and gpu.peak and cpu.peak.images_per_s:
            text = f"×{gpu.peak.images_per_s / cpu.peak.images_per_s:.2f} ({gpu.label} ÷ {cpu.label})"
            out[(cpu.config, batch)] = out[(gpu.config, batch)] = text
    return out


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
    client_ms, server_ms = mean_ms(cell)
    if client_ms is None or server_ms is None:
        return "—", "—"
    return fmt(server_ms, MS_DIGITS), fmt(wire_ms(client_ms, server_ms), MS_DIGITS)


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
