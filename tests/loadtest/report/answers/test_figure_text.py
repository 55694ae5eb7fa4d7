"""A capacity as every table prints it (`capacity_text`) and as the card's one figure a cell (`figure_only`)."""

from __future__ import annotations

import pytest

from loadtest.judge.conclusion import AnswerKind
from loadtest.judge.objectives import Bound, ObjectiveAnswer
from loadtest.report.answers.figure_text import capacity_text, figure_only


def at(confirmed: float | None, passed: float | None, bound: Bound = Bound.NONE) -> ObjectiveAnswer:
    capacity = confirmed if confirmed is not None else passed
    kind = AnswerKind.CONFIRMED if confirmed is not None else AnswerKind.PASSED
    return ObjectiveAnswer(10.0, kind, capacity, capacity, None, None, None, confirmed_rps=confirmed,
                           passed_rps=passed, bound=bound)


@pytest.mark.parametrize(("answer", "table", "card"), [
    (None, "—", "—"),
    (at(None, None), "none", "none"),
    (at(583.0, None), "583.0 confirmed", "583.0 confirmed"),
    (at(583.0, 874.5), "583.0 confirmed (874.5 passed)", "583.0 confirmed"),
    (at(583.0, 874.5, Bound.LOADGEN), "583.0 confirmed (≥ 874.5 passed: the load generator's limit)",
     "583.0 confirmed"),
    (at(1218.0, None, Bound.STOPPED), "≥ 1,218.0 confirmed: the search stopped",
     "≥ 1,218.0 confirmed: the search stopped"),
    (at(None, 640.7), "none confirmed (640.7 passed)", "none confirmed (640.7 passed)"),
    (at(None, 640.7, Bound.LOADGEN), "none confirmed (≥ 640.7 passed: the load generator's limit)",
     "none confirmed (≥ 640.7 passed: the load generator's limit)")])
def test_the_card_drops_only_a_higher_pass_beside_a_confirmed_capacity(answer, table, card):
    """The card's cell held the table's text cut at its first " (" (#68: it parsed the state it was given)."""
    assert capacity_text(answer) == table
    assert figure_only(answer) == card
