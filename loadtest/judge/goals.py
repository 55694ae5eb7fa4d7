"""What a buyer must serve: targets, each a rate, a p99 objective and a request batch.

`5000:10:1` is 5,000 requests/s at p99 ≤ 10 ms with 1 image a request (`--goal`, make's `GOALS`, a plan's
`[capacity] goals`). Each target gets its own capacity search, at its objective and request batch (two targets at
one batch: two searches, `loadtest.search.capacity_request.CapacityRequest.searches_at`); every other objective is
answered from their cells. The report's card (`loadtest.report.card.card`) answers each target.

Not for: judging a cell against an objective (`loadtest.judge.verdicts`) or the card itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Target:
    """What must be served: a rate (None: none given, so nothing is sized), a p99 objective, images a request."""

    p99_objective_ms: float
    batch: int
    rate_rps: float | None = None

    def words(self) -> str:
        """`5,000 req/s · p99 ≤ 10 ms · 1 image`, `p99 ≤ 50 ms · 16 images/request`."""
        images = "1 image" if self.batch == 1 else f"{self.batch} images/request"
        rate = f"{self.rate_rps:,g} req/s · " if self.rate_rps else ""
        return f"{rate}p99 ≤ {self.p99_objective_ms:g} ms · {images}"


def parse_goal(text: str) -> Target:
    """`RATE:P99_MS:BATCH` (`5000:10:1`: 5,000 req/s at p99 ≤ 10 ms, 1 image a request; RATE `-`: none, so not
    sized) as a Target; ValueError saying what is wrong."""
    parts = text.strip().split(":")
    if len(parts) != 3:
        raise ValueError(f"{text!r}: expected RATE:P99_MS:BATCH, e.g. 5000:10:1")
    rate, p99, batch = parts
    try:
        target = Target(float(p99), int(batch), None if rate.strip() in ("", "-") else float(rate))
    except ValueError:
        raise ValueError(f"{text!r}: expected numbers, RATE:P99_MS:BATCH, e.g. 5000:10:1") from None
    if target.p99_objective_ms <= 0 or target.batch < 1 or (target.rate_rps is not None and target.rate_rps <= 0):
        raise ValueError(f"{text!r}: the rate and p99 must be positive and the batch at least 1")
    return target


def goal_text(target: Target) -> str:
    """The target as `--goal` takes it: `5000:10:1` (`-:10:1` without a rate)."""
    return f"{'-' if target.rate_rps is None else f'{target.rate_rps:g}'}:{target.p99_objective_ms:g}:{target.batch}"


def objectives_by_batch(targets: Sequence[Target]) -> dict[int, float]:
    """Each request batch's default objective: the strictest target's at that batch (what a search there that no
    target names, the tuner's or a server that did not start, is tagged with; each target is searched at its own)."""
    found: dict[int, float] = {}
    for t in targets:
        found[t.batch] = min(found.get(t.batch, t.p99_objective_ms), t.p99_objective_ms)
    return found


__all__ = ["Target", "goal_text", "objectives_by_batch", "parse_goal"]
