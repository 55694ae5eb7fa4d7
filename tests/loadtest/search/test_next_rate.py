"""Where a search measures next (`loadtest.search.next_rate`): the middle of its range, stepping around rates that
stayed inconclusive (near the knee), and past them where no rate above has failed yet."""

from __future__ import annotations

import pytest

from loadtest.search.next_rate import next_rate


def test_the_middle_of_the_range_to_a_tenth_of_a_request():
    assert next_rate(100.0, 200.0, [], 0.1, 1e6) == 150.0
    assert next_rate(100.0, 100.1, [], 0.1, 1e6) is None  # nothing between them at 0.1 req/s


def test_with_no_fail_above_an_undecided_rate_the_next_is_twice_the_precision_above_it():
    assert next_rate(100.0, None, [150.0], 0.1, 1e6) == pytest.approx(180.0)
    assert next_rate(100.0, None, [150.0], 0.1, 160.0) == 160.0  # never above the highest rate it may offer
    assert next_rate(100.0, None, [], 0.1, 1e6) is None  # no fail and nothing undecided: the bracket's to find


def test_undecided_rates_are_stepped_around_on_the_wider_side():
    # 100 passed, 150 inconclusive, 200 failed: both sides as wide (x1.5, x1.33): below first
    assert next_rate(100.0, 200.0, [150.0], 0.1, 1e6) == 125.0
    # 100 passed, 105 inconclusive, 150 failed: the upper side is the wider
    assert next_rate(100.0, 150.0, [105.0], 0.1, 1e6) == 127.5


def test_no_rate_nearer_an_undecided_one_than_a_quarter_of_the_precision():
    # 100 passed, 102 inconclusive, 104 failed: the middles (101, 103) lie within 2.5% of 102: nothing to try
    assert next_rate(100.0, 104.0, [102.0], 0.1, 1e6) is None
    # the upper side still has room: (102 + 110) / 2 = 106 is 3.9% above 102
    assert next_rate(100.0, 110.0, [102.0], 0.1, 1e6) == 106.0
