"""What bounded one answer: one verdict per card row, from one function (`what_bounded`), which the card, the findings,
`size` and figures.json read and none recomputes.

The first that applies, from the answer (`SearchAnswer` at the row's objective), its answering cell and its tool
ceiling (`loadtest.report.answers.tool_ceiling`):

1. **unconfirmed**: the capacity's own state by the one-figure rule (`SearchAnswer.kind` and `.bound`, read, not
   recomputed): passed, not confirmed; or a lower bound because the load generator could not offer more (what in it,
   from the cell at its limit: its CPU where busy, else its dispatch) or because the search stopped first;
2. **the tool**: the tool ceiling was not measured, or is under `CHECK_RATIO` (2×) the answer (but not for a TF
   Serving container whose twin's own Python server stood, `judge.tool_ceiling.who_stood`: its requests do not
   cross that server, so the load generator's signals at the answer decide), or the load generator saturated at
   the answer: its CPU (a process at `judge.tool_ceiling.LOADGEN_BUSY_PERCENT` of a core, Locust's own warning, or a
   `saturated` flag for its CPU), or its dispatch lag over its limit that the host probe on its cores does not
   explain (`loadtest.judge.noise.host_explains_lateness`);
3. **the host**: the host probe on the load generator's cores explains that dispatch lag, or the probe on either
   side explains the requests over the objective at the answer (`loadtest.judge.noise.attribute`, where they are
   at least half the share a p99 allows over it);
4. **device alone not measured**: an embedded stand-in's row with no device floor;
5. **the stand-in's serving path**: it served under 50% of the device alone, or not clear of 50% by more than the
   machine's speed moved over the run (`loadtest.report.answers.bound.ServedShare.clear`);
6. **the runtime's dispatch**, or **an idle device** (`bound.held_by`);
7. **the device**: it served at least 50% of the device alone, clear of it by the machine's movement, busy;
8. **the production server**: a TF Serving container (what the buyer runs) where the device did not bound it.

A row is FOR BUYING only where its verdict is the device or the production server (`RowVerdict.for_buying`).

Pure functions over `SearchAnswer`s. Not for: the tool ceiling itself, the floor's arithmetic (`bound`) or the card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from loadtest.evidence.records import CellResult
from loadtest.judge import noise
from loadtest.judge.conclusion import AnswerKind
from loadtest.judge.objectives import Bound
from loadtest.judge.tool_ceiling import CHECK_RATIO, Stood, lag_over, loadgen_busy
from loadtest.report.answers.answers import Answers, SearchAnswer, lower_bound
from loadtest.report.answers.bound import Held, ServedShare, held_by, served_share
from loadtest.report.answers.tool_ceiling import NAME, NOT_MEASURED, ToolCeiling, ceiling_for
from loadtest.report.formatting import number as fmt
from serving.endpoint import ServerKind

NOT_MEASURED_WHY = f"{NAME} not measured"  # the tool's why where no twin measured the answer's ceiling


class Bounded(StrEnum):
    """What bounded an answer, in the order `what_bounded` tries them."""

    NOTHING = "nothing passed"
    UNCONFIRMED = "unconfirmed"
    TOOL = "the tool"
    HOST = "the host"
    NO_DEVICE_ALONE = "device alone not measured"
    SERVING_PATH = "the stand-in's serving path"
    RUNTIME = "the runtime's dispatch"
    IDLE_DEVICE = "an idle device"
    DEVICE = "the device"
    PRODUCTION = "the production server"


BUYABLE = (Bounded.DEVICE, Bounded.PRODUCTION)
HELD = {Held.SERVING_PATH: Bounded.SERVING_PATH, Held.RUNTIME: Bounded.RUNTIME, Held.IDLE_DEVICE: Bounded.IDLE_DEVICE,
        Held.DEVICE: Bounded.DEVICE}


@dataclass(frozen=True)
class RowVerdict:
    """One answer's verdict: what bounded it, why in a few words, its tool ceiling and what it served of the device
    alone (None: not measured)."""

    bounded: Bounded
    why: str = ""
    ceiling: ToolCeiling = NOT_MEASURED
    served: ServedShare | None = field(default=None, compare=False)

    @property
    def for_buying(self) -> bool:
        return self.bounded in BUYABLE

    @property
    def confirmed(self) -> bool:
        """A confirmed answer that no lower bound qualifies: a floor on what the device serves (its boxes an upper
        bound where not for buying)."""
        return self.bounded not in (Bounded.NOTHING, Bounded.UNCONFIRMED)

    def text(self) -> str:
        """`the tool: tool ceiling not measured: no twin was run`, `the device`."""
        return f"{self.bounded.value}: {self.why}" if self.why else self.bounded.value

    def with_ceiling(self) -> tuple[str, str]:
        """The verdict and its tool ceiling, the ceiling said once: where the why is the ceiling, the fuller of the
        two (`("the tool", "tool ceiling not measured: no twin was run")`), else the verdict and the ceiling."""
        if self.why.startswith(NAME):
            return self.bounded.value, self.ceiling.text() if self.why == NOT_MEASURED_WHY else self.why
        return self.text(), self.ceiling.text()

    def with_ceiling_text(self) -> str:
        """The card's "bounded by": `the tool: tool ceiling not measured: no twin was run`, `the device; tool ceiling
        ≥ 2,000.0 req/s (2× the answer)`."""
        what, aside = self.with_ceiling()
        return f"{what}{':' if self.why.startswith(NAME) else ';'} {aside}"


def answer_cell(search: SearchAnswer) -> CellResult | None:
    """The cell the answer stands on: its confirmation's, else its highest pass's."""
    step = search.conclusion.answer if search.conclusion else None
    return step.result if step is not None else None


def what_bounded(search: SearchAnswer | None, ceiling: ToolCeiling = NOT_MEASURED,
                 moved: float | None = None) -> RowVerdict:
    """What bounded `search`'s answer at its objective, the first that applies (see the module); `moved`: how far
    the machine's speed moved over its run (`loadtest.report.answers.movement`; None: not measured)."""
    if search is None or search.figure_rps is None:
        return RowVerdict(Bounded.NOTHING, "", ceiling)
    cell = answer_cell(search)
    served = served_share(cell, moved) if cell is not None else None
    first = (_unconfirmed(search, ceiling) or _tool(search, cell, ceiling) or _host(search, cell)
             or _held(search, cell, served))
    return RowVerdict(first[0], first[1], ceiling, served)


def _unconfirmed(search: SearchAnswer, ceiling: ToolCeiling = NOT_MEASURED) -> tuple[Bounded, str] | None:
    """The figure's own state as every table prints it (`figure_text.capacity_text`): a "≥" on a higher unconfirmed
    pass beside a confirmed capacity qualifies that pass, not the capacity."""
    if lower_bound(search) and (search.capacity_rps is None or search.passed_rps is None):
        why = search.bound.value
        limit = search.conclusion.loadgen_limit if search.conclusion else None
        if search.bound == Bound.LOADGEN and limit is not None:
            why = f"{why} ({_what_limited(limit.result)}){_carried_elsewhere(search, ceiling)}"
        return Bounded.UNCONFIRMED, f"a lower bound: {why}"
    if search.kind != AnswerKind.CONFIRMED:
        return Bounded.UNCONFIRMED, "passed, not confirmed"
    return None


def _tool(search: SearchAnswer, cell: CellResult | None, ceiling: ToolCeiling) -> tuple[Bounded, str] | None:
    if not ceiling.covers(search.figure_rps):
        if not ceiling.measured:  # why, in the row's tool ceiling (`ToolCeiling.value`)
            return Bounded.TOOL, NOT_MEASURED_WHY
        if not _twins_own_server(search, cell, ceiling):
            return Bounded.TOOL, f"{ceiling.text()}, under {CHECK_RATIO:g}× the answer"
    if cell is None:
        return None
    busy = loadgen_busy(cell)
    if busy:
        return Bounded.TOOL, f"the load generator's CPU: {busy}"
    lag = lag_over(cell)
    if lag and not noise.host_explains_lateness(cell):
        return Bounded.TOOL, f"the load generator's {lag}, which the host probe on its cores does not explain"
    return None


def _twins_own_server(search: SearchAnswer, cell: CellResult | None, ceiling: ToolCeiling) -> bool:
    """A TF Serving container's twin stopped by its own Python server, not the load generator: the ceiling is our
    stand-in's path, which the container's requests do not cross, so whether the tool bounded the answer is the load
    generator's signals at the answer (its CPU, its dispatch lag), which `_tool` reads next."""
    return search.config.kind == ServerKind.CONTAINER and ceiling.stood == Stood.TWIN_SERVER and cell is not None


def _host(search: SearchAnswer, cell: CellResult | None) -> tuple[Bounded, str] | None:
    if cell is None:
        return None
    lag = lag_over(cell)
    if lag and noise.host_explains_lateness(cell):
        return Bounded.HOST, f"its stalls on the load generator's cores explain the {lag}"
    tail = noise.attribute([cell], search.p99_objective_ms)
    if tail.source == noise.NoiseSource.HOST and tail.client_share >= noise.HOST_SHARE_LIMIT:
        where = noise.SIDE_NAMES.get(tail.host_side, tail.host_side)
        return (Bounded.HOST, f"its stalls on {where} explain the requests over {search.p99_objective_ms:g} ms "
                f"({tail.client_share:.1%} at the client)")
    return None


def _held(search: SearchAnswer, cell: CellResult | None, served: ServedShare | None) -> tuple[Bounded, str]:
    held = held_by(cell, served) if cell is not None and served is not None else None
    if search.config.kind == ServerKind.CONTAINER:
        return (Bounded.DEVICE, _share_words(served)) if held == Held.DEVICE else (Bounded.PRODUCTION, "")
    if held is None or served is None:
        return Bounded.NO_DEVICE_ALONE, ""
    return HELD[held], _share_words(served)


def _share_words(served: ServedShare | None) -> str:
    return served.words() if served is not None else ""


def _carried_elsewhere(search: SearchAnswer, ceiling: ToolCeiling) -> str:
    """Where the twin carried the rate the search blamed on the load generator: the same load generator, beside a
    server that costs nothing, sent it on time, so what it lacked in the search was the share of the host the
    server took, not a ceiling of its own."""
    limited = search.conclusion.loadgen_limited_rps if search.conclusion else None
    if limited is None or not ceiling.measured or ceiling.rps is None or ceiling.rps < limited:
        return ""
    return (f", though it carried {fmt(ceiling.rps)} req/s against its twin: the host it shares with the server, "
            "not its own ceiling")


def _what_limited(cell: CellResult) -> str:
    """What in the load generator limited the cell above a lower bound: `its CPU: a Locust process at 96% of a core`;
    with its CPU calm, `its dispatch: sends late with Locust at 27% of a core, which the host probe does not explain`
    (a cell whose lateness the host probe explains is judged on its latencies, never the load generator's limit)."""
    busy = loadgen_busy(cell)
    if busy:
        return f"its CPU: {busy}"
    cpu = (f" with Locust at {max(cell.loadgen_process_cpu_percent):.0f}% of a core"
           if cell.loadgen_process_cpu_percent else ", its CPU not recorded")
    probed = "loadgen" in noise.probe_sides(cell)
    return (f"its dispatch: sends late{cpu}, "
            + ("which the host probe on its cores does not explain" if probed else "no host probe on its cores"))


def finding(device: str, verdict: RowVerdict, detail: str) -> str:
    """The findings' line for an answer: `cpu (Intel Xeon): bounded by the tool (tool ceiling not measured: no twin
    was run).`, then `detail` (`loadtest.report.answers.bound.bound_line`) where the device floor's own rule gave the
    verdict (the serving path, the runtime, an idle device, the device), so the two never disagree."""
    what, aside = verdict.with_ceiling()
    lead = f"{device}: bounded by {what} ({aside})."
    return f"{lead} {detail}" if detail and verdict.bounded in HELD.values() else lead


def verdict_in(search: SearchAnswer | None, answers: Answers) -> RowVerdict:
    """`what_bounded` with the search's own tool ceiling (not measured where no twin checked it) and the machine's
    movement over its run, from `answers`."""
    if search is None:
        return what_bounded(None)
    return what_bounded(search, ceiling_for(search.search_id, answers.ceilings),
                        answers.movements.get(search.search_id))


__all__ = ["BUYABLE", "Bounded", "RowVerdict", "answer_cell", "finding", "verdict_in", "what_bounded"]
