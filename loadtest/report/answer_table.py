"""The answer table: one row per device, request batch and objective searched (its best configuration, capacity,
upper end, how busy the device was, the batching gain, GPU/CPU and the tool ceiling); and, without a capacity search,
the best open-loop rate a sweep measured passing per configuration, a lower bound.

Not for: the findings above it (`loadtest.report.findings`) or the card (`loadtest.report.card`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import LoadMode
from loadtest.report.answers.answers import DeviceAnswer, DeviceRatio, lower_bound
from loadtest.report.answers.figure_text import reason, search_capacity, search_rps
from loadtest.report.answers.paired import GPU_CPU, PairedRatio
from loadtest.report.answers.sources import highest_passing
from loadtest.report.answers.tool_ceiling import ToolCeiling, ceiling_for
from loadtest.report.blocks import OFFERED_VS_SERVED_REF, Table, device_name
from loadtest.report.card.sizing_table import rule
from loadtest.report.configs import Config, config_of
from loadtest.report.device_use import busy_text
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import ratio_value
from loadtest.report.sizing.instances import Pricing

Labels = Mapping[Config, str]


def _gain_text(d: DeviceAnswer, labels: Labels, paired: Mapping[tuple, PairedRatio] | None = None) -> str:
    """The gain as the headline gives it: a paired comparison's ratio and range where there is one."""
    g = d.gain
    compared = (paired or {}).get((f"batching gain on {d.device}", d.request_batch_size, d.p99_objective_ms))
    if compared is not None and compared.ratio is not None:
        return compared.short()
    if g.ratio is None or g.batching is None or g.off is None:
        return f"— {g.reason}"
    value = ratio_value(g.ratio, g.low, g.high)
    return f"{value} ({labels[g.batching.config]} vs {labels[g.off.config]} {search_rps(g.off)})"


def _ratio_text(d: DeviceAnswer, ratios: Sequence[DeviceRatio],
                paired: Mapping[tuple, PairedRatio] | None = None) -> str:
    """GPU/CPU as the card gives it: the paired comparison's ratio and range where there is one."""
    compared = (paired or {}).get((GPU_CPU, d.request_batch_size, d.p99_objective_ms))
    if compared is not None and compared.ratio is not None:
        return compared.value()
    r = next((r for r in ratios if (r.request_batch_size, r.p99_objective_ms)
              == (d.request_batch_size, d.p99_objective_ms)), None)
    if r is None:
        return f"— no {'CPU' if d.device == 'gpu' else 'GPU'} search at this batch and objective"
    return ratio_value(r.ratio, r.low, r.high) if r.ratio is not None else f"— {r.reason}"


def _pricing_caption(pricing: Pricing | None, devices: Sequence[DeviceAnswer] = (), sized: bool = False) -> str:
    """Where the card's boxes are worked: its sizing table (`sized`), else here, the rule
    (`loadtest.report.card.sizing_table.rule`)."""
    if pricing is None:
        return " Give a target load (--target-rps) for boxes and cost (the card above)."
    if sized:
        return " The card's boxes, worked: its sizing table, under its Terms."
    return f" The card's boxes: {rule(pricing, devices)}"


def device_table(devices: Sequence[DeviceAnswer], ratios: Sequence[DeviceRatio], labels: Labels,
                 pricing: Pricing | None, paired: Mapping[tuple, PairedRatio] | None = None,
                 sized: bool = False, ceilings: Mapping[str, ToolCeiling] | None = None) -> Table:
    """One row per device, request batch size and objective searched, with its best answer's tool ceiling."""
    rows = []
    for d in devices:
        b = d.best
        found = (labels[b.config], search_capacity(b) + (reason(b.bound) if lower_bound(b) else ""),
                 fmt(b.capacity_ips), busy_text(b.server_cpu_percent, b.gpu_utilization_percent, b.server_cpu_cores),
                 fmt(b.p50_ms, 2), fmt(b.estimate_ms, 2), fmt(b.upper_rps)) \
            if b else ("none met the objective", *["—"] * 6)
        rows.append((d.device, device_name(d.device_name, b.config.machine if b else ""), str(d.request_batch_size),
                     f"{d.p99_objective_ms:g}",
                     *found, _gain_text(d, labels, paired), _ratio_text(d, ratios, paired),
                     ceiling_for(b.search_id, ceilings or {}).value() if b else "—"))
    return Table("Capacity under the latency objective, per device",
                 "Capacity: the highest offered rate (open loop) a capacity search confirmed with p99 within the "
                 "objective at the stated confidence (MLPerf's early-stopping rule: p99 upper estimate is the "
                 "confirmation's upper confidence bound on the true p99); " + OFFERED_VS_SERVED_REF + ". Upper end: "
                 "the lowest rate above it shown to fail (blank: none "
                 "measured: the capacity is then a lower bound, ≥ with why); the best configuration is the one "
                 "with the highest capacity on that device, request "
                 "batch size and objective. Batching gain: best batching-enabled capacity ÷ batching-off capacity, "
                 "same device, request batch and objective. GPU/CPU: best GPU ÷ best CPU capacity. Device busy: "
                 "the server's CPU (% of its cores) and GPU utilisation at the capacity's cell. Tool ceiling: what "
                 "the load generator and the path to the model carried in the same run with a model that costs "
                 "nothing." + _pricing_caption(pricing, devices, sized),
                 ("device", "device name", "request batch", "p99 objective ms", "best configuration", "capacity req/s",
                  "images/s served", "device busy", "p50 ms", "p99 upper estimate ms", "upper end req/s",
                  "batching gain over off",
                  "GPU/CPU", "tool ceiling"), tuple(rows), tuple("" if d.best else "invalid" for d in devices))


def lower_bound_table(results: Sequence[CellResult], labels: Labels, p99_objective_ms: float) -> Table:
    """Per configuration and request batch: the highest open-loop rate measured passing, a lower bound."""
    groups: dict[tuple[Config, int], list[CellResult]] = {}
    for c in results:
        if c.load.mode == LoadMode.OPEN and not c.search:
            groups.setdefault((config_of(c), c.load.request_batch_size), []).append(c)
    rows = []
    for (config, batch), cells in sorted(groups.items()):
        high = highest_passing(cells, p99_objective_ms, LoadMode.OPEN)
        top = high.cell
        rows.append((labels[config], str(batch), fmt(high.rate_rps), fmt(top.throughput_rps if top else None),
                     fmt(top.throughput_ips if top else None),
                     busy_text(top.server_cpu_percent, top.gpu_utilization_percent) if top else "—",
                     fmt(top.latency_p99_ms if top else None, 2),
                     high.note))
    return Table(f"Best measured open-loop rate at p99 ≤ {p99_objective_ms:g} ms: a lower bound",
                 "Not a capacity: the highest offered rate a sweep measured passing (valid, p99 within the "
                 "objective); untried rates above it may pass too. A capacity search finds the real one. "
                 + OFFERED_VS_SERVED_REF + "."
                 + ("" if rows else " No open-loop cells in these results either."),
                 ("configuration", "request batch", "offered req/s", "achieved req/s", "images/s", "device busy",
                  "p99 ms", "note"),
                 tuple(rows))


__all__ = ["device_table", "lower_bound_table"]
