"""The report's answer at every objective: capacity per configuration, and the batching gain and GPU/CPU
ratio wherever both sides answered.

Each capacity search's cells are answered at several p99 objectives by the one rule
(`loadtest.judge.objectives`, printed by `loadtest.report.answers.figure_text`); this lays them out: one row
per configuration × request batch with one column per objective ("583.0 confirmed (874.5 passed)", "none
confirmed (640.7 passed)", "none"), then per request batch the batching gain per device and the GPU/CPU
ratio at every objective both sides answered, from the same `Answers` the card and the findings read, and
the headline's sentences for the ratio and the gain across objectives.

Pure functions over `Answers`. Not for: the answers themselves (`loadtest.report.answers.answers`) or the
answer at the search's own objective (`loadtest.report.headline`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.report.answers.answers import Answers, DeviceAnswer, SearchAnswer
from loadtest.report.answers.figure_text import capacity_text
from loadtest.report.answers.ratios import Paired, gain_value, gpu_cpu_value, has_figure
from loadtest.report.answers.terms import CHECK, defined
from loadtest.report.answers.tool_ceiling import ceiling_for
from loadtest.report.blocks import Table
from loadtest.report.configs import Config
from loadtest.report.formatting import number as fmt

Labels = Mapping[Config, str]


def _device_by_objective(answers: Answers, device: str, batch: int) -> dict[float, DeviceAnswer]:
    """A device's answer at `batch` per objective (at the searches' own, `answers.devices`: the same values)."""
    return {d.p99_objective_ms: d for d in (*answers.objective_devices, *answers.devices)
            if (d.device, d.request_batch_size) == (device, batch)}


def repeat_labels(searches: Sequence[SearchAnswer], labels: Labels) -> list[str]:
    """Each search's configuration label, with `(searched at 50 ms)` where one configuration was searched at several
    objectives at a request batch (two targets there), and `(repeat N)` where more than once at a request batch and
    objective (its repeats, in the order they ran)."""
    seen: dict[tuple, int] = {}
    counts: dict[tuple, int] = {}
    objectives: dict[tuple, set[float]] = {}
    for s in searches:
        key = (s.config, s.request_batch_size, s.p99_objective_ms)
        counts[key] = counts.get(key, 0) + 1
        objectives.setdefault(key[:2], set()).add(s.p99_objective_ms)
    names = []
    for s in searches:
        key = (s.config, s.request_batch_size, s.p99_objective_ms)
        seen[key] = seen.get(key, 0) + 1
        at = f" (searched at {s.p99_objective_ms:g} ms)" if len(objectives[key[:2]]) > 1 else ""
        names.append(labels[s.config] + at + (f" (repeat {seen[key]})" if counts[key] > 1 else ""))
    return names


def objective_table(answers: Answers, labels: Labels, paired: Paired | None = None) -> Table | None:
    """Capacity req/s per configuration × request batch at each objective, then the gains and ratios (each the
    one value `loadtest.report.answers.ratios` gives: `paired`'s where a comparison measured it); None without
    searches."""
    paired = paired or {}
    objectives = answers.objectives_ms()
    if not objectives:
        return None
    rows, marks = [], []
    for s, name in zip(answers.searches, repeat_labels(answers.searches, labels)):
        at = {a.p99_objective_ms: a for a in s.objectives}
        rows.append((name, str(s.request_batch_size), *(capacity_text(at.get(o)) for o in objectives),
                     ceiling_for(s.search_id, answers.ceilings).value()))
        marks.append("")
    for batch in sorted({s.request_batch_size for s in answers.searches}):
        devices = sorted({d.device for d in answers.objective_devices if d.request_batch_size == batch})
        for device in devices:
            here = _device_by_objective(answers, device, batch)
            if any(d.gain.batching and d.gain.off for d in here.values()):
                gains = (gain_value(answers, paired, device, batch, o) for o in objectives)
                rows.append((f"batching gain on {device}", str(batch), *gains, "—"))
                marks.append("")
        if any(r.request_batch_size == batch for r in (*answers.objective_ratios, *answers.ratios)):
            rows.append(("GPU/CPU", str(batch), *(gpu_cpu_value(answers, paired, batch, o) for o in objectives), "—"))
            marks.append("")
    return Table("Capacity at each p99 objective",
                 "Every search's cells answered at each objective by the one rule the searches, the card and "
                 "the sizing use: confirmed, the highest offered rate (req/s) whose confirmation (a separate, longer "
                 "measurement) passed p99 ≤ the objective at the stated confidence; in brackets a higher rate whose "
                 "own windows passed, not confirmed; none confirmed (… passed): no rate was confirmed, the highest "
                 "pass is the figure. A rate that passes at an objective passes at every looser one, so a "
                 f"configuration's capacity never falls to the right. {defined('≥')}. Batching gain: best "
                 "batching-enabled ÷ batching-off capacity on that device; GPU/CPU: best GPU ÷ best CPU capacity; "
                 "each ratio with its range (×ratio (low–high), paired where the searches ran at once), the same "
                 "value as the card, the findings and the log; where one capacity in it is a lower bound, only the "
                 "end that holds (at least / at most); — where there is no ratio. Tool ceiling: what the load "
                 "generator and the path to the model carried in the same run with a model that costs nothing, "
                 f"checked at {CHECK} the search's own answer.",
                 ("configuration", "request batch", *(f"p99 ≤ {o:g} ms" for o in objectives), "tool ceiling"),
                 tuple(rows), tuple(marks))


def across_objectives(values: Sequence[tuple[float, str]]) -> str:
    """`×1.62 at 10 ms, ≥ ×1.40 at 25 ms` of the objectives that have a value."""
    return ", ".join(f"{text} at {objective:g} ms" for objective, text in values if has_figure(text))


def objective_headline(answers: Answers, paired: Paired | None = None) -> tuple[str, ...]:
    """The GPU/CPU ratio and each device's batching gain at every other objective both sides answered, per
    request batch (the searches' own objectives have theirs in the headline already); () where there is none."""
    paired = paired or {}
    lines = []
    own = {s.p99_objective_ms for s in answers.searches}
    objectives = [o for o in answers.objectives_ms() if o not in own]
    for batch in sorted({s.request_batch_size for s in answers.searches}):
        text = across_objectives([(o, gpu_cpu_value(answers, paired, batch, o)) for o in objectives])
        if text:
            lines.append(f"GPU/CPU at request batch {batch} at the other objectives: {text}.")
        for device in sorted({d.device for d in answers.objective_devices if d.request_batch_size == batch}):
            text = across_objectives([(o, gain_value(answers, paired, device, batch, o)) for o in objectives])
            if text:
                lines.append(f"batching gain on {device} at request batch {batch} at the other objectives: {text}.")
    return tuple(lines)


def rates_table(answers: Answers, labels: Labels) -> Table | None:
    """Every search's rates, every window at a rate pooled (perf_analyzer's one row per load level): what
    each capacity at each objective was read from. None without searches."""
    rows, marks = [], []
    for s in answers.searches:
        for r in s.rates:
            rows.append((labels[s.config], str(s.request_batch_size), fmt(r.offered_rps), fmt(r.achieved_rps),
                         fmt(r.achieved_ips), *(fmt(v, 2) for v in (r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms)),
                         str(r.requests), str(r.windows),
                         "overloaded" if r.overloaded else "load generator" if r.loadgen_limited else ""))
            marks.append("invalid" if r.overloaded or r.loadgen_limited else "")
    if not rows:
        return None
    return Table("Rates measured by each search",
                 "Per configuration, request batch and offered rate, every window measured there pooled (first "
                 "window, extensions, confirmation: their histograms merge exactly): achieved req/s and img/s, the "
                 "latency percentiles of all their requests, N, and the windows. Limited by: overloaded (the server "
                 "did not keep up: never a capacity) or the load generator (nothing said about the server).",
                 ("configuration", "request batch", "offered req/s", "achieved req/s", "images/s", "p50 ms", "p90 ms",
                  "p99 ms", "p99.9 ms", "N", "windows", "limited by"),
                 tuple(rows), tuple(marks), in_summary=False)
