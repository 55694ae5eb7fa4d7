"""The decision a report opens with: what to buy at each objective searched, or why nothing answered and the
objective that does; and the glossary that spells out every configuration name and term."""

from __future__ import annotations

import shutil

from loadtest.analysis import report
from loadtest.analysis.answers import answer, config_labels, config_of
from loadtest.analysis.decision import decision_lines
from loadtest.analysis.instances import Pricing
from loadtest.analysis.prices import DEFAULT_PRICES, load_prices
from loadtest.records import read_results
from tests.loadtest.analysis.handmade import rates, server
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES


def h100_report(tmp_path, **kwargs) -> str:
    """The report rebuilt from both halves of the second H100 run (GPU, then CPU, on two machines)."""
    paths = []
    for run in ("h100-run-b", "h100-run-b-cpu"):
        shutil.copytree(FIXTURES / run, tmp_path / run)
        paths.append(tmp_path / run / "results.jsonl")
    return report.run(paths, **kwargs)[1].read_text()


def bold_lines(md: str) -> list[str]:
    return [line.strip("*") for line in md.splitlines() if line.startswith("**")]


def test_the_h100_report_opens_with_why_nothing_answered_at_10_ms_and_the_decision_at_25(tmp_path):
    md = h100_report(tmp_path, target_rps=5000, prices=DEFAULT_PRICES)
    first, second = bold_lines(md)[:2]
    assert first.startswith("Decision at p99 ≤ 10 ms, request batch 1: none on this machine.")
    assert "requests paused about 30 ms" in first and "more servers would not meet it" in first  # the CPU's stalls
    assert "requests paused about 16 ms" in first  # the GPU's
    # the same cells answer at 25 ms: the CPU without batching out-served the GPU at request batch 1
    assert "At p99 ≤ 25 ms the same measurements answer: cpu-off (the CPU, Intel(R) Xeon(R) Processor, " \
           "batching off), at least 107.5 req/s per server" in first
    assert "the GPU's best: gpu-off, 58.8 req/s per server (GPU/CPU at most ×0.55, " in first
    assert "replicas on" in first and "USD per million inferences (EXAMPLE prices, not quotes)" in first
    assert second.startswith("Decision at p99 ≤ 10 ms, request batch 32: none on this machine.")
    assert "At p99 ≤ 25 ms the same measurements answer: gpu-off (the GPU, NVIDIA H100 80GB HBM3, batching off), " \
           "108.7 req/s per server (confirmed at 99% confidence; between 108.7 and 217.4 req/s" in second


def test_without_prices_the_decision_says_how_to_get_a_cost(tmp_path):
    first = bold_lines(h100_report(tmp_path))[0]
    assert "replicas" not in first.split("give a target load")[0]
    assert bold_lines(h100_report(tmp_path / "again"))[1].endswith(
        "give a target load and prices (--target-rps, --prices) for how many and the cost.")


def test_a_decision_gives_the_same_replicas_and_cost_as_the_answer_table(tmp_path):
    results = read_results(FIXTURES / "demo-run" / "results.jsonl")
    labels = config_labels(config_of(c) for c in results)
    pricing = Pricing(5000.0, 0.2, load_prices(DEFAULT_PRICES))
    (line,) = decision_lines(answer(results), results, labels, pricing)
    assert line.startswith("Decision at p99 ≤ 10 ms, request batch 1: ")
    assert "confirmed at 99% confidence" in line
    shutil.copytree(FIXTURES / "demo-run", tmp_path / "demo-run")
    md = report.run([tmp_path / "demo-run" / "results.jsonl"], target_rps=5000, prices=DEFAULT_PRICES)[1].read_text()
    row = next(r for r in md.splitlines() if r.startswith("| cpu |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    replicas, per_hour, per_million = cells[-3:]
    assert line.removeprefix("Decision at p99 ≤ 10 ms, request batch 1: ").split(" (")[0] == cells[4]
    assert f"{replicas.split(' on ')[0]} replicas on {replicas.split(' on ')[1]}" in line
    assert f"{per_hour} USD/h, {per_million} USD per million inferences" in line


def test_the_glossary_spells_out_every_configuration_and_the_terms_the_tables_use(tmp_path):
    md = h100_report(tmp_path)
    terms = md[md.index("## Terms"):]
    for name, meaning in (("gpu-gpu", "the GPU, NVIDIA H100 80GB HBM3, batching profile gpu"),
                          ("cpu-off", "the CPU, Intel(R) Xeon(R) Processor, batching off")):
        assert f"| {name} | {meaning} |" in terms
    for term in ("| N, k |", "| est. p99 |", "| probe, bracket, bisect, extend, confirm |", "| device floor |",
                 "| client + wire |", "| unmet: stalls |", "| inconclusive |", "| peak |"):
        assert term in terms


def test_the_glossary_page_the_readme_links_is_the_reports_terms_table():
    from loadtest.analysis.glossary import glossary_markdown
    from tests.support.paths import REPO

    assert (REPO / "docs" / "glossary.md").read_text() == glossary_markdown(), \
        "docs/glossary.md is stale: write glossary_markdown() to it"
    assert "(docs/glossary.md)" in (REPO / "README.md").read_text()


def test_a_decision_on_repeated_searches_names_the_repeats_and_sizes_on_the_lower():
    on, off = server("cpu-cpu", "cpu"), server("cpu-off", "off")
    cells = rates(on, 539.4, "on-1") + rates(on, 464.1, "on-2") + rates(off, 391.8, "off-1") + rates(off, 392.1, "o2")
    result = answer(cells)
    [line] = decision_lines(result, cells, config_labels(config_of(c) for c in cells), None)
    assert "464.1 req/s per server (the lower of 2 repeats (464.1, 539.4 req/s); confirmed" in line
