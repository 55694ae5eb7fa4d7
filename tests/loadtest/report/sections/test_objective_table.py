"""The report's table of capacities at every objective, with the gain and ratio per objective, from the
hand-built searches of `test_objectives` (their verdicts worked out there)."""

from __future__ import annotations

from dataclasses import replace

from loadtest.report import configs
from loadtest.report.answers import answers
from loadtest.report.sections.objective_table import objective_headline, objective_table
from tests.loadtest.judge.test_objectives import OFF, ON, search_cells
from tests.loadtest.report.handmade import server

GPU = server("gpu-off", "off", device="gpu")


def table_rows(results):
    found = answers.answer(results)
    labels = configs.config_labels(s.config for s in found.searches)
    table = objective_table(found, labels)
    assert table is not None
    return {(row[0], row[1]): row[2:] for row in table.rows}, table.header


def test_each_configuration_gets_a_capacity_per_objective_with_what_it_rests_on():
    rows, header = table_rows(search_cells(OFF, "off") + search_cells(ON, "on", scale=2.0))
    assert header[2:] == ("p99 ≤ 5 ms", "p99 ≤ 10 ms", "p99 ≤ 25 ms", "p99 ≤ 50 ms", "p99 ≤ 100 ms", "tool ceiling")
    # confirmed only by a confirmation (two windows at 300 that pass are a pass); a higher pass shown beside it
    assert rows[("cpu-off", "1")] == ("100.0 confirmed", "100.0 confirmed", "100.0 confirmed (200.0 passed)",
                                      "100.0 confirmed (300.0 passed)",
                                      "100.0 confirmed (≥ 400.0 passed: the search stopped)",
                                      "not measured: no twin was run")  # records without a tool-ceiling twin
    # batching on doubles every rate: ×2 wherever both sides are bounded; at 100 ms both are open-ended
    # each with its range from the two brackets (200 ÷ 200 to 400 ÷ 100 at 5 ms)
    assert rows[("batching gain on cpu", "1")] == ("×2.00 (×1.00–×4.00)", "×2.00 (×1.00–×4.00)",
                                                   "×2.00 (×0.67–×6.00)", "×2.00 (×0.50–×8.00)", "—", "—")


def test_the_gpu_cpu_ratio_says_which_side_is_only_a_lower_bound():
    gpu = [replace(c, server=GPU) for c in search_cells(GPU, "gpu", scale=3.0)]
    cut = [c for c in search_cells(OFF, "cpu") if c.tag.offered_rps <= 300]  # cpu never measured 400
    rows, _ = table_rows(gpu + cut)
    # at 50 ms: the CPU's 300 passed with nothing above it failing (≥), the GPU's is bounded by 1200: only the
    # high end holds, 1200 ÷ the CPU's confirmed 100
    assert rows[("GPU/CPU", "1")] == ("×3.00 (×1.50–×6.00)", "×3.00 (×1.50–×6.00)", "×3.00 (×1.00–×9.00)",
                                      "at most ×12.00", "—", "—")
    lines = objective_headline(answers.answer(gpu + cut))
    # the searches' own objective (10 ms) has its ratio in the headline already
    assert ("GPU/CPU at request batch 1 at the other objectives: ×3.00 (×1.50–×6.00) at 5 ms, ×3.00 (×1.00–×9.00) "
            "at 25 ms, at most ×12.00 at 50 ms.") in lines
