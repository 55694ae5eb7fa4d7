"""The latency objective a verdict is on: p99 at most so many milliseconds.

One typed value from the command line (`--p99-ms`) to the verdict (`loadtest.judge.verdicts.verdict_of`); a search's
cells record it as `search["p99_objective_ms"]`, a plan's `[capacity]` sets one per request batch.

Not for: whether cells meet it (`loadtest.judge.verdicts`), or answers at several objectives
(`loadtest.judge.objectives`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Objective:
    """p99 latency at most `p99_ms` milliseconds."""

    p99_ms: float

    def __post_init__(self) -> None:
        if not self.p99_ms > 0:
            raise ValueError(f"the p99 objective must be positive, got {self.p99_ms} ms")

    def __str__(self) -> str:
        return f"p99 <= {self.p99_ms:g} ms"
