"""What the card (`loadtest.report.card.card`) leans on from the answers: why none met, and what to run next.

- `why_none_lines`: where no configuration met an objective at a request batch, why, in words a buyer can act
  on (the machine's own stalls put the objective out of reach here; pauses independent of the load, which more
  servers would not remove; the load generator could not drive it; rates passed but none was confirmed, with the
  highest pass as the objective table gives it; every rate tried missed it). The card's row says "none" or "none
  confirmed (… passed)"; these lines stand below it;
- `run_next`: the command that gets an answer the device bounds, with the run's own targets (`GOALS`), price list
  and server flags (TF Serving itself where the embedded server was measured, or batching tuned);
- `spelled`: a configuration's name and what it means, for the Terms table.

Pure functions over `Answers` and the records. Not for: the answers (`loadtest.report.answers.answers`), the card itself
or the report's layout (`loadtest.report.headline`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from loadtest.evidence.records import CellResult
from loadtest.judge.goals import Target, goal_text
from loadtest.report.answers.answers import Answers, DeviceAnswer
from loadtest.report.blocks import device_name
from loadtest.report.configs import Config
from loadtest.report.formatting import number as fmt
from loadtest.report.host_floor import host_floor_ms
from loadtest.report.sizing.prices import DEFAULT_PRICES
from serving.endpoint import ServerKind

Labels = Mapping[Config, str]
DEVICE_WORDS = {"cpu": "the CPU", "gpu": "the GPU"}


def spelled(config: Config, labels: Labels) -> str:
    """`cpu-cpu (the CPU, Intel Xeon, 16 vCPUs (VM), batching profile cpu)`: a configuration's name and what it
    means (the machine's CPUs where recorded, `loadtest.report.blocks.machine_words`)."""
    batching = "batching off" if not config.batching_on else f"batching profile {config.batching_profile}"
    device = DEVICE_WORDS.get(config.device, config.device)
    return f"{labels[config]} ({device}, {device_name(config.device_name, config.machine)}, {batching})"


def why_none_lines(answers: Answers, results: Sequence[CellResult], labels: Labels,
                   p99_objective_ms: float | None = None) -> tuple[str, ...]:
    """Per objective searched (or `p99_objective_ms`) and request batch where no configuration met it: why, per
    device, in words a buyer can act on (the card's row gives only the figure)."""
    keys = sorted({(d.p99_objective_ms, d.request_batch_size) for d in answers.devices
                   if p99_objective_ms is None or d.p99_objective_ms == p99_objective_ms})
    lines = []
    for objective, batch in keys:
        here = _at(answers.devices, objective, batch)
        if not any(d.best and d.best.met for d in here):
            why = "; ".join(_why_none(d, results, labels) for d in here)
            lines.append(f"Why none confirmed p99 ≤ {objective:g} ms at request batch {batch}: {why}.")
    return tuple(lines)


def _at(devices: Sequence[DeviceAnswer], objective: float, batch: int) -> list[DeviceAnswer]:
    return [d for d in devices if (d.p99_objective_ms, d.request_batch_size) == (objective, batch)]


def _configs(here: Sequence[DeviceAnswer]) -> list[Config]:
    """Every configuration searched at one objective and request batch."""
    return [s.config for d in here for s in d.searches]


def run_next(configs: Sequence[Config], targets: Sequence[Target], prices: str = "", shapes: bool = False) -> str:
    """The command that gets an answer the device bounds, and where: the run's own targets (`GOALS`, as
    `make capacity` takes them) and its price list where it was not the default (`DEFAULT_PRICES`, which `make
    capacity` reads without one), on TF Serving itself where the embedded server was measured (none of the embedded
    server's flags: TF Serving takes its own; `stand_in_again` gives them), else with the batching tuned; `shapes`:
    with `SHAPES=auto`, where a replica was priced on cores it kept idle. Pasted as printed, it runs what it says."""
    words = [*_capacity_words(configs, targets, prices), *(["SHAPES=auto"] if shapes else [])]
    command = f"`make capacity {' '.join(words)}`"
    if any(c.kind == ServerKind.EMBEDDED for c in configs):
        return f"{command} on TF Serving."
    device = next((c.device for c in configs if c.batching_on), configs[0].device if configs else "cpu")
    return f"{command}, or `make tune DEVICE={device}`."


def stand_in_again(configs: Sequence[Config], targets: Sequence[Target], prices: str = "",
                   server_flags: Sequence[str] = (), shapes: bool = False) -> str:
    """A line under the card, `Run the stand-in again as measured: ` and the `make capacity` command with its
    `LOADTEST_ARGS="--server-flags=…"`: the embedded server rerun with the flags the run launched it with; "" where it
    ran without any, or was not measured; `SHAPES=auto` as `run_next` has it."""
    if not server_flags or not any(c.kind == ServerKind.EMBEDDED for c in configs):
        return ""
    flags = f"LOADTEST_ARGS={_make_value('--server-flags=' + shlex.quote(shlex.join(server_flags)))}"
    words = " ".join([*_capacity_words(configs, targets, prices), *(["SHAPES=auto"] if shapes else []), flags])
    return f"Run the stand-in again as measured: `make capacity {words}`."


def _capacity_words(configs: Sequence[Config], targets: Sequence[Target], prices: str) -> list[str]:
    serve = " ".join(dict.fromkeys(f"{c.device}/{c.batching_profile}" for c in configs))
    goals = " ".join(dict.fromkeys(goal_text(t) for t in targets))
    return [f'SERVE="{serve}"', f'GOALS="{goals}"', *([f"PRICES={shlex.quote(prices)}"] if _own(prices) else [])]


def _own(prices: str) -> bool:
    """Whether a run priced on a list of its own (given, and not the default one)."""
    return bool(prices) and Path(prices).resolve() != DEFAULT_PRICES.resolve()


def _make_value(text: str) -> str:
    """`text` quoted for the shell so that make's recipe, which expands it unquoted, splits it as written."""
    return f'"{text}"' if not any(c in text for c in '"$`\\') else shlex.quote(text)


def server_flags(results: Sequence[CellResult]) -> tuple[str, ...]:
    """The embedded server's flags the run launched it with (its plan's `[launch] server_flags`), () where none."""
    for cell in results:
        flags = cell.provenance.launch().get("server_flags") if cell.provenance else None
        if flags and cell.server.kind == ServerKind.EMBEDDED:
            return tuple(str(f) for f in flags)
    return ()


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
    passed = [s for s in d.searches if s.passed_rps is not None]
    if passed:
        s = max(passed, key=lambda one: one.passed_rps or 0.0)
        return (f"{where}, {labels[s.config]}'s highest pass, {fmt(s.passed_rps)} req/s, passed, not confirmed: the "
                "search's own confirmation did not hold; a longer search (--max-minutes) may confirm a rate here")
    failing = [s.lowest_failing_rps for s in d.searches if s.lowest_failing_rps]
    if not failing:
        return (f"{where}, no rate was decided within the time the search had (too few requests at each rate for "
                "a verdict at the stated confidence): give it more time (--max-minutes, --max-rate-s)")
    return (f"{where}, every rate tried missed it (the lowest failing: {fmt(min(failing))} req/s): this device "
            "cannot meet it at this request batch")
