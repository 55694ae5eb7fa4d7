"""The decision a report opens with: per objective searched and request batch, what to buy.

One line each, as Model Analyzer's summary opens with its recommendation, and first the server that was
measured (`measured_on`: the TF Serving container, or the embedded server with its runtime, "not TF
Serving"):

- where a configuration met the objective: which one (its name spelled out: device, device name,
  batching profile), its capacity per server and how sure that is (confirmed at the stated confidence,
  between which rates), the other device's best beside it, and, given a target load and prices, how
  many replicas on which instances, per hour and per million inferences. With prices the cheapest per
  million inferences is chosen, else the highest capacity. Where the serving path bounded the chosen
  answer (it served less than half the device alone at the batch it ran, `loadtest.report.bound`), no
  purchase line: it says so, compares the server on each device (not the devices), and ends with "run
  next:" and the command that gets an answer the device bounds (`run_next`);
- where none did: why, in words a buyer can act on (the machine's own stalls put the objective out of
  reach here; pauses independent of the load, which more servers would not remove; the load generator
  could not drive it; rates passed but none was confirmed, with the highest pass as the objective table
  gives it; every rate tried missed it), then the decision at the lowest looser objective the same cells
  answer.

Replicas and cost come from `priced_answer`, the same figures the answer table prints.

Pure functions over `Answers` and the records. Not for: the answers (`loadtest.report.answers`), the
arithmetic of replicas and cost (`loadtest.report.sizing.size`) or the report's layout
(`loadtest.report.headline`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from loadtest.evidence.records import CellResult
from loadtest.judge.conclusion import AnswerKind
from loadtest.report.answers import Answers, DeviceAnswer, SearchAnswer, capacity, lower_bound, repeats_of
from loadtest.report.blocks import device_name
from loadtest.report.bound import SERVED_SHARE, ServedShare, served_share
from loadtest.report.configs import Config
from loadtest.report.formatting import money
from loadtest.report.formatting import number as fmt
from loadtest.report.sections.noise_table import host_floor_ms
from loadtest.report.sizing import size
from loadtest.report.sizing.instances import Pricing, Replica, replicas_by_config
from serving.endpoint import ServerKind, kind_display_name, server_with_runtime

Labels = Mapping[Config, str]
DEVICE_WORDS = {"cpu": "the CPU", "gpu": "the GPU"}
SHORT_KIND = {AnswerKind.CONFIRMED: "confirmed", AnswerKind.PASSED: "passed, not confirmed"}
NO_PRICES = "give a target load and prices (--target-rps, --prices) for how many and the cost"


def spelled(config: Config, labels: Labels) -> str:
    """`cpu-cpu (the CPU, Intel Xeon, 16 vCPUs (VM), batching profile cpu)`: a configuration's name and what it
    means (the machine's CPUs where recorded, `loadtest.report.blocks.machine_words`)."""
    batching = "batching off" if not config.batching_on else f"batching profile {config.batching_profile}"
    device = DEVICE_WORDS.get(config.device, config.device)
    return f"{labels[config]} ({device}, {device_name(config.device_name, config.machine)}, {batching})"


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
    if lines and pricing is None and "Run next:" not in lines[-1]:  # no purchase is asked where none is given
        lines[-1] = lines[-1].removesuffix(".") + f"; {NO_PRICES}."
    return tuple(lines)


def _at(devices: Sequence[DeviceAnswer], objective: float, batch: int) -> list[DeviceAnswer]:
    return [d for d in devices if (d.p99_objective_ms, d.request_batch_size) == (objective, batch)]


def measured_on(configs: Sequence[Config]) -> str:
    """`the embedded server (JAX, the same weights (.keras)), not TF Serving`; per device where runtimes differ."""
    kinds = list(dict.fromkeys(c.kind for c in configs))
    runtimes = {c.device: c.runtime for c in configs}
    if len(kinds) == 1 and len(set(runtimes.values())) > 1:
        server = f"{kind_display_name(kinds[0])} (" + "; ".join(
            f"{runtime} on {DEVICE_WORDS.get(device, device)}" for device, runtime in sorted(runtimes.items(),
                                                                                          reverse=True)) + ")"
    else:
        server = " and ".join(dict.fromkeys(server_with_runtime(c.kind, c.runtime) for c in configs))
    only_embedded = ServerKind.EMBEDDED in kinds and ServerKind.CONTAINER not in kinds
    return f"the {server}" + (", not TF Serving" if only_embedded else "")


def _decision(answers: Answers, results: Sequence[CellResult], labels: Labels, pricing: Pricing | None,
              objective: float, batch: int) -> str:
    here = _at(answers.devices, objective, batch)
    head = f"Decision at p99 ≤ {objective:g} ms, request batch {batch}, measured on {measured_on(_configs(here))}"
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
    served = _served(chosen)
    if served is not None and served.share < SERVED_SHARE:
        return _path_bound(chosen, bests, served, here, batch, labels)
    text = f"{spelled(chosen.config, labels)}, {_capacity(chosen)} per server ({repeats}{_sureness(chosen)})"
    for device, other in _others(chosen, bests):
        cost = costs.get(other.search_id)
        text += (f"; {device}'s best: {labels[other.config]}, {_capacity(other)} per server ({_gpu_cpu(chosen, other)}"
                 + (f", {money(cost.costs.per_million)} {pricing.prices.currency} per million inferences"
                    if pricing and cost and cost.costs.per_million else "") + ")")
    if pricing is not None:
        text += f"; {_cost(costs.get(chosen.search_id), pricing)}"
    return text + "."


def _served(s: SearchAnswer) -> ServedShare | None:
    """What the answer's cell served against the device alone at the batch it ran; None where not measured."""
    capacity = s.conclusion.capacity if s.conclusion else None
    return served_share(capacity.result) if capacity is not None else None


def _path_bound(chosen: SearchAnswer, bests: Sequence[SearchAnswer], served: ServedShare,
                here: Sequence[DeviceAnswer], batch: int, labels: Labels) -> str:
    """No purchase: the serving path bounded the answer. The server's capacity on each device, compared as the
    server's, and what to run next."""
    device = DEVICE_WORDS.get(chosen.config.device, chosen.config.device)
    text = (f"no purchase from this: the serving path bounded it, not the device ({labels[chosen.config]} served "
            f"{served.share:.0%} of what {device} alone runs at {served.floor.at}). The server on {device}: "
            f"{spelled(chosen.config, labels)}, {_capacity(chosen)} per server ({_repeats(chosen, here)}"
            f"{_sureness(chosen)})")
    for where, other in _others(chosen, bests):
        text += (f"; on {where}: {labels[other.config]}, {_capacity(other)} per server "
                 f"({_gpu_cpu(chosen, other, of_server=True)})")
    return f"{text}. Run next: {run_next(_configs(here), batch, chosen.p99_objective_ms)}."


def _others(chosen: SearchAnswer, bests: Sequence[SearchAnswer]) -> list[tuple[str, SearchAnswer]]:
    """The other devices' best answers with a capacity, each with its device in words (`the GPU`): what the
    decision sets beside the chosen one."""
    return [(DEVICE_WORDS.get(o.config.device, o.config.device), o) for o in bests
            if o.config.device != chosen.config.device and o.capacity_rps]


def _configs(here: Sequence[DeviceAnswer]) -> list[Config]:
    """Every configuration searched at one objective and request batch."""
    return [s.config for d in here for s in d.searches]


def run_next(configs: Sequence[Config], batch: int, objective: float) -> str:
    """The command that gets an answer the device bounds: TF Serving itself where the embedded server was
    measured, a larger request batch, or batching tuned."""
    serve = " ".join(dict.fromkeys(f"{c.device}/{c.batching_profile}" for c in configs))

    def command(batches: str) -> str:
        return f'`make capacity SERVE="{serve}" BATCH="{batches}" P99_MS={objective:g}`'

    if any(c.kind == ServerKind.EMBEDDED for c in configs):
        batches = f"{batch} 32" if batch < 32 else str(batch)
        return (f"{command(batches)} where Docker runs TF Serving's containers (a GPU's "
                "needs NVIDIA's container runtime): TF Serving itself on the same devices"
                + (", at a larger request batch too" if batch < 32 else ""))
    device = next((c.device for c in configs if c.batching_on), configs[0].device if configs else "cpu")
    return f"{command(str(batch * 4))} (a larger request batch), or `make tune DEVICE={device}` (batching tuned)"


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


def _gpu_cpu(a: SearchAnswer, b: SearchAnswer, of_server: bool = False) -> str:
    """`GPU/CPU ×9.26` of two answers on different devices; "at least"/"at most" where one has no upper end;
    `of_server`: `the server on the GPU ÷ on the CPU ×0.66` (a comparison of the server, not the devices)."""
    gpu, cpu = (a, b) if a.config.device == "gpu" else (b, a)
    ratio = (gpu.capacity_rps or 0.0) / (cpu.capacity_rps or 1.0)
    what = "the server on the GPU ÷ on the CPU" if of_server else "GPU/CPU"
    if _open(cpu) and _open(gpu):
        return f"{what}: no ratio, neither capacity has an upper end"
    bound = "at most " if _open(cpu) else "at least " if _open(gpu) else ""
    return f"{what} {bound}×{ratio:.2f}"


def _open(s: SearchAnswer) -> bool:
    """A capacity with no upper end (the load generator stopped it, or no higher rate was measured not passing):
    only a lower bound, so a ratio with it is a bound too."""
    return lower_bound(s) or s.upper_rps is None


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
    example = " (EXAMPLE prices, not quotes)" if pricing.prices.example else ""
    if placed is None:
        return (f"{c.replicas} replicas {target}: {fmt(c.per_hour, 2)} {currency}/h, "
                f"{money(c.per_million)} {currency} per million inferences{example}")
    i = placed.instance
    return (f"{c.replicas} replicas on {placed.instances} × {i.name} {target} ({i.describe()}, "
            f"{fmt(i.price_per_hour, 2)} {currency}/h each, {placed.per_instance} replicas each): "
            f"{fmt(c.per_hour, 2)} {currency}/h, {money(c.per_million)} {currency} per million inferences{example}")


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
    passed = [(s, at) for s in d.searches for at in s.objectives
              if at.p99_objective_ms == d.p99_objective_ms and at.capacity_rps]
    if passed:
        s, at = max(passed, key=lambda pair: pair[1].capacity_rps or 0.0)
        confirmed = at.kind == AnswerKind.PASSED and at.confirmed_rps
        below = f"; {fmt(at.confirmed_rps)} req/s confirmed" if confirmed else ""
        return (f"{where}, {labels[s.config]}'s highest pass, {fmt(at.capacity_rps)} req/s, {SHORT_KIND[at.kind]}"
                f"{below}, but the search's own confirmation did not hold: a longer search (--max-minutes) may "
                "confirm a rate here")
    failing = [s.lowest_failing_rps for s in d.searches if s.lowest_failing_rps]
    if not failing:
        return (f"{where}, no rate was decided within the time the search had (too few requests at each rate for "
                "a verdict at the stated confidence): give it more time (--max-minutes, --max-rate-s)")
    return (f"{where}, every rate tried missed it (the lowest failing: {fmt(min(failing))} req/s): this device "
            "cannot meet it at this request batch")


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
