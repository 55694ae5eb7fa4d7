"""The answer the report leads with: its first screen in HTML, its first lines in Markdown.

A headline (per device, first what bounded its answer, the model on the device or the serving path
(`loadtest.report.answers.bound`), then the batching gain at the smallest request batch size and objective
searched, with both capacities; then the GPU/CPU ratio where both were searched) and one row per device, request batch
size and objective: the best configuration, its capacity under the objective, the batching gain
over batching off, the GPU/CPU ratio, and, given a target load and prices, replicas and cost
(`loadtest.report.sizing.size`'s arithmetic). Without capacity searches it says so plainly and shows the
best open-loop rate measured passing per configuration, as a lower bound.

Not for: deriving the answers (`loadtest.report.answers.answers`, `loadtest.report.answers.sources`) or layout
(`loadtest.report.page`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import LoadMode
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, DeviceAnswer, DeviceRatio, SearchAnswer, answer, lower_bound
from loadtest.report.answers.bound import bound_line, device_text
from loadtest.report.answers.figure_text import range_text, reason
from loadtest.report.answers.paired import GPU_CPU, PairedRatio, by_key, holds_one, paired_ratios, paired_table
from loadtest.report.answers.sources import highest_passing
from loadtest.report.answers.tool_ceiling import ToolCeiling, ceiling_for
from loadtest.report.answers.verdict import finding, what_bounded
from loadtest.report.blocks import OFFERED_VS_SERVED_REF, Figure, Table, device_name
from loadtest.report.card.capacity_table import capacity_table
from loadtest.report.card.card import Card, card_for
from loadtest.report.card.decision import why_none_lines
from loadtest.report.card.sizing_table import rule, sizing_table
from loadtest.report.configs import Config, config_labels, config_of, models_named
from loadtest.report.device_use import busy_text
from loadtest.report.figures import Figures, console_lines, device_figures, figures_of
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import ratio_value
from loadtest.report.host_floor import host_floor_lines, host_floor_ms
from loadtest.report.sections.objective_table import objective_headline, objective_table
from loadtest.report.sizing.instances import Pricing, with_replicas

DEFAULT_P99_MS = 50.0  # the objective without a capacity search or a p99 asked for (`make size`'s default)
NO_SEARCH = "no capacity search in these results: run make capacity or make tune"
Labels = Mapping[Config, str]


@dataclass(frozen=True)
class Summary:
    headline: tuple[str, ...]  # sentences, the first one the answer
    tables: tuple[Table, ...]
    lead: str = ""  # the answer in one sentence: the first of the headline's first line (HTML's first screen)
    chart: Figure | None = None  # the server against the device alone, per configuration (HTML's first screen)
    card: Card | None = None  # the first screen: for buying or not, per target and device (`loadtest.report.card.card`)
    cost_chart: Figure | None = None  # per target and device, USD/h (or capacity) against the p99 objective
    sizing: Table | None = None  # the card's boxes worked, under its Terms (`loadtest.report.card.sizing_table`)
    capacities: Table | None = None  # the card's capacities in full, above it (`loadtest.report.card.capacity_table`)


def _rps(s: SearchAnswer) -> str:
    """`675.0 req/s`, or a lower bound with why: `≥ 687.2 req/s: the search stopped`."""
    return f"{_capacity(s)} req/s{reason(s.bound) if lower_bound(s) else ''}"


def _range(s: SearchAnswer) -> str:
    """`between 675.0 and 700.0 req/s`: to its upper end, in the figures every table prints."""
    return range_text(s.figure_rps, s.upper_rps, s.bound)


def _capacity(s: SearchAnswer) -> str:
    return f"{'≥ ' if lower_bound(s) else ''}{fmt(s.capacity_rps)}"


def _where(batch: int, p99_objective_ms: float) -> str:
    return f"at p99 ≤ {p99_objective_ms:g} ms (request batch {batch})"


def _device(d: DeviceAnswer) -> str:
    return f"{d.device} ({device_name(d.device_name)})"


def _here(devices: Sequence[DeviceAnswer]) -> list[DeviceAnswer]:
    """The devices' answers at the smallest request batch and objective searched: the ones the headline gives."""
    first = min((d.request_batch_size, d.p99_objective_ms) for d in devices)
    return [d for d in devices if (d.request_batch_size, d.p99_objective_ms) == first]


def headline(devices: Sequence[DeviceAnswer], labels: Labels, results: Sequence[CellResult],
             figures: Mapping[tuple[Config, int], Figures], answers: Answers,
             paired: Mapping[tuple, PairedRatio]) -> tuple[str, ...]:
    """Per device at the smallest request batch and objective searched: what bounded its answer (from its
    `figures`, and the tool ceilings and the machine's movement `answers` holds), then its batching gain; then
    GPU/CPU (`answers.ratios`, or the `paired` one where the comparison was paired)."""
    batch, p99_objective_ms = min((d.request_batch_size, d.p99_objective_ms) for d in devices)
    here = _here(devices)
    where = _where(batch, p99_objective_ms)
    lines = []
    for d in here:
        bound = _bound(d, figures, results, labels, answers)
        if bound:
            lines.append(bound)
        on, off = d.gain.batching, d.gain.off
        if (compared := paired.get((f"batching gain on {d.device}", batch, p99_objective_ms))) is not None:
            lines.append(_paired_text(compared, host_floor_ms(results, d.device, batch)))
        elif d.gain.ratio is not None and on and off:
            g = d.gain
            value, tie = ratio_value(g.ratio, g.low, g.high), _tie(g.ratio, g.low, g.high)
            lines.append(f"batching gain {value} on {_device(d)} {where}{tie}: {labels[on.config]} "
                         f"{_rps(on)} ({_range(on)}) vs {labels[off.config]} {_rps(off)} ({_range(off)}).")
        elif d.best:
            lines.append(f"capacity on {_device(d)} {where}: {labels[d.best.config]} {_rps(d.best)} "
                         f"({fmt(d.best.capacity_ips)} images/s served; {_range(d.best)}); no batching gain: "
                         f"{d.gain.reason}.")
        elif (floor := host_floor_ms(results, d.device, batch)) is not None and floor > p99_objective_ms:
            lines.append(f"p99 ≤ {p99_objective_ms:g} ms cannot be confirmed on this host for {_device(d)} "
                         f"(request batch {batch}): the machine's own stalls put objectives below {floor:g} ms out of "
                         "reach, whatever the server does (the machine held a 1 ms sleep loop beside it past them "
                         "more than 0.5% of the time).")
        # else: why none met is said once, above (`card.decision.why_none_lines`), with the figures the card reads
    if (compared := paired.get((GPU_CPU, batch, p99_objective_ms))) is not None:
        return (*lines, _paired_text(compared))
    for r in answers.ratios:
        if (r.request_batch_size, r.p99_objective_ms) == (batch, p99_objective_ms) and r.ratio and r.gpu and r.cpu:
            value, tie = ratio_value(r.ratio, r.low, r.high), _tie(r.ratio, r.low, r.high)
            lines.append(f"GPU/CPU {value} {where}{tie}: {labels[r.gpu.config]} "
                         f"{_rps(r.gpu)} vs {labels[r.cpu.config]} {_rps(r.cpu)}.")
    return tuple(lines)


def _tie(ratio: float | None, low: float | None, high: float | None) -> str:
    """An unpaired ratio's verdict where its range holds ×1.0, as the card's "tie" and a paired ratio's words say it."""
    return ", no measurable difference" if holds_one(ratio, low, high) else ""


def _bound(d: DeviceAnswer, figures: Mapping[tuple[Config, int], Figures], results: Sequence[CellResult],
           labels: Labels, answers: Answers) -> str:
    """What bounded a device's answer: its verdict (`loadtest.report.answers.verdict`, the card's), with the detail
    from the figures its answer stands on where the device floor's rule gave it."""
    f = device_figures(figures, d.device, d.device_name, d.request_batch_size, d.best.config if d.best else None)
    detail = bound_line(d, f.cell if f else None, f.at_words if f else "", results, labels, answers.movements)
    if d.best is None or d.best.figure_rps is None:
        return detail
    search_id = d.best.search_id
    verdict = what_bounded(d.best, ceiling_for(search_id, answers.ceilings), answers.movements.get(search_id))
    return finding(device_text(d.device, d.device_name), verdict, detail)


def _paired_text(compared: PairedRatio, host_floor: float | None = None) -> str:
    """A comparison's ratio as the headline gives it, first letter up; where the host's own stalls reach its
    objective, a warning that the ratio is as much the host's as the servers'."""
    text = compared.describe()
    if host_floor is not None and host_floor > compared.p99_objective_ms:
        text = (text.removesuffix(".") + f"; but this host's own stalls put objectives below {host_floor:g} ms out of "
                "reach, so at this objective the ratio is decided by the host as much as by the servers: compare at "
                "a looser one.")
    return text[0].upper() + text[1:]


# ----------------------------------------------------------------------------- the answer table


def _gain_text(d: DeviceAnswer, labels: Labels, paired: Mapping[tuple, PairedRatio] | None = None) -> str:
    """The gain as the headline gives it: a paired comparison's ratio and range where there is one."""
    g = d.gain
    compared = (paired or {}).get((f"batching gain on {d.device}", d.request_batch_size, d.p99_objective_ms))
    if compared is not None and compared.ratio is not None:
        return compared.short()
    if g.ratio is None or g.batching is None or g.off is None:
        return f"— {g.reason}"
    value = ratio_value(g.ratio, g.low, g.high)
    return f"{value} ({labels[g.batching.config]} vs {labels[g.off.config]} {_rps(g.off)})"


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
        found = (labels[b.config], _capacity(b) + (reason(b.bound) if lower_bound(b) else ""), fmt(b.capacity_ips),
                 busy_text(b.server_cpu_percent, b.gpu_utilization_percent, b.server_cpu_cores), fmt(b.p50_ms, 2),
                 fmt(b.estimate_ms, 2),
                 fmt(b.upper_rps)) if b else ("none met the objective", *["—"] * 6)
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


# ----------------------------------------------------------------------------- without searches


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


def model_named(results: Sequence[CellResult], lines: tuple[str, ...]) -> tuple[str, ...]:
    """`lines` with the first naming the model(s) measured ("model ranker: ..."), unless only the demo's."""
    models = models_named(results)
    return (f"model {models}: {lines[0]}", *lines[1:]) if lines and models else lines


def summarise(results: Sequence[CellResult], answers: Answers, labels: Labels, p99_objective_ms: float | None = None,
              pricing: Pricing | None = None, figures: Mapping[tuple[Config, int], Figures] | None = None,
              targets: Sequence[Target] | None = None) -> Summary:
    """The answer at `p99_objective_ms` (None: every objective searched), naming the model unless it is the demo's.
    `figures`: `figures_of` these results, when the caller has them already; `targets`: what the card answers
    (default: each objective and request batch searched, at the pricing's rate)."""
    figures = figures_of(results, answers, labels) if figures is None else figures
    summary = _summarise(results, answers, labels, p99_objective_ms, pricing, figures, targets)
    models = models_named(results)
    tables = tuple(replace(t, title=f"{t.title} (model {models})") for t in summary.tables) if models else \
        summary.tables
    return replace(summary, headline=model_named(results, summary.headline), tables=tables)


def _summarise(results: Sequence[CellResult], answers: Answers, labels: Labels, p99_objective_ms: float | None,
               pricing: Pricing | None, figures: Mapping[tuple[Config, int], Figures],
               targets: Sequence[Target] | None = None) -> Summary:
    devices = [d for d in answers.devices if p99_objective_ms is None or d.p99_objective_ms == p99_objective_ms]
    pricing = with_replicas(pricing, results)
    if devices:
        compared = paired_ratios(results)
        keyed = by_key(compared)
        by_objective = objective_table(answers, labels, keyed)
        card = card_for(results, pricing, targets, answers, keyed, p99_objective_ms)
        lines = (*why_none_lines(answers, results, labels, p99_objective_ms),
                 *headline(devices, labels, results, figures, answers, keyed),
                 *objective_headline(answers, keyed),
                 *host_floor_lines(results, answers.objectives_ms()))
        table = paired_table(compared)
        sizing = sizing_table(card, pricing, devices)
        return Summary(tuple(dict.fromkeys(lines)),
                       (device_table(devices, answers.ratios, labels, pricing, keyed, sizing is not None,
                                     answers.ceilings),
                        *((table,) if table else ()), *((by_objective,) if by_objective else ())), card=card,
                       sizing=sizing, capacities=capacity_table(card))
    objective = p99_objective_ms if p99_objective_ms is not None else DEFAULT_P99_MS
    if answers.searches:
        searched = ", ".join(sorted({f"{s.p99_objective_ms:g} ms" for s in answers.searches}))
        first = f"no capacity search at p99 ≤ {objective:g} ms in these results (searched: {searched})."
    else:
        first = f"{NO_SEARCH}."
    return Summary((first, f"Below: the best open-loop rate measured passing p99 ≤ {objective:g} ms per "
                           "configuration, a lower bound."),
                   (lower_bound_table(results, labels, objective),))


def lead_of(headline: Sequence[str]) -> str:
    """The first sentence of the first line (a sentence ends at a full stop before a capital)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", headline[0], maxsplit=1)[0] if headline else ""


def bound_lines(results: Sequence[CellResult], answers: Answers, labels: Labels,
                figures: Mapping[tuple[Config, int], Figures]) -> tuple[str, ...]:
    """Only what bounded each device's answer (what `capacity` prints before a single answer)."""
    if not answers.devices:  # no capacity search: nothing was answered, so nothing bounded an answer
        return ()
    return model_named(results, tuple(line for d in _here(answers.devices)
                                      if (line := _bound(d, figures, results, labels, answers))))


def console_end(results: Sequence[CellResult], pricing: Pricing | None,
                targets: Sequence[Target] | None = None) -> tuple[str, ...]:
    """What `capacity` (and `demo`) print at the end: what bounded each answer, the figures table, then the card
    (last, before each search's one-line answer). The answers and figures are computed once."""
    answers = answer(results)
    labels = config_labels(config_of(cell) for cell in results)
    figures = figures_of(results, answers, labels)
    card = card_for(results, pricing, targets, answers)
    bounds = bound_lines(results, answers, labels, figures)
    return (*bounds, *([""] if bounds else []), *console_lines(list(figures.values())),
            *(("", *card.lines()) if card is not None else ()))
