"""The card's title says what its rows say (`loadtest.report.card.words.title`): "no answer was confirmed" only where
none was, and "figures are the stand-in's" only over rows for buying that are the stand-in's (#68: a title read "no
answer was confirmed" over "≥ 687.2 confirmed", and "figures are the stand-in's" over a TF Serving container's row)."""

from __future__ import annotations

from dataclasses import replace

from loadtest.judge.goals import Target
from loadtest.report.card.records import CardRow
from loadtest.report.card.words import title

ROW = CardRow(Target(25.0, 1, 2000.0), "cpu", "batching off", 687.2, None, True, 21.0, "", 0.6, False,
              state="≥ 687.2 confirmed: the search stopped", figure="≥ 687.2 confirmed: the search stopped",
              confirmed=True, bounded="unconfirmed")
PASSED = replace(ROW, device="gpu", at_least=False, state="none confirmed (1,351.8 passed)",
                 figure="none confirmed (1,351.8 passed)", confirmed=False)


def test_a_lower_bound_that_was_confirmed_is_not_called_unconfirmed():
    assert title(False, [ROW], [], False, None).endswith(": every answer confirmed is only a lower bound")
    assert title(False, [PASSED], [], False, None).endswith(": no answer was confirmed")
    assert title(False, [ROW, PASSED], [], False, None).endswith(": each answer unconfirmed or only a lower bound")
    unconfirmed_bound = replace(ROW, state="none confirmed (≥ 107.5 passed: the load generator's limit)",
                                figure="none confirmed (≥ 107.5 passed: the load generator's limit)", confirmed=False)
    assert title(False, [unconfirmed_bound], [], False, None).endswith(": no answer was confirmed")


def test_the_stand_in_is_named_only_over_rows_for_buying_that_are_its():
    bought = replace(ROW, for_buying=True, bounded="the device", at_least=False, state="687.2 confirmed")
    container = replace(bought, stand_in=False, bounded="the production server")
    stand_in = replace(bought, stand_in=True)
    assert title(True, [container, replace(stand_in, for_buying=False)], [], False, None).startswith("FOR BUYING")
    assert "stand-in's" not in title(True, [container, replace(stand_in, for_buying=False)], [], False, None)
    assert title(True, [stand_in], [], False, None).endswith("; figures are the stand-in's")
    assert title(True, [container, stand_in], [], False, None).endswith(
        "; the stand-in's figures where the device bounded them")
