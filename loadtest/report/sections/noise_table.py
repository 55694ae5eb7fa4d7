"""The report's noise table: whose slow requests they were, the host's, the server's, or the client's.

One row per configuration × request batch × objective, over the open-loop cells measured there whose
client saw more than the 1% of requests over the objective that a p99 allows (the cells that could not
pass for their tail): the host probe's worst oversleeps on the server's and the load generator's cores,
the lowest objective the host itself let these cells confirm (`loadtest.judge.noise.lowest_confirmable_ms`),
the three shares over the objective (client, server's own, host) and the attribution
(`loadtest.judge.noise.attribute`). Overloaded cells are left out: a queue that grows is the server's, and
says nothing about noise; so are cells the load generator limited (its lateness is its own).

Pure functions over `CellResult`s. Not for: the attribution's rules (`loadtest.judge.noise`) or the lowest objective
the host itself allows (`loadtest.report.host_floor`).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.evidence.records import CellResult
from loadtest.evidence.stats import decode
from loadtest.judge import noise
from loadtest.report.blocks import Table
from loadtest.report.configs import Config
from loadtest.report.host_floor import open_cells


def slow_cells(cells: Sequence[CellResult], objective_ms: float) -> list[CellResult]:
    """The cells whose client saw more requests over the objective than a p99 allows."""
    return [c for c in cells if noise.client_share([c], objective_ms) > noise.ALLOWED_SHARE]


def oversleep_text(cells: Sequence[CellResult], side: str) -> str:
    """`p99.9 1.2 / max 16.4` ms of the probe's oversleeps on one side, worst cell; "—" without a probe."""
    sides = [noise.probe_sides(c)[side] for c in cells if side in noise.probe_sides(c)]
    if not sides:
        return "—"
    histograms = [decode(s.histogram or "") for s in sides]
    p999 = max(h.get_value_at_percentile(99.9) for h in histograms) / 1000.0
    peak = max(h.get_max_value() for h in histograms) / 1000.0
    return f"{p999:.1f} / {peak:.1f}"


def stalls_per_s(cells: Sequence[CellResult], objective_ms: float) -> str:
    """The host probe's oversleeps longer than the objective, per second, on its worse side over the cells."""
    rates = []
    for side in noise.SIDES:
        recorded = [noise.probe_sides(c)[side] for c in cells if side in noise.probe_sides(c)]
        seconds = sum(float(r.duration_s or 0.0) for r in recorded)
        if seconds > 0:
            over = sum(noise.count_over(r.histogram or "", objective_ms * 1000.0) for r in recorded)
            rates.append(over / seconds)
    return f"{max(rates):.2f}" if rates else "—"


def _share(value: float | None) -> str:
    return "—" if value is None else f"{value:.2%}"


def noise_table(results: Sequence[CellResult], labels: dict[Config, str], objectives: Sequence[float]) -> Table:
    """Whose slow requests, per configuration × request batch × objective (see the module docstring)."""
    rows = []
    for (config, batch), cells in sorted(open_cells(results).items()):
        floor = noise.lowest_confirmable_ms(cells)
        for objective in objectives:
            slow = slow_cells(cells, objective)
            who = noise.attribute(slow, objective) if slow else None
            rows.append((labels.get(config, config.name), str(batch), f"{objective:g}", str(len(cells)),
                         str(len(slow)), oversleep_text(cells, "server"), oversleep_text(cells, "loadgen"),
                         stalls_per_s(cells, objective), "—" if floor is None else f"{floor:g}",
                         _share(who.client_share) if who else "—", _share(who.server_share) if who else "—",
                         _share(who.host_share) if who else "—",
                         who.source.value if who else "no cell over the 1% a p99 allows"))
    return Table("Whose slow requests: the host, the server, or the client and wire",
                 "Per configuration, request batch and objective, over the open-loop cells (overloaded ones left "
                 "out) whose client saw more than 1% of requests over the objective. Host oversleep: a 1 ms sleep "
                 "loop run beside each cell on the server's and the load generator's cores (jHiccup's method; "
                 "p99.9 / max over the cells, ms): a lower bound of the stalls the machine itself imposed; its "
                 "stalls longer than the objective per second, on the worse side. Host "
                 "allows: the lowest p99 objective these cells could confirm were the server perfect (the host "
                 "alone held a request over it less than 0.5% of the time). Shares over the objective: of the "
                 "client's requests, of the server's own (its request-latency histogram), and of the time the host "
                 "alone held the sleep loop. Whose: the host when its share explains at least half the client's, "
                 "else the server when its own does, else the client and the wire (the load generator, the "
                 "network stack, the client's gRPC).",
                 ("configuration", "request batch", "objective ms", "cells", "cells over", "host oversleep, "
                  "server's cores ms", "host oversleep, load generator's cores ms", "host stalls > objective per s",
                  "host allows p99 ≥ ms",
                  "client over", "server over", "host over", "whose"),
                 tuple(rows))


def search_noise_lines(cells: Sequence[CellResult], answered: Sequence[tuple[float, bool]]) -> tuple[str, ...]:
    """For one search's cells and its objectives as (objective ms, answered): where an objective got no
    answer, whose slow requests kept it out of reach, and the lowest objective the host itself allows."""
    measured = [c for group in open_cells(cells).values() for c in group]
    floor = noise.lowest_confirmable_ms(measured)
    lines = []
    for objective, ok in answered:
        slow = slow_cells(measured, objective)
        if ok or not slow:
            continue
        who = noise.attribute(slow, objective)
        out_of_reach = floor is not None and objective < floor
        lines.append(f"p99 <= {objective:g} ms, why none: {who.describe()}"
                     + (f"; objectives below {floor:g} ms cannot be confirmed on this host" if out_of_reach else ""))
    return tuple(lines)
