"""The device run's smoke test, and the split of the cores it measures.

Before any search, one server of the first device's batching profile (on a GPU: the process that owns
the GPU and its runtime, behind the frontends) is started as the searches start theirs and asked a short
closed loop at request batches 1 and 32 (`smoke_plan`), every answer checked against the sample digits'
classes, within `SMOKE_S`. `judge` reads its cells: it fails (and the run stops early, saying why) when
it measured nothing, a cell failed, an answer was wrong or an error came back, or the server ran another
runtime than the one asked for (`EXPECTED_RUNTIMES`); else it keeps what the cells say: the runtime,
the device alone at each batch (the floor the server measured at start) and what a request cost the
load generator and the server in CPU seconds.

Those two costs size the load generator's share of the cores (`loadgen_share`): Locust keeps each of its
processes at most half a core busy (`loadtest.measure.locust_run.BUSY_SHARE`), the server can use all of
its cores, so the split where both run out at the same rate gives Locust `N × 2l / (2l + s)` of `N`
cores (l, s: their CPU seconds per request), at least one and never all.

Standard library only (`run.py` imports it before its wheels are installed; the server and the load run
in a child `mnist-bench loadtest`). Not for: running the child (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from loadtest.bundle.run_args import BACKENDS
from serving.protocol.runtime_names import names_of

SMOKE_S = 60.0  # the smoke test's whole time by default (`run.py --smoke-s`), its server's start included
BATCHES = (1, 32)
USERS = 8  # the closed loop's users, per cell
MEASURE_S = 2.0
BUSY_SHARE = 0.5  # of a core, per Locust process (`loadtest.measure.locust_run.BUSY_SHARE`; a test checks it)
# The runtime each device's server runs with the bundle's server flags (`run_args.SERVER_FLAGS`).
EXPECTED_RUNTIMES = {device: names_of(backend).runtime for device, backend in BACKENDS.items()}  # as reported


@dataclass(frozen=True)
class SmokeCell:
    """One smoke cell's reading."""

    batch: int
    requests: int
    throughput_rps: float
    loadgen_cpu_s: float | None  # CPU seconds per request, the load generator's
    server_cpu_s: float | None  # CPU seconds per request, every process of the server together
    device_alone_ips: float | None  # the floor the server measured at start, at this batch
    device_alone_us: float | None


@dataclass(frozen=True)
class Smoke:
    """The smoke test's verdict: `ok`, else `why`; what it read either way."""

    ok: bool
    why: str
    server: str
    runtime: str = ""
    callers: int = 1  # the floor's callers at once
    start_s: float | None = None  # the server's start, launch to AVAILABLE
    cells: tuple[SmokeCell, ...] = field(default_factory=tuple)

    def costs(self) -> tuple[float, float] | None:
        """(load generator, server) CPU seconds per request: the busiest cell's, None where not both measured."""
        measured = [c for c in self.cells if c.loadgen_cpu_s and c.server_cpu_s]
        if not measured:
            return None
        busiest = max(measured, key=lambda c: c.throughput_rps)
        return busiest.loadgen_cpu_s or 0.0, busiest.server_cpu_s or 0.0

    def to_dict(self) -> dict:
        return {**asdict(self), "cells": [asdict(c) for c in self.cells]}

    def summary(self) -> str:
        """`gpu-gpu on keras-torch, started in 14.2 s; batch 1: 2,345 req/s, the device alone 17,130 images/s; ...`"""
        started = "" if self.start_s is None else f", started in {self.start_s:g} s"
        return f"{self.server} on {self.runtime}{started}; " + "; ".join(
            f"batch {c.batch}: {c.throughput_rps:,.0f} req/s, the device alone "
            f"{'not measured' if c.device_alone_ips is None else f'{c.device_alone_ips:,.0f} images/s'}"
            for c in self.cells)


def smoke_plan(base_plan: str) -> str:
    """The device plan with one closed-loop cell of `USERS` at each of `BATCHES`, one Locust process."""
    replaced = {"measure_s": f"measure_s = {MEASURE_S}", "warmup_s": "warmup_s = 0.5", "processes": "processes = 1",
                "batch_sizes": f"batch_sizes = [{', '.join(map(str, BATCHES))}]",
                "concurrency": f"concurrency = [{USERS}]", "rates_rps": "rates_rps = []"}
    lines = [replaced.get(line.split("=")[0].strip(), line) for line in base_plan.splitlines()]
    return "\n".join(lines) + "\n"


def start_seconds(lines: list[str], seen_at: list[float]) -> float | None:
    """Seconds from the console's `starting NAME` to its `NAME: ... AVAILABLE` (`loadtest.measure.servers`), as the
    lines arrived; None when the server never answered."""
    begun = next((t for line, t in zip(lines, seen_at, strict=False) if line.startswith("starting ")), None)
    ready = next((t for line, t in zip(lines, seen_at, strict=False) if line.rstrip().endswith("AVAILABLE")), None)
    return None if begun is None or ready is None else round(ready - begun, 1)


def read_cells(results: Path) -> list[dict]:
    """Every whole JSON line of the smoke's results files."""
    cells = []
    for path in sorted(results.rglob("results.jsonl")):
        for line in path.read_text().splitlines():
            try:
                cells.append(json.loads(line))
            except ValueError:
                continue
    return cells


def judge(cells: list[dict], server: str, device: str, exit_code: int | None, tail: list[str],
          start_s: float | None = None, runtime_asked: str | None = None) -> Smoke:
    """The smoke's verdict from its cells (`exit_code` None: stopped at its time limit); the runtime asked for is
    the device's in `EXPECTED_RUNTIMES` unless `runtime_asked` names another."""
    if not cells:
        ended = "stopped at its time limit" if exit_code is None else f"exit {exit_code}"
        return Smoke(False, f"measured nothing ({ended}): {' | '.join(line.strip() for line in tail[-3:])}", server,
                     start_s=start_s)
    runtime = str(cells[0].get("server", {}).get("versions", {}).get("runtime", ""))
    read = tuple(smoke_cell(c) for c in cells)
    callers = int((cells[0].get("device_floor") or {}).get("callers") or 1)
    problem = cell_problem(cells) or runtime_problem(runtime, device, runtime_asked)
    if not problem and len(cells) < len(BATCHES):
        ended = "stopped at its time limit" if exit_code is None else f"exit {exit_code}"
        problem = f"{len(cells)} of {len(BATCHES)} cells measured ({ended})"
    return Smoke(not problem, problem, server, runtime, callers, start_s, read)


def cell_problem(cells: list[dict]) -> str:
    """The first failed, wrong or erring cell, said; "" when every one answered right."""
    for c in cells:
        batch = c.get("load", {}).get("request_batch_size")
        if c.get("status") != "ok":
            return f"request batch {batch}: the cell failed: {c.get('failure_reason')}"
        if not c.get("ok_requests"):
            return f"request batch {batch}: no request answered"
        if c.get("wrong_answers"):
            return (f"request batch {batch}: {c['wrong_answers']} of {c['requests']} answers were not the digits' "
                    "classes")
        if c.get("errors_by_code"):
            return f"request batch {batch}: errors {c['errors_by_code']} (first: {c.get('error_examples')})"
    return ""


def runtime_problem(runtime: str, device: str, runtime_asked: str | None = None) -> str:
    expected = EXPECTED_RUNTIMES.get(device, "") if runtime_asked is None else runtime_asked
    if expected and runtime != expected:
        return f"the {device} server ran {runtime or 'no named runtime'}, not {expected}"
    return ""


def smoke_cell(cell: dict) -> SmokeCell:
    batch = int(cell.get("load", {}).get("request_batch_size") or 0)
    rate = float(cell.get("throughput_rps") or 0.0)
    loadgen = cell.get("loadgen_cpu_percent")
    server, cores = cell.get("server_cpu_percent"), cell.get("server_cpu_cores")
    floor_batches = (cell.get("device_floor") or {}).get("batches") or ()
    alone: dict = next((b for b in floor_batches if b.get("batch_size") == batch), {})
    return SmokeCell(batch, int(cell.get("requests") or 0), round(rate, 1),
                     per_request(loadgen, 1.0, rate), per_request(server, cores, rate),
                     alone.get("images_per_s"), alone.get("latency_us"))


def per_request(percent: float | None, cores: float | None, rate_rps: float) -> float | None:
    """CPU seconds per request from a busy % of `cores` (100 = all of them) at `rate_rps`."""
    if percent is None or not cores or rate_rps <= 0:
        return None
    return percent / 100 * cores / rate_rps


def loadgen_cores(found: Smoke, cores: int, given: int, unsized: int) -> tuple[int, str]:
    """(Locust's cores, why): sized by the smoke's costs (`loadgen_share`) unless `--loadgen-cores` was `given`
    or nothing was measured; else `unsized` (`run_args.core_split`'s: the given count, or a quarter)."""
    costs = found.costs()
    if given or costs is None or cores < 2:
        return unsized, "--loadgen-cores" if given else "a quarter (the smoke test measured no CPU costs)"
    return loadgen_share(cores, *costs), (f"sized by the smoke test: a request cost Locust {costs[0] * 1e6:,.0f} us "
                                          f"and the server {costs[1] * 1e6:,.0f} us of CPU")


def loadgen_share(cores: int, loadgen_cpu_s: float, server_cpu_s: float) -> int:
    """Cores for Locust where it and the server run out at the same rate: `cores × 2l / (2l + s)`, rounded,
    at least 1 and at most `cores - 1`."""
    need = loadgen_cpu_s / BUSY_SHARE
    share = round(cores * need / (need + server_cpu_s)) if need + server_cpu_s > 0 else 1
    return max(1, min(cores - 1, share))


__all__ = ["BATCHES", "EXPECTED_RUNTIMES", "SMOKE_S", "Smoke", "SmokeCell", "judge", "loadgen_cores", "loadgen_share",
           "read_cells", "smoke_plan", "start_seconds"]
