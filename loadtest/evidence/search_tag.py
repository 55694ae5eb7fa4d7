"""A capacity search's tag on its cells (`CellResult.search`): which search, why the cell was measured, the
objective, the comparison it belongs to, and the cell's own evidence on the objective.

Written as a nested object of the cell's JSON line. Keys a search did not write stay absent (older records lack
`confidence`, `confirming`, `objectives`, `comparison`; `attempt`, `when` and `shape`, a shape sweep's, are written
only where they apply), so `to_dict` writes exactly the keys the tag has and `from_dict(tag.to_dict()) == tag`.
A cell no search measured has no tag (`CellResult.search` is None, written `{}`).

Not for: making the tags (`loadtest.search.capacity_search.search_tag`) or reading answers from them
(`loadtest.judge.objectives`, `loadtest.report.answers.answers`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.evidence.objective import Objective
from loadtest.evidence.vocab import Role


@dataclass(frozen=True)
class ComparisonTag:
    """The paired (or one-after-the-other) comparison a cell belongs to (`loadtest.search.comparison`)."""

    id: str  # one per request batch size and repeat
    repeat: int
    paired: bool  # interleaved, all servers up at once (False: searched one after the other)
    servers: tuple[str, ...]  # the servers compared, the reference cell's first

    def to_dict(self) -> dict:
        return {"id": self.id, "repeat": self.repeat, "paired": self.paired, "servers": list(self.servers)}

    @classmethod
    def from_dict(cls, raw: dict) -> ComparisonTag:
        return cls(raw["id"], raw["repeat"], raw["paired"], tuple(raw["servers"]))


@dataclass(frozen=True)
class ShapeTag:
    """The replica shape a search's server had, in a shape sweep (`capacity --shapes`): the configuration `family`
    it is one shape of, given `cores` cores (`cpus`, a `taskset -c` list) and one gRPC frontend per core. Where
    `shares_loadgen`, some of those cores were the load generator's too: its capacity is a lower bound of what
    `cores` cores alone serve."""

    family: str  # the configuration's name without its shape ("cpu-off"): the shapes of one configuration share it
    cores: int  # cores per replica
    cpus: str  # the cores it was pinned to, "0-1"
    shares_loadgen: bool = False

    @property
    def server_name(self) -> str:
        """How results name the server of this shape: `cpu-off-2c`."""
        return f"{self.family}-{self.cores}c"

    def to_dict(self) -> dict:
        return {"family": self.family, "cores": self.cores, "cpus": self.cpus, "shares_loadgen": self.shares_loadgen}

    @classmethod
    def from_dict(cls, raw: dict) -> ShapeTag:
        return cls(raw["family"], int(raw["cores"]), raw["cpus"], bool(raw.get("shares_loadgen", False)))


@dataclass(frozen=True)
class CellEvidence:
    """The cell's own verdict on the search's objective (`loadtest.judge.verdicts.evidence_record`): its decision
    and why, and, where the cell had evidence to count, its requests, those over the objective and the
    early-stopping estimate of its p99. The counts are written all together or not at all (`requests` None)."""

    decision: str  # a loadtest.judge.verdicts.Decision value
    reason: str
    requests: int | None = None
    over: int | None = None  # requests slower than the objective
    p99_estimate_ms: float | None = None
    confidence: float | None = None
    requests_to_pass: int | None = None
    dispersion: float | None = None  # the slow requests' clustering, where over 1 (`loadtest.judge.dispersion`)

    def to_dict(self) -> dict:
        record: dict[str, Any] = {"decision": self.decision, "reason": self.reason}
        if self.requests is not None:
            record.update(requests=self.requests, over=self.over, p99_estimate_ms=self.p99_estimate_ms,
                          confidence=self.confidence, requests_to_pass=self.requests_to_pass)
        if self.dispersion is not None:
            record["dispersion"] = self.dispersion
        return record

    @classmethod
    def from_dict(cls, raw: dict) -> CellEvidence:
        return cls(raw["decision"], raw["reason"], raw.get("requests"), raw.get("over"), raw.get("p99_estimate_ms"),
                   raw.get("confidence"), raw.get("requests_to_pass"), raw.get("dispersion"))


@dataclass(frozen=True)
class SearchTag:
    """What a search's cell records about the search. None: the key was not written (older records)."""

    id: str  # the search's id, "<run id>/<n>" (a reference cell: "<comparison id>/reference")
    role: Role  # why the search measured this cell
    objective: Objective  # written as "p99_objective_ms"
    offered_rps: float | None  # the open-loop rate asked for; None for a probe, reference or not-started cell
    confidence: float | None = None
    confirming: bool | None = None  # measured while confirming a rate (its verdict needs the higher confidence)
    objectives: tuple[float, ...] | None = None  # the p99s the report also answers the search's cells at
    comparison: ComparisonTag | None = None
    evidence: CellEvidence | None = None  # added by `CellRunner` to a measured cell with an objective
    attempt: int = 0  # a paired comparison's re-confirmation of its answer: the try; 0 (not written) otherwise
    when: str | None = None  # a reference cell: "start", "between" or "end"
    shape: ShapeTag | None = None  # the server's replica shape, in a shape sweep (not written otherwise)
    checks: str | None = None  # a tool-ceiling twin's cell: the id of the search whose answer it checks

    def to_dict(self) -> dict:
        tag: dict[str, Any] = {"id": self.id, "role": self.role, "p99_objective_ms": self.objective.p99_ms,
                               "offered_rps": self.offered_rps}
        optional = {"confidence": self.confidence, "confirming": self.confirming,
                    "objectives": None if self.objectives is None else list(self.objectives),
                    "comparison": self.comparison and self.comparison.to_dict(),
                    "evidence": self.evidence and self.evidence.to_dict(), "attempt": self.attempt or None,
                    "when": self.when, "shape": self.shape and self.shape.to_dict(), "checks": self.checks}
        return {**tag, **{key: value for key, value in optional.items() if value is not None}}

    def confidence_or(self, default: float) -> float:
        """The confidence the search asked for; `default` in records made before it was written."""
        return default if self.confidence is None else float(self.confidence)

    @classmethod
    def from_dict(cls, raw: dict) -> SearchTag:
        objectives, comparison, evidence, shape = (raw.get("objectives"), raw.get("comparison"), raw.get("evidence"),
                                                   raw.get("shape"))
        return cls(raw["id"], Role(raw["role"]), Objective(float(raw["p99_objective_ms"])), raw.get("offered_rps"),
                   raw.get("confidence"),
                   raw.get("confirming"), None if objectives is None else tuple(objectives),
                   ComparisonTag.from_dict(comparison) if comparison else None,
                   CellEvidence.from_dict(evidence) if evidence else None, raw.get("attempt", 0), raw.get("when"),
                   ShapeTag.from_dict(shape) if shape else None, raw.get("checks"))

