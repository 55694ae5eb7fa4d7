"""The card's comparisons (`loadtest.report.card.comparison`): a paired comparison too wide to decide on (over
`DECIDE_WIDTH`) is said so under the card, with what made it that wide (#67 item 2: the card names what widened a
comparison it cannot give within ×1.3), and none is said where every comparison is narrower."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from loadtest.judge.goals import Target
from loadtest.report.answers.paired import GPU_CPU, PairedRatio, WidthParts, by_key, paired_ratios
from loadtest.report.answers.ratios import DECIDE_WIDTH
from loadtest.report.card.card import card_for
from loadtest.report.card.comparison import width_notes
from loadtest.report.series import read_all
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

WIDE = re.compile(r"^(?P<target>.+?), (?P<what>GPU/CPU|CPU batching on ÷ off|GPU batching on ÷ off): its range "
                  r"is ×(?P<width>[\d.]+) wide: the searches' brackets "
                  r"×(?P<brackets>[\d.]+), the machine's speed between its cells ×(?P<drift>[\d.]+); over the ×1\.3 "
                  r"a decision needs, (?P<why>the brackets set most of it|the machine's drift set most of it)")

ON_THE_CARD = {"GPU/CPU": r"GPU/CPU ", "CPU batching on ÷ off": r"batching: CPU ", "GPU batching on ÷ off": r", GPU "}


def cells(run: str) -> list:
    return read_all([FIXTURES / run / "results.jsonl"])


@pytest.fixture(scope="module")
def h200() -> list:
    return cells("h200-paired")


def test_each_paired_comparison_over_the_width_says_what_made_it_that_wide(h200):
    card = card_for(h200)
    assert card is not None
    notes = [m for n in card.notes if (m := WIDE.match(n))]
    assert {m["what"] for m in notes} == {"GPU/CPU", "CPU batching on ÷ off", "GPU batching on ÷ off"}
    for m in notes:
        width, brackets, drift = float(m["width"]), float(m["brackets"]), float(m["drift"])
        assert width > DECIDE_WIDTH
        ranged = re.search(ON_THE_CARD[m["what"]] + r"(?:tie )?×[\d.]+ \(×([\d.]+)–×([\d.]+)\)", card.comparisons[0])
        assert ranged and width == pytest.approx(float(ranged[2]) / float(ranged[1]), rel=0.02)  # the card's range
        assert width == pytest.approx(brackets * drift, rel=0.01)  # one repeat: no spread
        assert m["why"] == "the brackets set most of it"  # ×2.3–×4.0 of brackets against ×1.04–×1.16 of drift
        assert m["target"] == "p99 ≤ 25 ms · 1 image"


def test_no_note_where_a_comparison_is_within_the_width(h200):
    key = (GPU_CPU, 1, 25.0)
    compared = by_key(paired_ratios(h200))[key]
    target = Target(25.0, 1, None)
    ratio = compared.ratio or 1.0

    def notes_at(width: float) -> tuple[str, ...]:
        ranged = tuple(replace(r, low=ratio / width ** 0.5, high=ratio * width ** 0.5) for r in compared.repeats)
        return width_notes(target, [], {key: replace(compared, repeats=ranged)})

    assert len(width_notes(target, [], {key: compared})) == 1  # ×2.76 wide
    assert len(notes_at(DECIDE_WIDTH + 0.01)) == 1
    assert notes_at(DECIDE_WIDTH - 0.01) == () and notes_at(1.1) == ()  # within the width: nothing to say


def test_an_unpaired_comparison_gets_no_note():
    card = card_for(cells("capacity-run"))  # searched one after the other: the card says "not paired" instead
    assert card is not None and card.comparisons and "(not paired)" in card.comparisons[0]
    assert not [n for n in card.notes if " wide: " in n]


def test_the_width_splits_into_brackets_drift_and_the_repeats_spread(h200):
    compared = by_key(paired_ratios(h200))[(GPU_CPU, 1, 25.0)]
    one = compared.repeats[0]
    assert one.low is not None and one.high is not None and one.bracket_width is not None
    moved = replace(one, repeat=2, ratio=(one.ratio or 0) * 1.5, low=one.low * 1.5, high=one.high * 1.5)
    parts = PairedRatio(compared.what, 1, 25.0, True, (one, moved), compared.drift).width_parts()
    assert parts is not None
    assert parts.spread == pytest.approx(1.5)  # the second repeat's range sits ×1.5 above the first's
    assert parts.brackets == pytest.approx(one.bracket_width)
    assert parts.width == pytest.approx(parts.brackets * parts.drift * parts.spread)
    assert parts.words().endswith(", the repeats' spread ×1.50")
    assert "spread" not in WidthParts(2.0, 2.0, 1.0, 1.0).words()


def test_an_open_range_has_no_width(h200):
    compared = by_key(paired_ratios(h200))[(GPU_CPU, 1, 25.0)]
    opened = replace(compared, repeats=tuple(replace(r, high=None) for r in compared.repeats))
    assert opened.width_parts() is None
