"""A comparison's one value (`loadtest.report.answers.ratios`): the paired comparison's where the run has one, else the
unpaired ratio of the two answers; its verdict ("tie": the range holds ×1.0) read from the same one."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from loadtest.report.answers.answers import answer
from loadtest.report.answers.paired import GPU_CPU, PairedRatio
from loadtest.report.answers.ratios import (
    device_answer,
    gain_key,
    gain_no_difference,
    gain_value,
    gpu_cpu_no_difference,
    gpu_cpu_value,
    has_figure,
    is_paired,
)
from tests.loadtest.report.test_views_agree import OBJECTIVE_MS, run_of

# batching on the CPU ×4 over off, and the GPU ×2 over the CPU's best: unpaired ranges far from ×1.0
FAR = answer(run_of([("cpu", 400.0, "confirmed", None, 2.0), ("cpu-batching", 1600.0, "confirmed", None, 2.0),
                     ("gpu", 3200.0, "confirmed", None, 2.0)]))
ONLY_CPU = answer(run_of([("cpu", 400.0, "confirmed", None, 2.0)]))


def compared(value: str, no_difference: bool, paired: bool = True, ratio: float | None = 1.0) -> PairedRatio:
    """A paired comparison as the ratios read it: its ratio (None: it has none), value, verdict, whether paired."""
    return cast(PairedRatio, SimpleNamespace(ratio=ratio, value=lambda: value, no_difference=no_difference,
                                             paired=paired))


def test_without_a_paired_comparison_the_unpaired_ratio_and_its_verdict_are_read():
    assert gain_value(FAR, {}, "cpu", 1, OBJECTIVE_MS).startswith("×4.00 (")
    assert gpu_cpu_value(FAR, {}, 1, OBJECTIVE_MS).startswith("×2.00 (")
    assert not gain_no_difference(FAR, {}, "cpu", 1, OBJECTIVE_MS)
    assert not gpu_cpu_no_difference(FAR, {}, 1, OBJECTIVE_MS)


def test_a_paired_comparison_is_the_one_value_and_verdict_where_the_run_has_one():
    """Paired, a tie; unpaired, the same answers read ×4 and ×2: the paired one is what every view prints."""
    paired = {gain_key("cpu", 1, OBJECTIVE_MS): compared("×1.10 (×0.80–×1.50)", True),
              (GPU_CPU, 1, OBJECTIVE_MS): compared("×1.05 (×0.90–×1.20)", True)}
    assert gain_value(FAR, paired, "cpu", 1, OBJECTIVE_MS) == "×1.10 (×0.80–×1.50)"
    assert gpu_cpu_value(FAR, paired, 1, OBJECTIVE_MS) == "×1.05 (×0.90–×1.20)"
    assert gain_no_difference(FAR, paired, "cpu", 1, OBJECTIVE_MS)
    assert gpu_cpu_no_difference(FAR, paired, 1, OBJECTIVE_MS)
    assert is_paired(paired, gain_key("cpu", 1, OBJECTIVE_MS)) and not is_paired({}, gain_key("cpu", 1, OBJECTIVE_MS))
    # another device, request batch or objective is not this comparison
    assert not gain_no_difference(FAR, {gain_key("gpu", 1, OBJECTIVE_MS): compared("×1.0", True)}, "cpu", 1,
                                  OBJECTIVE_MS)
    assert not gain_no_difference(FAR, {gain_key("cpu", 32, OBJECTIVE_MS): compared("×1.0", True)}, "cpu", 1,
                                  OBJECTIVE_MS)


def test_a_paired_comparison_without_a_ratio_leaves_the_unpaired_one():
    """Both capacities lower bounds, say: the comparison has no ratio, so the answers' own ratio is read."""
    paired = {gain_key("cpu", 1, OBJECTIVE_MS): compared("— both capacities are lower bounds", True, ratio=None)}
    assert gain_value(FAR, paired, "cpu", 1, OBJECTIVE_MS).startswith("×4.00 (")
    assert not gain_no_difference(FAR, paired, "cpu", 1, OBJECTIVE_MS)
    assert not is_paired(paired, gain_key("cpu", 1, OBJECTIVE_MS))


def test_nothing_to_compare_reads_no_value_and_no_tie():
    assert device_answer(ONLY_CPU, "gpu", 1, OBJECTIVE_MS) is None
    assert gpu_cpu_value(ONLY_CPU, {}, 1, OBJECTIVE_MS) == "—"
    assert gain_value(ONLY_CPU, {}, "gpu", 1, OBJECTIVE_MS) == "—"
    assert not gpu_cpu_no_difference(ONLY_CPU, {}, 1, OBJECTIVE_MS)
    assert not gain_no_difference(ONLY_CPU, {}, "gpu", 1, OBJECTIVE_MS)


def test_a_figure_is_a_ratio_or_one_end_of_its_range():
    assert all(has_figure(v) for v in ("×1.20 (×0.90–×1.60)", "at least ×0.49", "at most ×2.10"))
    assert not any(has_figure(v) for v in ("—", "— both capacities are lower bounds", ""))
