"""The one way a timed test says this machine's speed, not the code, missed its bound (issue #69).

A timed test (marked `integration`, not `untimed`) measures real servers and a real load generator on a shared
2-core machine whose speed drifts 15-70% within minutes. Where a figure it checks depends on that speed (a
capacity found within a budget, a search's wall time, a planted stall's share), it checks it through `at_least` or
`at_most`, which raise `TimingMiss` carrying the figure, its bound and what it is. `tests.support.reruns` runs a
timed test once more only where the exception that failed it is a `TimingMiss` itself: a plain assert, a crashed
command or any other error fails at once, as does a `TimingMiss` a second time.
"""

from __future__ import annotations


class TimingMiss(Exception):
    """A measured figure past the bound a timed test allows for this machine's speed."""

    def __init__(self, what: str, measured: float, relation: str, bound: float, detail: str = ""):
        self.what, self.measured, self.relation, self.bound, self.detail = what, measured, relation, bound, detail
        text = f"{what}: measured {measured:g}, needs {relation} {bound:g}"
        super().__init__(f"{text} ({detail})" if detail else text)


def at_least(what: str, measured: float, bound: float, detail: object = "") -> None:
    """Raise `TimingMiss` unless `measured` >= `bound`."""
    if not measured >= bound:
        raise TimingMiss(what, measured, ">=", bound, str(detail))


def at_most(what: str, measured: float, bound: float, detail: object = "") -> None:
    """Raise `TimingMiss` unless `measured` <= `bound`."""
    if not measured <= bound:
        raise TimingMiss(what, measured, "<=", bound, str(detail))


def holds(what: str, condition: bool, detail: object = "") -> None:
    """Raise `TimingMiss` (measured 0, needs 1) unless `condition`: for a timed outcome that is not one figure (the
    configuration a budgeted search ranked first), with `detail` saying what was measured."""
    if not condition:
        raise TimingMiss(what, 0.0, "==", 1.0, str(detail))


__all__ = ["TimingMiss", "at_least", "at_most", "holds"]
