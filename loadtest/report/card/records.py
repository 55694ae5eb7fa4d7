"""The card's records: one row of the card (a target, `loadtest.judge.goals.Target`, on one device).

Not for: building the card (`loadtest.report.card.card`) or its words (`loadtest.report.card.words`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from loadtest.judge.goals import Target
from loadtest.report.sizing.fleet import SizingLine


@dataclass(frozen=True)
class CardRow:
    """One target on one device: its best answer and, where for buying, what it costs."""

    target: Target
    device: str  # "cpu" or "gpu"
    setup: str  # "batching on (profile cpu)", "batching off"; "" where nothing met the objective
    capacity_rps: float | None  # the figure: the confirmed capacity, else the highest pass (`state` says which)
    failed_rps: float | None  # the upper end: the lowest rate above it shown to fail (None: none measured)
    at_least: bool  # a lower bound (the load generator's limit, or the search stopped: `state` says which)
    p99_ms: float | None  # the p99 upper estimate at the capacity (its verdict's), as the answer table gives it
    busy: str
    served_share: float | None  # served ÷ the device alone at the batch it ran; None: not measured
    for_buying: bool
    boxes: tuple[int, int] | None = None  # fewest–most instances (or replicas) over the capacity's range, spare apart
    spare: int = 0  # instances (or replicas) more: the target still served with these lost (N + spare)
    memory_counted: bool = False  # memory limited replicas per instance (both the replica's and the instance's known)
    instance: str = ""  # the instance type, "" where priced per replica
    usd_per_hour: float | None = None  # for the boxes at the capacity (of repeats, the typical one)
    usd_per_m_requests: float | None = None
    usd_per_m_images: float | None = None
    why_not: str = ""  # why no price: the serving path bounded it, nothing met, no instance holds it
    state: str = ""  # the figure as every table prints it (`loadtest.report.answers.figure_text.capacity_text`)
    figure: str = ""  # the card's one figure of it (`figure_text.figure_only`: no higher pass beside it)
    confirmed: bool = False  # a rate was confirmed at the objective ("none confirmed" where not)
    higher: str = ""  # other setups on the device with a higher unconfirmed pass, named: "batching on 874.5 passed"
    refused: str = ""  # why the price list prices no instance for it
    replica_cores: int | None = None  # the replica shape sized on, in a shape sweep (None: no shape measured)
    per_instance: int | None = None  # replicas one instance holds, where a shape was sized on and placed
    shared_cores: bool = False  # that shape shared the load generator's cores: its capacity is a lower bound
    repeats: int = 1  # the searches its capacity stands on (several: a comparison's repeats)
    range_rps: tuple[float, float] | None = None  # with repeats: the lowest repeat's capacity, the highest's upper end
    moved: str = ""  # where repeats moved the capacity beyond the bracket of the one priced: by how much
    sizing: SizingLine | None = None  # the boxes' arithmetic (the card's sizing table); None: no boxes on instances
    bounded: str = ""  # what bounded the answer (`loadtest.report.answers.verdict.Bounded`'s value)
    verdict: str = ""  # that verdict with why (the card prints it in `bounded_by`)
    tool_ceiling: str = ""  # the answer's tool ceiling (`ToolCeiling.value`)
    bounded_by: str = ""  # the verdict and its tool ceiling, the ceiling said once: the card's "bounded by"
    at_most: bool = False  # not for buying: the boxes and prices are the most a server at least this fast needs
    stand_in: bool = False  # the figures are the embedded stand-in's, not a TF Serving container's

    def as_dict(self) -> dict:
        """figures.json's row: its target under the keys figures.json has always had (`p99_ms`: the objective)."""
        t = self.target
        return {**asdict(self), "target": {"p99_ms": t.p99_objective_ms, "batch": t.batch, "rate_rps": t.rate_rps}}


__all__ = ["CardRow", "Target"]
