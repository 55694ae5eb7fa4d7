"""The report: sweep results turned into a self-contained HTML page and a Markdown summary.

Reads one or more `results.jsonl` files (optionally a second set to compare against) and writes
`report.html` (plots embedded as base64 PNG, inline CSS, no script, no external URL: it opens
offline) and `report.md` beside the first results file, under new names (`report-2.html`, ...)
when earlier reports exist: nothing is overwritten. Every table says what was measured (server
kind, device name, batching profile, versions); invalid and failed cells are drawn hollow or as
crosses and listed with their reasons, never dropped.

The HTML page is rendered from a Jinja2 template (`templates/report.html.j2`, autoescaped); the
Markdown summary is written directly (it is a file format of its own, not a drawn table).

Not for: sizing (`loadtest.analysis.size`), grouping into series (`loadtest.analysis.series`, shared
with the sizing) or measuring anything.

    mnist-bench report RESULTS.jsonl... [--compare OTHER.jsonl...] [--out DIR]
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import jinja2

from loadtest.analysis.formatting import change as pct
from loadtest.analysis.formatting import number as fmt
from loadtest.analysis.formatting import params
from loadtest.analysis.series import (
    Series,
    group_series,
    level_name,
    load_level,
    read_all,
    unusable_reason,
    usable,
)
from loadtest.records import CellResult
from loadtest.vocab import CellStatus
from serving.endpoint import kind_display_name

# ----------------------------------------------------------------------------- building blocks


@dataclass(frozen=True)
class Table:
    title: str
    caption: str  # what was measured, in words
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    marks: tuple[str, ...] = ()  # per row: "" or "invalid" / "failed" (styled in HTML)
    in_summary: bool = True  # also in the Markdown summary


@dataclass(frozen=True)
class Figure:
    title: str
    caption: str
    png: bytes | None  # None: nothing to draw, the caption says why


@dataclass(frozen=True)
class Report:
    title: str
    intro: tuple[str, ...]
    blocks: tuple[Table | Figure, ...] = field(default_factory=tuple)


def device_name(name: str) -> str:
    return name or "(not recorded)"


def cell_mark(cell: CellResult) -> str:
    return "failed" if cell.status != CellStatus.OK else ("" if usable(cell) else "invalid")


def series_labels(series: Sequence[Series]) -> list[str]:
    with_run = len({s.key.run_id for s in series}) > 1
    return [f"S{i + 1} {s.key.label(with_run)}" for i, s in enumerate(series)]


def measured_caption(series: Sequence[Series]) -> str:
    """One sentence naming every server, device, batching profile and version measured."""
    servers = sorted({(s.key.kind, s.key.device, s.key.device_name,
                       params(s.cells[0].server.versions, "versions not recorded")) for s in series})
    profiles = sorted({(s.key.batching_profile, params(s.cells[0].server.batching, "no parameters recorded"))
                       for s in series})
    runs = sorted({s.key.run_id for s in series})
    return ("Measured: " + "; ".join(f"{kind_display_name(k)} on {d} ({device_name(n)}; {v})"
                                     for k, d, n, v in servers)
            + ". Batching profiles: " + "; ".join(f"{p} ({b})" for p, b in profiles)
            + f". Runs: {', '.join(runs)}.")


# ----------------------------------------------------------------------------- tables


def measured_table(series: Sequence[Series], labels: Sequence[str]) -> Table:
    rows = []
    for label, s in zip(labels, series):
        first = s.cells[0]
        prov = first.provenance
        commit = str(prov.get("git_commit", "?"))[:12] + (" (dirty)" if prov.get("git_dirty") else "")
        loadgen = f"{prov.get('host', '?')} @ {commit}; {params(prov.get('versions', {}))}"
        rows.append((label, s.key.run_id, kind_display_name(s.key.kind), s.key.device, device_name(s.key.device_name),
                     s.key.batching_profile, params(first.server.batching), first.server.protocol,
                     f"{first.server.model_name} v{first.server.model_version}",
                     params(first.server.versions), loadgen,
                     f"{sum(usable(c) for c in s.cells)}/{len(s.cells)}"))
    return Table("What was measured", measured_caption(series),
                 ("series", "run", "server kind", "device", "device name", "batching profile",
                  "batching parameters", "protocol", "model", "server versions",
                  "load generator (host @ commit; versions)", "valid/all cells"), tuple(rows))


def peak_cell(s: Series) -> CellResult | None:
    valid = [c for c in s.cells if usable(c)]
    return max(valid, key=lambda c: c.throughput_ips) if valid else None


def peak_table(series: Sequence[Series], labels: Sequence[str]) -> Table:
    rows, marks = [], []
    for label, s in zip(labels, series):
        c = peak_cell(s)
        if c is None:
            rows.append((label, device_name(s.key.device_name), "no valid cell", *["—"] * 6))
            marks.append("invalid")
            continue
        rows.append((label, device_name(s.key.device_name), fmt(c.throughput_ips), fmt(c.throughput_rps),
                     f"{level_name(s.key.mode)} {load_level(c):g}", fmt(c.latency_p50_ms, 2),
                     fmt(c.latency_p99_ms, 2), fmt(c.latency_p999_ms, 2),
                     fmt(None if c.accuracy is None else c.accuracy * 100, 2)))
        marks.append("")
    return Table("Peak valid throughput per series", measured_caption(series),
                 ("series", "device name", "images/s", "requests/s", "at", "p50 ms", "p99 ms",
                  "p99.9 ms", "accuracy %"), tuple(rows), tuple(marks))


def best_by_kind(series: Sequence[Series], device: str, profile: str, batch: int, mode: str):
    """The highest valid throughput cell of any `device` series with this profile and batch."""
    cells = [(c, s) for s in series if (s.key.device, s.key.batching_profile,
                                       s.key.request_batch_size, s.key.mode) == (device, profile, batch, mode)
             for c in s.cells if usable(c)]
    return max(cells, key=lambda cs: cs[0].throughput_ips) if cells else (None, None)


def cpu_gpu_table(series: Sequence[Series]) -> Table:
    """CPU against GPU at equal request batch size, batching profile and load mode."""
    keys = sorted({(s.key.request_batch_size, s.key.batching_profile, s.key.mode) for s in series})
    rows = []
    for batch, profile, mode in keys:
        cpu, cpu_s = best_by_kind(series, "cpu", profile, batch, mode)
        gpu, gpu_s = best_by_kind(series, "gpu", profile, batch, mode)
        ratio = (f"{gpu.throughput_ips / cpu.throughput_ips:.2f}x"
                 if cpu is not None and gpu is not None and cpu.throughput_ips else "—")
        rows.append((str(batch), profile, mode,
                     fmt(cpu and cpu.throughput_ips), fmt(cpu and cpu.latency_p99_ms, 2),
                     cpu_s.key.device_name if cpu_s else "not measured",
                     fmt(gpu and gpu.throughput_ips), fmt(gpu and gpu.latency_p99_ms, 2),
                     gpu_s.key.device_name if gpu_s else "not measured", ratio))
    devices = {s.key.device for s in series}
    missing = [d.upper() for d in ("cpu", "gpu") if d not in devices]
    note = (f" No {' or '.join(missing)} measurements in these results, so that side is empty."
            if missing else "")
    return Table("CPU vs GPU at equal request batch size",
                 "Peak valid throughput (images/s) and the p99 of that cell, for each request batch "
                 "size, batching profile and load mode. " + measured_caption(series) + note,
                 ("request batch", "batching", "load", "CPU images/s", "CPU p99 ms", "CPU device",
                  "GPU images/s", "GPU p99 ms", "GPU device", "GPU/CPU"), tuple(rows))


def cells_table(series: Sequence[Series], labels: Sequence[str], only_unusable: bool) -> Table:
    rows, marks = [], []
    for label, s in zip(labels, series):
        for c in s.cells:
            if only_unusable and usable(c):
                continue
            errors = sum(c.errors_by_code.values())
            rows.append((label, f"{level_name(s.key.mode)} {load_level(c):g}", c.status,
                         "yes" if usable(c) else "NO", fmt(c.throughput_ips), fmt(c.throughput_rps),
                         fmt(c.latency_p50_ms, 2), fmt(c.latency_p99_ms, 2), f"{c.requests:,}",
                         f"{errors:,}", f"{c.wrong_answers:,}", f"{c.late_send_fraction:.1%}",
                         fmt(c.loadgen_cpu_percent, 0), fmt(c.server_batch_size_mean, 2),
                         "" if usable(c) else unusable_reason(c)))
            marks.append(cell_mark(c))
    title = "Invalid and failed cells" if only_unusable else "Every cell"
    caption = ("Not used for sizing, and drawn hollow (invalid) or as crosses (failed) in the plots. "
               if only_unusable else "Invalid and failed cells are marked and give their reasons. ")
    return Table(title, caption + measured_caption(series),
                 ("series", "load", "status", "valid", "images/s", "requests/s", "p50 ms", "p99 ms",
                  "requests", "errors", "wrong answers", "late sends", "loadgen CPU %",
                  "server batch mean", "reason"), tuple(rows), tuple(marks),
                 in_summary=only_unusable)


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


# ----------------------------------------------------------------------------- assembly


def build_report(results: Sequence[CellResult], compare: Sequence[CellResult] = (),
                 sources: Sequence[Path] = ()) -> Report:
    """Every table and figure of the report, computed once; rendering only formats them."""
    from loadtest.analysis import plots  # matplotlib is slow to import; only the report needs it

    series = group_series(results)
    labels = series_labels(series)
    caption = measured_caption(series)
    batch_png = plots.batch_figure(series, labels)
    blocks: list[Table | Figure] = [
        measured_table(series, labels),
        peak_table(series, labels),
        Figure("Throughput vs load", "Achieved throughput against concurrency (closed loop) or "
               "offered rate (open loop). Hollow: invalid cell; cross: failed cell. " + caption,
               plots.throughput_figure(series, labels)),
        Figure("Latency vs throughput", "p50 and p99 against achieved throughput (log latency "
               "axis). Hollow: invalid cell; failed cells have no latency (see the tables). " + caption,
               plots.latency_figure(series, labels)),
        Figure("Server-side batch sizes",
               ("Batch sizes the server processed, from its metrics during each cell. " + caption)
               if batch_png else "No server-side batch sizes were recorded in these results "
               "(the server exposed no batching metrics).", batch_png),
        cpu_gpu_table(series),
        cells_table(series, labels, only_unusable=True),
    ]
    if compare:
        blocks.append(compare_table(results, compare))
    blocks.append(cells_table(series, labels, only_unusable=False))
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    intro = (f"Generated {now} from {', '.join(str(p) for p in sources) or 'results'}"
             f" ({len(results)} cells in {len(series)} series"
             f"{f'; compared with {len(compare)} cells' if compare else ''}).",
             f"{sum(usable(c) for c in results)} valid, "
             f"{sum(c.status == CellStatus.OK and not usable(c) for c in results)} invalid, "
             f"{sum(c.status != CellStatus.OK for c in results)} failed cells.")
    return Report("Inference load test report", intro, tuple(blocks))


# ----------------------------------------------------------------------------- rendering

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("loadtest.analysis", "templates"),
                               autoescape=True, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                               undefined=jinja2.StrictUndefined)


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(report: Report) -> str:
    """The self-contained page: inline CSS, plots as base64 PNGs, no script, no external URL."""
    blocks = [{"table": b if isinstance(b, Table) else None, "figure": b if isinstance(b, Figure) else None,
               "src": png_data_uri(b.png) if isinstance(b, Figure) and b.png else ""} for b in report.blocks]
    return TEMPLATES.get_template("report.html.j2").render(report=report, blocks=blocks)


def md_cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def md_table(t: Table) -> str:
    lines = [f"## {t.title}", "", t.caption, "", "| " + " | ".join(t.header) + " |",
             "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.header) - 1)) + " |")
    return "\n".join(lines)


def render_markdown(report: Report, html_name: str) -> str:
    parts = [f"# {report.title}", "", *report.intro, "",
             f"Plots and every cell: [{html_name}]({html_name})."]
    parts += ["\n" + md_table(b) for b in report.blocks if isinstance(b, Table) and b.in_summary]
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- files & CLI


def output_paths(out_dir: Path) -> tuple[Path, Path]:
    """report.html/report.md, or the first report-N pair where neither file exists yet."""
    for n in itertools.count(1):
        stem = "report" if n == 1 else f"report-{n}"
        html_path, md_path = out_dir / f"{stem}.html", out_dir / f"{stem}.md"
        if not html_path.exists() and not md_path.exists():
            return html_path, md_path
    raise AssertionError("unreachable")


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, md_path = output_paths(out_dir)
    with html_path.open("x") as out:  # "x": never overwrite, even if a file appeared meanwhile
        out.write(render_html(report))
    with md_path.open("x") as out:
        out.write(render_markdown(report, html_path.name))
    return html_path, md_path


def run(results: Sequence[Path], compare: Sequence[Path] = (), out: Path | None = None) -> tuple[Path, Path]:
    """Read, build, write; returns the HTML and Markdown paths. Raises AnalysisError, OSError."""
    cells = read_all(results)
    others = read_all(compare) if compare else []
    report = build_report(cells, others, [*results, *compare])
    return write_report(report, Path(out) if out else Path(results[0]).parent)
