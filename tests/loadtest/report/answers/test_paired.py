"""Comparisons read back (`loadtest.report.answers.paired`) from hand-built searches whose answers are known: each
repeat's batching gain with its range from the brackets, the median over repeats with the range spanning every
repeat's, "no measurable difference" where the range holds ×1.0, and the drift from the reference cells."""

from __future__ import annotations

from dataclasses import replace

import pytest

from loadtest.evidence.search_tag import SearchTag
from loadtest.evidence.vocab import LoadMode
from loadtest.report import configs
from loadtest.report.answers import answers, paired
from loadtest.report.headline import summarise
from loadtest.search.comparison import comparison_tag
from tests.loadtest.judge.test_objectives import OFF, ON, search_cells
from tests.loadtest.report.handmade import server
from tests.loadtest.report.test_report import headline_of

# search_cells: capacity 100 x scale req/s confirmed at 10 ms, upper end 200 x scale (a failing bracket above it)


def comparison(repeat: int, on_scale: float, paired_run: bool = True, off_scale: float = 1.0,
               first_index: int = 0) -> list:
    tag = comparison_tag("run/b1", repeat, paired_run, ["cpu-off", "cpu-cpu"])
    cells = [*search_cells(OFF, f"off{repeat}", off_scale), *search_cells(ON, f"on{repeat}", on_scale)]
    return [replace(c, cell_index=first_index + i, search=replace(c.tag, comparison=tag))
            for i, c in enumerate(cells)]


def reference(index: int, speed: float, repeat: int = 1) -> object:
    cell = search_cells(OFF, "x")[0]
    tag = SearchTag("run/b1/reference", "reference", 10.0, None,
                    comparison=comparison_tag("run/b1", repeat, True, ["cpu-off", "cpu-cpu"]))
    return replace(cell, cell_index=index, search=tag, throughput_rps=speed,
                   load=replace(cell.load, mode=LoadMode.CLOSED, concurrency=1, rate_rps=None))


def test_one_paired_repeat_gives_the_gain_its_bracket_range_and_the_drift():
    cells = [reference(100, 1000.0), *comparison(1, 2.0), reference(101, 1180.0), reference(102, 1100.0)]
    (found,) = paired.paired_ratios(cells)
    assert (found.what, found.request_batch_size, found.p99_objective_ms, found.paired) == \
        ("batching gain on cpu", 1, 10.0, True)
    # on 200 (upper 400) against off 100 (upper 200): ×2.00, from 200/200 = ×1.00 to 400/100 = ×4.00
    assert found.ratio == pytest.approx(2.0)
    assert (found.low, found.high) == (pytest.approx(1.0), pytest.approx(4.0))
    assert found.no_difference  # the bracket's range reaches ×1.0
    assert found.drift is not None and found.drift.moved == pytest.approx(0.18)
    text = found.describe()
    assert "paired: no measurable difference, ×2.00 (×1.00–×4.00)" in text
    # one drift figure, in plain words (the reference cell's speeds are the paired table's)
    assert text.endswith("; this machine's speed moved 18% during the comparison.") and "reference cell" not in text


def test_repeats_give_the_median_and_a_range_spanning_every_repeat():
    cells = [*comparison(1, 2.6, first_index=0), *comparison(2, 2.2, first_index=20),
             *comparison(3, 2.4, first_index=40)]
    (found,) = paired.paired_ratios(cells)
    assert [r.ratio for r in found.repeats] == [pytest.approx(2.6), pytest.approx(2.2), pytest.approx(2.4)]
    assert found.ratio == pytest.approx(2.4)
    assert found.low == pytest.approx(1.1) and found.high == pytest.approx(5.2)  # 220/200 and 520/100
    assert " over 3 repeats: " in found.describe()
    assert "each repeat: ×2.60 (×1.30–×5.20), ×2.20 (×1.10–×4.40), ×2.40 (×1.20–×4.80)" in found.describe()
    assert "drift was not measured" in found.describe()


def test_a_range_clear_of_one_is_a_gain_and_one_searched_in_turn_says_it_was_not_paired():
    cells = comparison(1, 2.5, paired_run=False)  # on 250..500 against off 100..200: ×1.25–×5.00
    (found,) = paired.paired_ratios(cells)
    assert not found.no_difference
    assert "searched one after the other, not paired: ×2.50 (×1.25–×5.00)" in found.describe()


def test_the_headline_gives_the_paired_gain_instead_of_the_best_of_each_side():
    cells = [reference(100, 900.0), *comparison(1, 2.5, first_index=0), *comparison(2, 3.0, first_index=20),
             reference(101, 1000.0)]
    lines = headline_of(cells)
    gain = next(line for line in lines if line.startswith("Batching gain"))
    assert gain.startswith("Batching gain on cpu at p99 ≤ 10 ms (request batch 1), paired over 2 repeats: ×2.75")
    assert "speed moved 11%" in gain
    # the answer table gives the same ratio and range: one number for one quantity
    summary = summarise(cells, answers.answer(cells), configs.config_labels(configs.config_of(c) for c in cells))
    table = summary.tables[0]
    cell = table.rows[0][table.header.index("batching gain over off")]
    assert cell.startswith("×2.75 (") and cell.endswith("), paired, median of 2 repeats")
    assert cell.removesuffix(", paired, median of 2 repeats").removeprefix("×2.75 (").removesuffix(")") in gain


def test_a_gpu_against_a_cpu_gives_the_gpu_cpu_ratio_per_repeat():
    gpu = server("gpu-off", "off", device="gpu")
    tag = comparison_tag("run/b1", 1, True, ["gpu-off", "cpu-off"])
    cells = [replace(c, cell_index=i, search=replace(c.tag, comparison=tag))
             for i, c in enumerate([*search_cells(gpu, "g", 3.0), *search_cells(OFF, "c", 1.0)])]
    (found,) = paired.paired_ratios(cells)
    assert found.what == paired.GPU_CPU and found.ratio == pytest.approx(3.0)
    assert (found.low, found.high) == (pytest.approx(1.5), pytest.approx(6.0))
    assert paired.paired_table(paired.paired_ratios(cells)).rows[0][6] == "gpu-off: 300.0"


def test_the_range_allows_for_the_speed_moving_between_the_cells_it_stands_on():
    # off answers at cell 1 (its upper end, 200 req/s, at cell 2), on at cell 7 (upper end at cell 8); the reference
    # reads 1,000 req/s at cell 0 and 1,240 at cell 12: 1,020 at cell 1 and 1,140 at cell 7, an 11.8% change between
    # the two answers the pairing left in, and 20 req/s between each answer and its upper end (issue #41: a bracket
    # whose fail came from slower minutes than its pass bounds less)
    cells = [*comparison(1, 2.5), reference(0, 1000.0), reference(12, 1240.0)]
    (found,) = paired.paired_ratios(cells)
    (repeat,) = found.repeats
    between, off_gap, on_gap = 120 / 1020, 20 / 1020, 20 / 1140
    assert repeat.residual == pytest.approx((1 + between) * (1 + off_gap) - 1)
    assert found.low == pytest.approx(1.25 / ((1 + between) * (1 + off_gap)))
    assert found.high == pytest.approx(5.0 * (1 + between) * (1 + on_gap))
    text = found.describe()
    assert text.endswith("; its range allows for this machine's speed moving 14% between the cells it stands on "
                         "(the two answers and their upper ends).")
    assert "during the comparison" not in text  # one drift figure per ratio


def test_answers_and_upper_ends_of_the_same_minutes_widen_nothing():
    cells = [*comparison(1, 2.5), reference(0, 1000.0), reference(12, 1000.0)]
    (found,) = paired.paired_ratios(cells)
    assert found.repeats[0].residual == 0.0 and (found.low, found.high) == (pytest.approx(1.25), pytest.approx(5.0))


def test_a_repeat_whose_numerator_is_a_lower_bound_gives_a_bound_not_an_estimate():
    # batching's capacity "at least" (the load generator was the limit, or a pass cut by time): no high end, so the
    # ratio is a bound only, with no point estimate, and no verdict of "no measurable difference" either
    found = paired.PairedRatio("batching gain on cpu", 1, 10.0, True,
                               (paired.RepeatRatio(1, 1.2, 0.9, None, None, None),), None)
    assert found.high is None and found.low == pytest.approx(0.9) and not found.bounded
    assert not found.no_difference and "×1.20" not in found.describe() and "×1.20" not in found.short()
    assert "paired: at least ×0.90 (a capacity that is a lower bound has no estimate);" in found.describe()
    assert found.short() == "at least ×0.90, paired"


def test_repeats_whose_gain_follows_the_machines_speed_say_so():
    """Four repeats, each with its own reference cells: the slower the machine, the larger the gain (r = -1), so
    the description says the ratio moves with the machine's speed; the same gains at one speed say nothing."""
    cells = []
    for repeat, (scale, speed) in enumerate(((2.6, 900.0), (2.2, 1000.0), (2.4, 950.0), (2.0, 1050.0)), start=1):
        cells += [reference(200 + 2 * repeat, speed, repeat), *comparison(repeat, scale, first_index=20 * repeat),
                  reference(201 + 2 * repeat, speed, repeat)]
    (found,) = paired.paired_ratios(cells)
    link = found.speed_link
    assert link is not None and link.r == pytest.approx(-1.0) and link.moves
    assert link.slow == (900.0, pytest.approx(2.6)) and link.fast == (1050.0, pytest.approx(2.0))
    assert found.describe().endswith("against each repeat's reference speed: r = -1.00 (×2.60 at 900 req/s, ×2.00 "
                                     "at 1,050 req/s); the ratio moves with the machine's speed: its servers answer "
                                     "a slower machine differently, which pairing does not cancel.")
    steady = [replace(c, throughput_rps=1000.0) if c.tag.role == "reference" else c for c in cells]
    (found,) = paired.paired_ratios(steady)
    assert found.speed_link is None and "moves with the machine's speed" not in found.describe()


def test_two_servers_of_one_configuration_in_one_run_are_compared_not_merged_as_repeats():
    twin = server("cpu-off#2", "off")
    tag = comparison_tag("run/b1", 1, True, ["cpu-off", "cpu-off#2"])
    cells = [replace(c, cell_index=i, search=replace(c.tag, comparison=tag))
             for i, c in enumerate([*search_cells(OFF, "a", 1.0), *search_cells(twin, "b", 0.5)])]
    (found,) = paired.paired_ratios(cells)
    assert found.what == "cpu-off#2 ÷ cpu-off" and found.ratio == pytest.approx(0.5)
    searches = answers.search_answers(cells)
    assert len(answers.typical(searches)) == 2  # two servers, two answers: neither is the other's repeat


def test_repeats_whose_ranges_are_apart_disagree_and_a_third_that_joins_one_makes_a_majority():
    # on 200..400 against off 100..200 (×1.00–×4.00), then on 40..80 (×0.20–×0.80): apart
    two = [*comparison(1, 2.0, first_index=0), *comparison(2, 0.4, first_index=20)]
    (found,) = paired.paired_ratios(two)
    assert found.repeats_disagree and found.without_majority
    assert "(the repeats disagree: two ranges do not overlap)" in found.describe()
    assert found.short().endswith("median of 2 repeats, their ranges apart")
    assert paired.without_majority(two, "run/b1") and not paired.without_majority(two, "run/b2")
    # a third at ×1.80 (×0.90–×3.60) overlaps the first: two of three agree, the median is ×1.80
    three = [*two, *comparison(3, 1.8, first_index=40)]
    (found,) = paired.paired_ratios(three)
    assert found.repeats_disagree and not found.without_majority and found.ratio == pytest.approx(1.8)
    assert not paired.without_majority(three, "run/b1")
    # overlapping repeats (×1.00–×4.00 and ×0.50–×2.00) agree
    (found,) = paired.paired_ratios([*comparison(1, 2.0, first_index=0), *comparison(2, 1.0, first_index=20)])
    assert not found.repeats_disagree and not found.without_majority
    assert "disagree" not in found.describe() and "apart" not in found.short()
