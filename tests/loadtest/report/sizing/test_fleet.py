"""One sizing path's arithmetic (`loadtest.report.sizing.fleet`), worked by hand: replicas and their cost, the capacity
range a row's boxes cover and when repeats moved it, the boxes at each end on one instance type, and the sizing line's
idle cores. Hand-made ranges and a two-instance price book; the card's use of them is `test_box_range`'s."""

from __future__ import annotations

import pytest

from loadtest.report.configs import Config
from loadtest.report.sizing import fleet as f
from loadtest.report.sizing.instances import Replica
from loadtest.report.sizing.prices import Instance, PriceBook

ONE_CORE = Replica(1.0, "Test CPU", 0, "", "pinned cores 0")
BOOK = PriceBook("test", "USD", False, "", {}, {}, (Instance("small-4", 4.0, 0, "", "", 0.40),
                                                   Instance("big-16", 16.0, 0, "", "", 1.20)))
PER_REPLICA = PriceBook("test", "USD", False, "", {}, {"cpu": 0.10})
CONFIG = Config("cpu", "Test CPU", "embedded", "off", "", "", "")


@pytest.mark.parametrize(("target", "capacity", "headroom", "expected"), [
    (1000.0, 100.0, 0.0, 10), (1000.0, 100.0, 0.2, 13), (1000.0, 125.0, 0.2, 10), (1001.0, 125.0, 0.2, 11),
    (5.0000000001, 1.0, 0.0, 5)])
def test_replicas_needed_rounds_up_after_the_headroom(target, capacity, headroom, expected):
    assert f.replicas_needed(target, capacity, headroom) == expected


def test_costs_count_the_spare_and_price_a_million_images():
    # 1,000 req/s at 125 per replica, headroom 0.2: 10 replicas, + 2 spare at 0.10 = 1.20 USD/h;
    # a million images at 2,000 images/s take 500 s: 1.20 × 500 / 3600 = 0.1667
    c = f.costs(1000.0, 125.0, 0.2, 2000.0, 0.10, spare=2)
    assert (c.replicas, round(c.per_hour or 0, 9), round(c.per_million or 0, 4)) == (10, 1.2, 0.1667)
    assert f.costs(1000.0, 125.0, 0.2, 2000.0, None) == f.Costs(10, None, None)
    assert f.costs(1000.0, 125.0, 0.2, 2000.0, 0.10).per_hour == pytest.approx(1.00)  # no spare unless asked
    assert f.cost_per_million(3.6, 1.0) == pytest.approx(1e6 / 1000.0)


def test_a_range_moved_only_where_repeats_fall_outside_the_bracket():
    bracket = f.CapacityRange(400.0, 400.0, 440.0, 2, 440.0, 440.0)
    assert not bracket.moved  # the repeats' top at the bracket's upper end: within
    assert f.CapacityRange(400.0, 399.0, 440.0, 2, 440.0, 400.0).moved  # a repeat below the capacity
    assert f.CapacityRange(400.0, 400.0, 500.0, 2, 440.0, 441.0).moved  # a repeat's capacity above the upper end
    assert not f.CapacityRange(400.0, 300.0, 500.0, 1, 440.0, 500.0).moved  # one search: nothing repeated
    # a lower bound has no upper end: a repeat above the capacity itself moved it
    assert f.CapacityRange(400.0, 400.0, 420.0, 2, None, 420.0).moved
    assert not f.CapacityRange(400.0, 400.0, 400.0, 2, None, 400.0).moved
    assert f.CapacityRange(400.0, 400.0, 400.0, 2, None).spread_top == 400.0  # no top: the capacity


def test_a_range_scales_into_images_per_second():
    r = f.CapacityRange(400.0, 380.0, 440.0, 3, 430.0, 420.0).scaled(8.0)
    assert r == f.CapacityRange(3200.0, 3040.0, 3520.0, 3, 3440.0, 3360.0)
    assert f.CapacityRange(400.0, 400.0, 400.0, 1, None).scaled(2.0).bracket_high_rps is None


def test_moved_words_give_the_repeats_spread_and_the_bracket_priced():
    r = f.CapacityRange(464.1, 391.8, 600.0, 3, 480.0, 539.4)
    assert f.moved_words(r) == ("the 3 repeats' capacities ran 391.8–539.4 req/s (×1.38), beyond the bracket of the "
                                "one priced (464.1–480.0)")
    assert f.moved_words(f.CapacityRange(464.1, 391.8, 600.0, 2, None, 539.4)).endswith("(≥ 464.1)")


def test_the_boxes_at_each_end_of_the_range_count_the_instance_priced_at_the_capacity():
    # 4,000 req/s, headroom 0.2, one core a replica. At 400 req/s: 12.5 -> 13 replicas; small-4 holds 4: 4 boxes + 1
    # spare = 5 × 0.40 = 2.00 USD/h, under big-16's 1 + 1 = 2.40. At the top, 500: 10 replicas, 3 small-4 boxes; at
    # the bottom, 100: 50 replicas, 13 (counted on the type priced at the capacity)
    r = f.CapacityRange(400.0, 100.0, 500.0, 2, 440.0, 450.0)
    boxes = f.fleet(4000.0, r, 0.2, 4000.0, BOOK, CONFIG, ONE_CORE, spare=1)
    assert (boxes.fewest, boxes.most, boxes.typical) == (3, 13, 4)
    assert boxes.priced.placement is not None and boxes.priced.placement.instance.name == "small-4"
    assert boxes.priced.costs.per_hour == pytest.approx(2.00)
    assert (boxes.priced.price_per_hour, boxes.priced.refused) == (0.40, "")  # one instance's price; not refused
    # not for buying: the range's bottom alone, priced there: 50 replicas, 13 small-4 + 1 = 5.60 USD/h (big-16: 6.00)
    most = f.fleet(4000.0, r, 0.2, 4000.0, BOOK, CONFIG, ONE_CORE, spare=1, at_most=True)
    assert (most.fewest, most.most) == (13, 13) and most.priced.costs.per_hour == pytest.approx(5.60)
    # an older price file prices replicas: 13 at the capacity (+ 1 spare replica), 10 and 50 at the ends
    per = f.fleet(4000.0, r, 0.2, 4000.0, PER_REPLICA, CONFIG, ONE_CORE, spare=1)
    assert (per.fewest, per.most, per.typical) == (10, 50, 13) and per.priced.costs.per_hour == pytest.approx(1.40)
    assert per.priced.placement is None and f.sizing_line(per, ONE_CORE) is None
    assert (per.priced.price_per_hour, per.priced.refused) == (0.10, "")


def test_the_sizing_line_names_cores_given_but_idle_below_half():
    r = f.CapacityRange(400.0, 400.0, 400.0, 1, None)
    boxes = f.fleet(4000.0, r, 0.2, 4000.0, BOOK, CONFIG, ONE_CORE, spare=1)
    line = f.sizing_line(boxes, ONE_CORE, 0.5)
    assert line is not None and (line.instance, line.replicas, line.instances, line.spare) == ("small-4", 13, 4, 1)
    assert line.by_cores == 4 and line.binding == "cores" and line.usd_per_hour == pytest.approx(2.00)
    assert (line.cores_given, line.cores_busy, line.by_memory, line.by_gpus) == (1.0, 0.5, None, None)
    assert not line.idle and line.idle_words() == ""  # busy on half its one core: not idle
    twelve = f.SizingLine("big-16", 16.0, None, 1, None, None, "cores", 2, 2, 1, 3.6, 12.0, 1.1)
    assert twelve.idle and twelve.idle_words() == "12 cores given, 1.1 busy"
    assert not f.SizingLine("big-16", 16.0, None, 1, None, None, "cores", 2, 2, 1, 3.6, 12.0, None).idle
    assert not f.SizingLine("big-16", 16.0, None, 1, None, None, "cores", 2, 2, 1, 3.6, None, 1.1).idle
