"""What a sweep prints while it runs: a line per cell, and the table of every cell at the end.

The table is drawn with `rich` into plain text (no colour codes), so it reads the same in a
terminal, a log file or a CI transcript.

Not for: the report (`loadtest.report.page`) or anything recorded in results.
"""

from __future__ import annotations

from rich.table import Table

from loadtest.evidence.records import CellResult, LoadSpec
from loadtest.evidence.tables import plain_table
from loadtest.evidence.vocab import LoadMode

TABLE_WIDTH = 160
COLUMNS = ("#", "server", "batch", "mode", "level", "req/s", "img/s", "p50 ms", "p99 ms", "p99.9 ms", "errors",
           "late%", "cpu%", "valid")


def describe(spec: LoadSpec) -> str:
    """The load of a cell in words, e.g. "batch=8 closed users=4"."""
    if spec.mode == LoadMode.CLOSED:
        level = f"users={spec.concurrency}"
    else:
        level = f"rate={spec.rate_rps:g}/s {spec.arrival}" if spec.rate_rps is not None else "rate=none"
    return f"batch={spec.request_batch_size} {spec.mode} {level}"


def progress_line(result: CellResult, total: int) -> str:
    count = f"{result.cell_index + 1}/{total}" if total > 0 else f"cell {result.cell_index + 1}"
    head = f"[{count}] {result.server.name} {describe(result.load)}"
    if result.requests == 0:
        return f"{head}: FAILED {result.failure_reason}"
    flags = "; ".join(f"{f.flag}: {f.reason}" for f in result.flags) or "valid"
    lag = "" if result.dispatch_lag_p99_us is None else f", dispatch lag p99 {result.dispatch_lag_p99_us:.0f} µs"
    return (f"{head}: {result.throughput_rps:.0f} req/s, p50 {result.latency_p50_ms} ms, "
            f"p99 {result.latency_p99_ms} ms, errors {result.requests - result.ok_requests}{lag} ({flags})")


def table_row(r: CellResult) -> tuple[str, ...]:
    level = str(r.load.concurrency) if r.load.mode == LoadMode.CLOSED else f"{r.load.rate_rps:g}/s"
    verdict = "yes" if r.valid else ",".join(sorted({f.flag for f in r.flags}))
    return (str(r.cell_index + 1), r.server.name, str(r.load.request_batch_size), str(r.load.mode), level,
            f"{r.throughput_rps:.0f}", f"{r.throughput_ips:.0f}", _num(r.latency_p50_ms), _num(r.latency_p99_ms),
            _num(r.latency_p999_ms), str(r.requests - r.ok_requests), f"{100 * r.late_send_fraction:.1f}",
            f"{r.loadgen_cpu_percent:.0f}", verdict)


def console_table(results: list[CellResult]) -> str:
    """Every cell of the sweep, one row each, as plain text."""
    table = Table(box=None, pad_edge=False, show_edge=False)
    for name in COLUMNS:
        table.add_column(name, justify="left" if name in ("server", "mode", "valid") else "right", no_wrap=True)
    for result in results:
        table.add_row(*table_row(result))
    return plain_table(table, TABLE_WIDTH)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
