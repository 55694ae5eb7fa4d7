"""The findings: the lines the report leads with under its card, and `capacity` prints before its answers.

Per device at the smallest request batch and objective searched: what bounded its answer (its verdict,
`loadtest.report.answers.verdict`, with the detail of the device floor's rule, `loadtest.report.answers.bound`), then
its batching gain with both capacities (a paired comparison's ratio where the run was paired); then the GPU/CPU ratio
where both devices were searched. A ratio whose range holds ×1.0 says "no measurable difference". `every_finding`
gives them in the report's order: why none met first, these, the ratios at every other objective, then the objectives
the host's own stalls put out of reach.

Not for: the answer table beside them (`loadtest.report.answer_table`), the card (`loadtest.report.card`) or the
summary that holds them all (`loadtest.report.headline`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.evidence.records import CellResult
from loadtest.report.answers.answers import Answers, DeviceAnswer, SearchAnswer
from loadtest.report.answers.bound import bound_line, device_text
from loadtest.report.answers.figure_text import range_text, search_rps
from loadtest.report.answers.paired import GPU_CPU, PairedRatio, holds_one
from loadtest.report.answers.tool_ceiling import ceiling_for
from loadtest.report.answers.verdict import finding, what_bounded
from loadtest.report.blocks import device_name
from loadtest.report.card.decision import why_none_lines
from loadtest.report.configs import Config
from loadtest.report.figures import Figures, device_figures
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import ratio_value
from loadtest.report.host_floor import host_floor_lines, host_floor_ms
from loadtest.report.sections.objective_table import objective_headline

Labels = Mapping[Config, str]


def _range(s: SearchAnswer) -> str:
    """`between 675.0 and 700.0 req/s`: to its upper end, in the figures every table prints."""
    return range_text(s.figure_rps, s.upper_rps, s.bound)


def _where(batch: int, p99_objective_ms: float) -> str:
    return f"at p99 ≤ {p99_objective_ms:g} ms (request batch {batch})"


def _device(d: DeviceAnswer) -> str:
    return f"{d.device} ({device_name(d.device_name)})"


def _here(devices: Sequence[DeviceAnswer]) -> list[DeviceAnswer]:
    """The devices' answers at the smallest request batch and objective searched: the ones the headline gives."""
    first = min((d.request_batch_size, d.p99_objective_ms) for d in devices)
    return [d for d in devices if (d.request_batch_size, d.p99_objective_ms) == first]


def every_finding(devices: Sequence[DeviceAnswer], labels: Labels, results: Sequence[CellResult],
                  figures: Mapping[tuple[Config, int], Figures], answers: Answers, paired: Mapping[tuple, PairedRatio],
                  p99_objective_ms: float | None) -> tuple[str, ...]:
    """The report's findings in its order, each once: why none met where none did (`card.decision`), the devices'
    findings (`findings`), the ratios at every other objective (`sections.objective_table`), and the objectives the
    host's own stalls put out of reach."""
    lines = (*why_none_lines(answers, results, labels, p99_objective_ms),
             *findings(devices, labels, results, figures, answers, paired),
             *objective_headline(answers, paired),
             *host_floor_lines(results, answers.objectives_ms()))
    return tuple(dict.fromkeys(lines))


def findings(devices: Sequence[DeviceAnswer], labels: Labels, results: Sequence[CellResult],
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
                         f"{search_rps(on)} ({_range(on)}) vs {labels[off.config]} {search_rps(off)} ({_range(off)}).")
        elif d.best:
            lines.append(f"capacity on {_device(d)} {where}: {labels[d.best.config]} {search_rps(d.best)} "
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
                         f"{search_rps(r.gpu)} vs {labels[r.cpu.config]} {search_rps(r.cpu)}.")
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


def device_bounds(results: Sequence[CellResult], answers: Answers, labels: Labels,
                  figures: Mapping[tuple[Config, int], Figures]) -> tuple[str, ...]:
    """Only what bounded each device's answer (what `capacity` prints before a single answer)."""
    if not answers.devices:  # no capacity search: nothing was answered, so nothing bounded an answer
        return ()
    return tuple(line for d in _here(answers.devices) if (line := _bound(d, figures, results, labels, answers)))


__all__ = ["Labels", "device_bounds", "every_finding", "findings"]
