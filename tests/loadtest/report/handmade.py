"""Hand-made `CellResult`s for the analysis unit tests: only what the analysis reads is set.

`cell(...)` makes one cell; `search(...)` the cells of one capacity search from (role, offered
rate, p99) steps, each cell achieving 99% of the offered rate (so img/s differs from the rate).
"""

from __future__ import annotations

from loadtest.evidence.provenance_record import Provenance
from loadtest.evidence.records import CellResult, LoadSpec, ServerLabel, ValidityFlag
from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.stats import encode, histogram_of
from loadtest.evidence.vocab import Flag

DEVICE_NAMES = {"cpu": "Test CPU", "gpu": "Test GPU"}
BATCHING = {"max_batch_size": 64, "batch_timeout_micros": 1000}


def server(name: str, profile: str, device: str = "cpu", batching: dict | None = None) -> ServerLabel:
    params = batching if batching is not None else ({} if profile == "off" else BATCHING)
    return ServerLabel(name=name, kind="embedded", device=device, device_name=DEVICE_NAMES[device],
                       target="127.0.0.1:8500", protocol="grpc", model_name="mnist", model_version=1,
                       batching_profile=profile, batching=params, versions={"tensorflow": "2.21.0"})


def latencies_histogram(p99: float | None, objective: float = 10.0, requests: int = 1000) -> str:
    """An encoded histogram of `requests` latencies that the confidence rule judges as `p99` reads against
    `objective`: within it, 1% at `p99` and the rest at a third of it (a pass); over it, 5% at `p99` (a fail)."""
    if p99 is None:
        return ""
    slow = requests // 20 if p99 > objective else requests // 100
    return encode(histogram_of([p99 * 1000.0] * slow + [p99 * 1000.0 / 3] * (requests - slow)))


def cell(label: ServerLabel, *, mode: str = "open", batch: int = 1, rate: float | None = None,
         concurrency: int | None = None, rps: float | None = None, p99: float | None = 5.0,
         flags: tuple[tuple[str, str], ...] = (), failed: str = "", search: dict | None = None,
         run_id: str = "run-1", index: int = 0, objective: float = 10.0) -> CellResult:
    """One cell; `rps` defaults to 99% of the offered `rate` (open loop)."""
    achieved = rps if rps is not None else round((rate or 0.0) * 0.99, 3)
    return CellResult(
        run_id=run_id, cell_index=index, utc_time="2026-11-23T10:00:00Z", server=label,
        load=LoadSpec(mode=mode, request_batch_size=batch, concurrency=concurrency if mode == "closed" else None,
                      rate_rps=rate if mode == "open" else None, arrival="poisson" if mode == "open" else None,
                      warmup_s=1.0, duration_s=5.0, processes=1),
        status="failed" if failed else "ok", failure_reason=failed, requests=1000, ok_requests=1000,
        errors_by_code={}, wrong_answers=0, accuracy=0.99, throughput_rps=achieved,
        throughput_ips=round(achieved * batch, 3), latency_min_ms=None, latency_mean_ms=None,
        latency_p50_ms=None if p99 is None else round(p99 / 3, 3), latency_p90_ms=None, latency_p95_ms=None,
        latency_p99_ms=p99, latency_p999_ms=None, latency_max_ms=None,
        histogram_us="" if failed else latencies_histogram(p99, objective), late_sends=0,
        late_send_fraction=0.0, window_throughput_rps=[], loadgen_cpu_percent=10.0, loadgen_cores=2,
        server_batch_size_mean=None, server_batch_sizes={}, server_queue_delay_mean_us=None,
        valid=not flags and not failed, flags=[ValidityFlag(Flag(f), r) for f, r in flags],
        provenance=Provenance(host="bench", git_commit="abc"), search=SearchTag.from_dict(search) if search else None)


def search(label: ServerLabel, search_id: str, steps: list[tuple], *, objective: float = 10.0,
           batch: int = 1, shape: dict | None = None) -> list[CellResult]:
    """A search's cells from (role, offered req/s, p99 ms[, flag, reason]) steps; a probe's rate is its
    closed-loop throughput. `shape`: its tag's replica shape (a shape sweep's `ShapeTag.to_dict()`)."""
    cells = []
    for index, (role, rate, p99, *flag) in enumerate(steps):
        probe = role == "probe"
        tag = {"id": search_id, "role": role, "p99_objective_ms": objective, "offered_rps": None if probe else rate,
               **({"shape": shape} if shape else {})}
        cells.append(cell(label, mode="closed" if probe else "open", batch=batch, rate=None if probe else rate,
                          concurrency=4 if probe else None, rps=rate if probe else None, p99=p99,
                          flags=(tuple(flag),) if flag else (), search=tag, index=index, objective=objective))
    return cells


def rates(label: ServerLabel, capacity: float, search_id: str, *, objective: float = 10.0,
          batch: int = 1) -> list[CellResult]:
    """A short search of `label` confirming `capacity` req/s (1.1 x capacity fails)."""
    return search(label, search_id, [("bracket", capacity, 8.0), ("bracket", capacity * 1.1, 12.0),
                                      ("confirm", capacity, 9.0)], objective=objective, batch=batch)


def twin(label: ServerLabel, checks: str, rate: float, *, p99: float | None = 1.0, failed: str = "",
         objective: float = 10.0, batch: int = 1, index: int = 100) -> CellResult:
    """A tool-ceiling twin's cell checking search `checks` at `rate` req/s: served all of it at `p99` (passes within
    the objective), or, with `failed`, a twin that could not start (`loadtest.judge.tool_ceiling`)."""
    tag = {"id": f"{checks}/tool-ceiling", "role": "tool_ceiling", "checks": checks, "p99_objective_ms": objective,
           "offered_rps": None if failed else rate}
    null = ServerLabel(**{**label.__dict__, "kind": "embedded", "name": f"{label.name}-twin",
                          "versions": {"runtime": "none (null backend)"}})
    return cell(null, rate=rate, rps=rate, p99=p99, failed=failed, search=tag, index=index, objective=objective,
                batch=batch)


def with_twin(cells: list[CellResult], search_id: str = "s", times: float = 2.0) -> list[CellResult]:
    """`cells` (one search, `search_id`) and a passing twin at `times` × its highest confirmed rate."""
    confirmed = max(c.tag.offered_rps or 0.0 for c in cells if c.search and c.search.role == "confirm")
    return [*cells, twin(cells[0].server, search_id, times * confirmed)]
