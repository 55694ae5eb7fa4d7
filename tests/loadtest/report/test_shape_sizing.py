"""Replicas sized from measured scaling (#52): a shape sweep's shapes each priced and the cheapest taken
(`loadtest.report.shape_sizing`), never "assumed to scale linearly" where shapes were measured, and the report's
"Replica shapes" section (`loadtest.report.sections.shapes_table`).

Every search here: a bracket at its capacity (passes), one at 1.1 x it (fails), a confirmation at it; so each
capacity's upper end is 1.1 x it. Headroom 0.2, so a replica carries 0.8 x its capacity. Prices are per instance:
`small-1` (1 vCPU) and `small-2` (2 vCPUs); a k-core replica fits floor(vCPUs / k) to an instance, the cheapest
type taken, as sizing does for any replica.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.evidence.cell_parts import ServerResources
from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import ShapeTag
from loadtest.judge.goals import Target
from loadtest.report import page as report
from loadtest.report.answers.answers import answer
from loadtest.report.build import build_report
from loadtest.report.card.capacity_table import capacity_row
from loadtest.report.card.card import card_for
from loadtest.report.card.objective_costs import objective_curves
from loadtest.report.configs import config_labels, config_of
from loadtest.report.headline import summarise
from loadtest.report.sections.shapes_table import shapes_table
from loadtest.report.shape_sizing import shape_curves
from loadtest.report.sizing import size
from loadtest.report.sizing.instances import Pricing, replicas_by_config
from loadtest.report.sizing.prices import load_prices
from tests.loadtest.report.handmade import rates, search, server

TARGET = Target(10.0, 1, 4000.0)


def shape_run(capacities: dict[int, float], shared: tuple[int, ...] = (), family: str = "cpu-off",
              profile: str = "off") -> list[CellResult]:
    """One search per replica shape k (its server `family-kc`, pinned to k cores) confirming `capacities[k]`."""
    cells: list[CellResult] = []
    for k, capacity in capacities.items():
        tag = ShapeTag(family, k, "0" if k == 1 else f"0-{k - 1}", k in shared)
        steps = [("bracket", capacity, 8.0), ("bracket", capacity * 1.1, 12.0), ("confirm", capacity, 9.0)]
        found = search(server(tag.server_name, profile), f"run-1/{family}/{k}", steps, shape=tag.to_dict())
        cells += [replace(c, server_resources=ServerResources(float(k), "Test CPU", 0, "", f"pinned cores {tag.cpus}"))
                  for c in found]
    return cells


def prices_of(tmp_path: Path, one: float, two: float) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text('currency = "USD"\nexample = false\n'
                    f'[instances."small-1"]\nvcpus = 1\ngpus = 0\nprice_per_hour = {one}\n'
                    f'[instances."small-2"]\nvcpus = 2\ngpus = 0\nprice_per_hour = {two}\n')
    return path


def pricing(cells: list[CellResult], prices: Path, rate: float = 4000.0) -> Pricing:
    # no spare instance (SPARE=0): these tests' hand arithmetic is the shapes' (N + 1: tests/loadtest/report/
    # test_spare_and_resources.py)
    return Pricing(rate, 0.2, load_prices(prices), replicas_by_config(cells), spare=0)


def only_row(cells, priced: Pricing, target: Target = TARGET):
    card = card_for(cells, priced, [target])
    assert card is not None
    [row] = card.rows
    return card, row, dict(zip(card.header(), card.table_rows()[0]))


# ----------------------------------------------------------------------------- the cheapest shape


def test_a_sublinear_curve_on_dear_two_vcpu_instances_is_sized_on_one_core(tmp_path):
    """2 cores serve x1.1 of one; small-2 costs 1.8 x small-1. 4000 req/s: 1 core: 4000 / 400 = 10 replicas, on
    small-2 (2 each) 5 x 0.18 = 0.90 (on small-1 10 x 0.10 = 1.00); 2 cores: 4000 / 440 = 9.1 -> 10 x 0.18 = 1.80."""
    cells = shape_run({1: 500.0, 2: 550.0})
    priced = pricing(cells, prices_of(tmp_path, 0.10, 0.18))
    card, row, shown = only_row(cells, priced)
    assert (row.replica_cores, row.instance, row.per_instance) == (1, "small-2", 2)
    assert row.usd_per_hour == pytest.approx(0.90)
    assert row.capacity_rps == 500.0 and row.boxes == (5, 5)  # 4000 / (550 x 0.8) = 9.1 -> 10 too
    assert shown["best setup"] == "batching off, 1-core replicas, 2 per small-2"
    assert shown["boxes"] == "≤ 5 × small-2"  # no twin, no device floor: not for buying, the most it needs
    assert any(term.startswith("k-core replicas: ") for term in card.terms())
    assert "best setup: the configuration and replica shape whose boxes cost least" in "\n".join(card.terms())
    assert card.words_outside_table() <= 60


def test_a_curve_better_than_linear_is_sized_on_two_cores(tmp_path):
    """2 cores serve x2.2 of one (a batching server fed by more frontends can); small-2 costs 1.2 x small-1.
    4400 req/s: 1 core: 4400 / 400 = 11 replicas, 6 x small-2 = 0.72; 2 cores: 4400 / 880 = 5 x small-2 = 0.60."""
    cells = shape_run({1: 500.0, 2: 1100.0})
    priced = pricing(cells, prices_of(tmp_path, 0.10, 0.12), 4400.0)
    _, row, shown = only_row(cells, priced, Target(10.0, 1, 4400.0))
    assert (row.replica_cores, row.usd_per_hour, row.boxes) == (2, pytest.approx(0.60), (5, 5))
    assert shown["best setup"] == "batching off, 2-core replicas, 1 per small-2"
    assert shown["capacity req/s"] == "1,100.0 confirmed" and capacity_row(row)[4] == "1,210.0"


def test_a_good_but_sublinear_curve_still_packs_one_core_replicas_two_to_an_instance(tmp_path):
    """2 cores serve x1.9 of one, small-2 costs 1.2 x small-1: two 1-core replicas on a small-2 serve 2 x 500 for
    0.12, one 2-core replica 950: 4000 req/s is 5 x small-2 = 0.60 on 1 core, 4000 / 760 = 5.3 -> 6 x 0.12 = 0.72 on
    2. Every shape is priced as sizing prices any replica: floor(vCPUs / k) of it on an instance, on its own cores."""
    cells = shape_run({1: 500.0, 2: 950.0})
    _, row, _ = only_row(cells, pricing(cells, prices_of(tmp_path, 0.10, 0.12)))
    assert (row.replica_cores, row.per_instance, row.usd_per_hour) == (1, 2, pytest.approx(0.60))


def test_a_tie_on_usd_per_hour_goes_to_the_smaller_shape(tmp_path):
    """Exactly linear, prices per vCPU: 1 core: 10 replicas, 10 x 0.10 = 1.00; 2 cores: 4000 / 800 = 5 x 0.20."""
    cells = shape_run({1: 500.0, 2: 1000.0})
    _, row, _ = only_row(cells, pricing(cells, prices_of(tmp_path, 0.10, 0.20)))
    assert row.replica_cores == 1 and row.usd_per_hour == pytest.approx(1.00)


def test_the_card_and_the_cost_per_objective_agree_on_the_shape(tmp_path):
    cells = shape_run({1: 500.0, 2: 1100.0})
    priced = pricing(cells, prices_of(tmp_path, 0.10, 0.12), 4400.0)
    target = Target(10.0, 1, 4400.0)
    _, row, _ = only_row(cells, priced, target)
    [curve] = objective_curves(answer(cells), [target], priced, priced=True)
    assert dict(curve.points)[10.0] == row.usd_per_hour == pytest.approx(0.60)


def test_a_shape_sharing_the_load_generators_cores_is_marked_a_lower_bound(tmp_path):
    cells = shape_run({1: 500.0, 2: 1100.0}, shared=(2,))
    card, row, shown = only_row(cells, pricing(cells, prices_of(tmp_path, 0.10, 0.12), 4400.0),
                                Target(10.0, 1, 4400.0))
    assert row.shared_cores and shown["best setup"] == "batching off, 2-core replicas (shared cores), 1 per small-2"
    assert any(term.startswith("shared cores: a lower bound") for term in card.terms())


def test_without_a_price_the_most_capacity_a_core_is_taken_and_no_shape_is_priced():
    cells = shape_run({1: 500.0, 2: 900.0})
    card = card_for(cells, None, [Target(10.0, 1, None)])
    assert card is not None and card.rows[0].replica_cores == 1 and card.rows[0].capacity_rps == 500.0


def test_an_unswept_run_is_sized_on_its_best_as_before(tmp_path):
    cells = [*rates(server("cpu-off", "off"), 500.0, "s1"), *rates(server("cpu-cpu", "cpu"), 900.0, "s2")]
    cells = [replace(c, server_resources=ServerResources(1.0, "Test CPU", 0, "", "pinned cores 0")) for c in cells]
    _, row, shown = only_row(cells, pricing(cells, prices_of(tmp_path, 0.10, 0.18)))
    assert row.replica_cores is None and row.capacity_rps == 900.0
    assert shown["best setup"] == "batching on (profile cpu)"


# ----------------------------------------------------------------------------- never "linearly" where measured


def caption(cells, priced: Pricing) -> str:
    """The sizing rule as the report prints it: the card's sizing table's caption (the device table's without one)."""
    labels = config_labels(config_of(c) for c in cells)
    summary = summarise(cells, answer(cells), labels, pricing=priced)
    return (summary.sizing or summary.tables[0]).caption


def sizing_text(cells, prices: Path) -> str:
    objective = size.SizingGoal(10.0, 4000.0, "rps", 0.2)
    book = load_prices(prices)
    return size.format_answers(size.size(cells, objective, book), objective, book)


def test_measured_shapes_are_never_said_to_scale_linearly(tmp_path):
    prices = prices_of(tmp_path, 0.10, 0.18)
    swept = shape_run({1: 500.0, 2: 550.0})
    words = caption(swept, pricing(swept, prices))
    assert "linearly" not in words
    assert "CPU replica shapes measured: 1, 2 cores; each priced, the cheapest taken" in words
    text = sizing_text(swept, prices)
    assert "linearly" not in text
    assert ("Assumed: 2 replicas per small-2 (2 vCPUs): the measured 1-core replica repeated on separate cores "
            "(replica shapes measured: 1, 2 cores, each sized).") in text


def test_an_unswept_run_or_one_shape_keeps_the_linear_assumption(tmp_path):
    prices = prices_of(tmp_path, 0.10, 0.18)
    unswept = [replace(c, server_resources=ServerResources(1.0, "Test CPU", 0, "", "pinned cores 0"))
               for c in rates(server("cpu-off", "off"), 500.0, "s1")]
    one_shape = shape_run({1: 500.0})
    for cells in (unswept, one_shape):
        assert "assumed to scale linearly across its cores or GPUs" in caption(cells, pricing(cells, prices))
        assert "throughput scales linearly across its cores" in sizing_text(cells, prices)


# ----------------------------------------------------------------------------- the section


def test_the_shapes_table_gives_linear_and_the_efficiency_with_its_range():
    """1 core 500 (550 failed), 2 cores 900 (990 failed): linear 1,000; efficiency 900 / 1000 = 0.90, low
    900 / (2 x 550) = 0.818, high 990 / (2 x 500) = 0.99. 4 cores shared the load generator's: 1,600 / 2,000 = 0.80,
    its high end open (its capacity a lower bound), low 1,600 / (4 x 550) = 0.727."""
    cells = shape_run({1: 500.0, 2: 900.0, 4: 1600.0}, shared=(4,))
    [curve] = shape_curves(answer(cells).searches)
    one, two, four = curve.points
    assert (two.linear_rps, two.efficiency) == (1000.0, 0.9)
    assert two.efficiency_low == pytest.approx(900 / 1100) and two.efficiency_high == pytest.approx(0.99)
    assert four.efficiency_high is None and four.efficiency_low == pytest.approx(1600 / 2200)
    table = shapes_table([curve])
    assert table is not None and table.title == "Replica shapes"
    rows = [dict(zip(table.header, row)) for row in table.rows]
    assert [r["cores per replica"] for r in rows] == ["1", "2", "4"]
    assert rows[0]["scaling efficiency"] == "×1 (the reference)"
    assert rows[1]["capacity req/s"] == "900.0, upper end 990.0" and rows[1]["linear from 1 core req/s"] == "1,000.0"
    assert rows[1]["scaling efficiency"] == "×0.90 (×0.82–×0.99)" and rows[1]["note"] == ""
    assert rows[2]["scaling efficiency"] == "≥ ×0.80 (at least ×0.73)"
    assert rows[2]["note"] == "lower bound: shared the load generator's cores"


def test_without_a_one_core_shape_there_is_no_efficiency():
    [curve] = shape_curves(answer(shape_run({2: 900.0, 4: 1600.0})).searches)
    assert all(p.efficiency is None and p.linear_rps is None for p in curve.points)


def test_the_report_has_the_section_and_figures_json_each_point(tmp_path):
    cells = shape_run({1: 500.0, 2: 900.0})
    built = build_report(cells, pricing=pricing(cells, prices_of(tmp_path, 0.10, 0.18)))
    page = report.render_html(built)
    assert "Replica shapes" in page and "Replica shapes: capacity against cores per replica" in page
    assert "## Replica shapes" in report.render_markdown(built, "report.html")
    points = json.loads(report.figures_json(built))["shapes"]
    assert len(points) == 2
    assert points[1] == {"family": "cpu-off", "server": "cpu-off-2c", "device": "cpu", "batch": 1,
                         "p99_objective_ms": 10.0, "cores": 2, "capacity_rps": 900.0, "upper_rps": 990.0000000000001,
                         "linear_rps": 1000.0, "efficiency": 0.9, "efficiency_low": 0.8182, "efficiency_high": 0.99,
                         "shares_loadgen": False, "at_least": False}


def test_the_shapes_chart_draws_each_shape_in_its_configurations_colour(tmp_path, monkeypatch):
    """A shape is a server of its own: its point is in the colour that configuration has in every chart (#58), the
    family's line dark, not a colour of its own."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_hex

    from loadtest.report.charts.assembly import colours_of

    cells = shape_run({1: 500.0, 2: 900.0})
    colours = colours_of(config_labels(config_of(c) for c in cells))
    plt.close("all")
    monkeypatch.setattr(plt, "close", lambda *_: None)
    build_report(cells)
    [fig] = [plt.figure(n) for n in plt.get_fignums() if plt.figure(n).axes[0].get_xlabel() == "cores per replica"]
    points = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) == 1 and line.get_marker() == "o"]
    assert {(int(p.get_xdata()[0]), to_hex(p.get_color())) for p in points} == \
        {(1, colours["cpu-off-1c"]), (2, colours["cpu-off-2c"])}
    monkeypatch.undo()
    plt.close("all")


def test_an_unswept_report_has_no_shapes():
    built = build_report(rates(server("cpu-off", "off"), 500.0, "s1"))
    assert "Replica shapes" not in report.render_html(built) and "shapes" not in json.loads(report.figures_json(built))


def test_batching_configurations_and_shapes_are_priced_together(tmp_path):
    """A batching-on server (one core, 900 req/s, unswept) beside the batching-off shapes: 4000 / 720 = 5.6 -> 6
    replicas, 3 x small-2 = 0.54, cheaper than the 1-core shape's 0.90: the card sizes on it, no shape named."""
    on = [replace(c, server_resources=ServerResources(1.0, "Test CPU", 0, "", "pinned cores 0"))
          for c in rates(server("cpu-cpu", "cpu"), 900.0, "s-on")]
    cells = [*shape_run({1: 500.0, 2: 550.0}), *on]
    _, row, shown = only_row(cells, pricing(cells, prices_of(tmp_path, 0.10, 0.18)))
    assert row.capacity_rps == 900.0 and row.replica_cores is None and row.usd_per_hour == pytest.approx(0.54)
    assert shown["best setup"] == "batching on (profile cpu)"


def test_the_caption_keeps_the_assumption_only_for_a_device_whose_shapes_were_not_measured():
    from loadtest.report.shape_sizing import LINEAR_UNIT, instance_hour_words

    assert instance_hour_words({}, ["cpu", "gpu"]) == LINEAR_UNIT
    mixed = instance_hour_words({"cpu": (1, 2, 4)}, ["cpu", "gpu"])
    assert "CPU replica shapes measured: 1, 2, 4 cores; each priced, the cheapest taken" in mixed
    assert "GPU: one replica measured, assumed to scale linearly" in mixed
    assert "linearly" not in instance_hour_words({"cpu": (1, 2)}, ["cpu"])
