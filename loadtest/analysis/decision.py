"""The decision a report opens with: per objective searched and request batch, what to buy.

One line each, as Model Analyzer's summary opens with its recommendation:

- where a configuration met the objective: which one (its name spelled out: device, device name,
  batching profile), its capacity per server and how sure that is (confirmed at the stated confidence,
  between which rates), the other device's best beside it, and, given a target load and prices, how
  many replicas on which instances, per hour and per million inferences. With prices the cheapest per
  million inferences is chosen, else the highest capacity;
- where none did: why, in words a buyer can act on (the machine's own stalls put the objective out of
  reach here; pauses independent of the load, which more servers would not remove; the load generator
  could not drive it; every rate tried missed it), then the decision at the lowest looser objective the
  same cells answer.

Replicas and cost come from `priced_answer`, the same figures the answer table prints.

Pure functions over `Answers` and the records. Not for: the answers (`loadtest.analysis.answers`), the
arithmetic of replicas and cost (`loadtest.analysis.size`) or the report's layout
(`loadtest.analysis.summary`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from loadtest.analysis import size
from loadtest.analysis.answers import Answers, Config, DeviceAnswer, SearchAnswer, capacity, lower_bound, repeats_of
from loadtest.analysis.blocks import device_name
from loadtest.analysis.formatting import money
from loadtest.analysis.formatting import number as fmt
from loadtest.analysis.instances import Pricing, Replica, replicas_by_config
from loadtest.analysis.noise_table import host_floor_ms
from loadtest.records import CellResult
from loadtest.sweep.conclusion import AnswerKind

Labels = Mapping[Config, str]
DEVICE_WORDS = {"cpu": "the CPU", "gpu": "the GPU"}
NO_PRICES = "give a target load and prices (--target-rps, --prices) for how many and the cost"


def spelled(config: Config, labels: Labels) -> str:
    """`cpu-cpu (the CPU, Intel Xeon, batching profile cpu)`: a configuration's name and what it means."""
    batching = "batching off" if not config.batching_on else f"batching profile {config.batching_profile}"
    device = DEVICE_WORDS.get(config.device, config.device)
    return f"{labels[config]} ({device}, {device_name(config.device_name)}, {batching})"


def priced_answer(search: SearchAnswer, batch: int, pricing: Pricing) -> size.Priced | None:
    """Replicas of `search`'s server for the target load and their cost; None without a capacity."""
    if not search.capacity_rps:
        return None
    replica = pricing.replicas.get(search.config, Replica(None, "", 0, "", "unknown"))
    return size.priced(pricing.target_rps, search.capacity_rps, pricing.headroom, pricing.target_rps * batch,
                       pricing.prices, search.config, replica)


def decision_lines(answers: Answers, results: Sequence[CellResult], labels: Labels, pricing: Pricing | None,
                   p99_ms: float | None = None) -> tuple[str, ...]:
    """One decision per objective searched (or `p99_ms`) and request batch, lowest first. A `pricing` without
    replicas gets them from `results`, as the answer table does."""
    if pricing is not None and not pricing.replicas:
        pricing = replace(pricing, replicas=replicas_by_config(results))
    keys = sorted({(d.p99_objective_ms, d.request_batch_size) for d in answers.devices
                   if p99_ms is None or d.p99_objective_ms == p99_ms})
    lines = [_decision(answers, results, labels, pricing, objective, batch) for objective, batch in keys]
    if lines and pricing is None:
        lines[-1] = lines[-1].removesuffix(".") + f"; {NO_PRICES}."
    return tuple(lines)


def _at(devices: Sequence[DeviceAnswer], objective: float, batch: int) -> list[DeviceAnswer]:
    return [d for d in devices if (d.p99_objective_ms, d.request_batch_size) == (objective, batch)]


def _decision(answers: Answers, results: Sequence[CellResult], labels: Labels, pricing: Pricing | None,
              objective: float, batch: int) -> str:
    head = f"Decision at p99 ≤ {objective:g} ms, request batch {batch}"
    here = _at(answers.devices, objective, batch)
    if any(d.best for d in here):
        return f"{head}: {_choice(here, batch, labels, pricing)}"
    why = "; ".join(_why_none(d, results, labels) for d in here)
    instead = _looser(answers, objective, batch)
    if instead is None:
        return f"{head}: none on this machine. {_cap(why)}. No looser objective answered either."
    looser = _at(answers.objective_devices, instead, batch)
    return (f"{head}: none on this machine. {_cap(why)}. At p99 ≤ {instead:g} ms the same measurements answer: "
            f"{_choice(looser, batch, labels, pricing)}")


def _looser(answers: Answers, objective: float, batch: int) -> float | None:
    """The lowest objective above `objective` where some configuration at `batch` has a capacity."""
    return min((d.p99_objective_ms for d in answers.objective_devices if d.request_batch_size == batch
                and d.p99_objective_ms > objective and d.best is not None), default=None)


def _choice(here: Sequence[DeviceAnswer], batch: int, labels: Labels, pricing: Pricing | None) -> str:
    """The chosen configuration among each device's best, how sure, the other device beside it, and its cost."""
    bests = [d.best for d in here if d.best is not None]
    costs = {s.search_id: priced_answer(s, batch, pricing) for s in bests} if pricing else {}
    per_million = {sid: p.costs.per_million for sid, p in costs.items() if p is not None and p.costs.per_million}
    chosen = (min((s for s in bests if s.search_id in per_million), key=lambda s: per_million[s.search_id])
              if per_million else max(bests, key=lambda s: s.capacity_rps or 0.0))
    repeats = _repeats(chosen, here)
    text = f"{spelled(chosen.config, labels)}, {_capacity(chosen)} per server ({repeats}{_sureness(chosen)})"
    for other in bests:
        if other.config.device != chosen.config.device and other.capacity_rps:
            cost = costs.get(other.search_id)
            text += (f"; {DEVICE_WORDS.get(other.config.device, other.config.device)}'s best: {labels[other.config]}, "
                     f"{_capacity(other)} per server ({_gpu_cpu(chosen, other)}"
                     + (f", {money(cost.costs.per_million)} {pricing.prices.currency} per million inferences"
                        if pricing and cost and cost.costs.per_million else "") + ")")
    if pricing is not None:
        text += f"; {_cost(costs.get(chosen.search_id), pricing)}"
    return text + "."


def _repeats(chosen: SearchAnswer, here: Sequence[DeviceAnswer]) -> str:
    """`the lower of 2 repeats (464.1, 539.4 req/s); ` where the chosen configuration was searched more than once."""
    searches = [s for d in here for s in d.searches]
    repeated = sorted(repeats_of(chosen, searches), key=capacity)
    if len(repeated) < 2:
        return ""
    which = "the lower" if len(repeated) == 2 else "the lower median" if len(repeated) % 2 == 0 else "the median"
    values = ", ".join(fmt(s.capacity_rps) if s.met else "not met" for s in repeated)
    return f"{which} of {len(repeated)} repeats ({values} req/s); "


def _capacity(s: SearchAnswer) -> str:
    return f"{'at least ' if lower_bound(s) else ''}{fmt(s.capacity_rps)} req/s"


def _gpu_cpu(a: SearchAnswer, b: SearchAnswer) -> str:
    """`GPU/CPU ×9.26` of two answers on different devices; "at least"/"at most" where one is a lower bound."""
    gpu, cpu = (a, b) if a.config.device == "gpu" else (b, a)
    ratio = (gpu.capacity_rps or 0.0) / (cpu.capacity_rps or 1.0)
    bound = "at most " if lower_bound(cpu) and not lower_bound(gpu) else "at least " if lower_bound(gpu) and not \
        lower_bound(cpu) else "about " if lower_bound(cpu) else ""
    return f"GPU/CPU {bound}×{ratio:.2f}"


def _sureness(s: SearchAnswer) -> str:
    """`confirmed at 99% confidence; between 656.6 and 700.4 req/s (700.4 failed)` or `passed, not confirmed`."""
    if s.kind == AnswerKind.CONFIRMED:
        confidence = s.conclusion.capacity.verdict.evidence if s.conclusion and s.conclusion.capacity else None
        level = f" at {confidence.confidence:.0%} confidence" if confidence else ""
        bound = s.uncertainty()
        return f"confirmed{level}" + (f"; {bound}" if bound else "")
    return "passed, not confirmed: a longer measurement at that rate was not made"


def _cost(p: size.Priced | None, pricing: Pricing) -> str:
    target = f"for {pricing.target_rps:,g} req/s"
    if p is None:
        return f"{target}: not sized (no capacity)"
    c, placed, currency = p.costs, p.placement, pricing.prices.currency
    if p.refused:
        return f"{c.replicas} replicas {target}, not priced: {p.refused}"
    on = f" on {placed.instances} × {placed.instance.name}" if placed else ""
    example = " (EXAMPLE prices, not quotes)" if pricing.prices.example else ""
    return (f"{c.replicas} replicas{on} {target}: {fmt(c.per_hour, 2)} {currency}/h, "
            f"{money(c.per_million)} {currency} per million inferences{example}")


def _why_none(d: DeviceAnswer, results: Sequence[CellResult], labels: Labels) -> str:
    """Why no configuration on this device met the objective, in words a buyer can act on."""
    where = f"on {DEVICE_WORDS.get(d.device, d.device)} ({device_name(d.device_name)})"
    floor = host_floor_ms(results, d.device, d.request_batch_size)
    if floor is not None and floor > d.p99_objective_ms:
        return (f"{where}, this machine's own stalls, not the server's, put p99 ≤ {d.p99_objective_ms:g} ms out of "
                f"reach (a sleeping probe beside the server was held past it too often): whatever is bought, this "
                f"host cannot confirm objectives below {floor:g} ms; measure on a quieter machine")
    stalled = [(s, s.conclusion.stalls) for s in d.searches if s.conclusion and s.conclusion.stalls]
    if stalled:
        st = stalled[0][1]
        often = f", about {st.per_s:.1f} a second" if st.per_s else ""
        return (f"{where}, requests paused about {st.stall_ms:.0f} ms{often} at every load tried "
                f"({', '.join(labels[s.config] for s, _ in stalled)}): pauses, not a lack of capacity, so more servers "
                "would not meet it; the report's noise table says whose pauses they were")
    limited = [s for s in d.searches if s.conclusion and s.conclusion.loadgen_limited_rps is not None
               and s.conclusion.lowest_failing_rps is None]
    if limited and len(limited) == len(d.searches):
        return f"{where}, the load generator could not send fast enough to find the limit: give it more cores"
    failing = [s.lowest_failing_rps for s in d.searches if s.lowest_failing_rps]
    if not failing:
        return (f"{where}, no rate was decided within the time the search had (too few requests at each rate for "
                "a verdict at the stated confidence): give it more time (--max-minutes, --max-rate-s)")
    return (f"{where}, every rate tried missed it (the lowest failing: {fmt(min(failing))} req/s): this device "
            "cannot meet it at this request batch")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
