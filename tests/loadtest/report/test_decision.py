"""The decision a report opens with: what to buy at each objective searched, or why nothing answered and the
objective that does; and the glossary that spells out every configuration name and term."""

from __future__ import annotations

import re
import shutil

from loadtest.evidence.records import read_results
from loadtest.report import page as report
from loadtest.report.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.decision import decision_lines
from loadtest.report.sections.objective_table import objective_table
from loadtest.report.sizing.instances import Pricing
from loadtest.report.sizing.prices import DEFAULT_PRICES, load_prices
from tests.loadtest.report.handmade import rates, search, server
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
    measured = "measured on the embedded server (JAX, the same weights (.keras)), not TF Serving"
    assert first.startswith(f"Decision at p99 ≤ 10 ms, request batch 1, {measured}: none on this machine.")
    assert "requests paused about 30 ms" in first and "more servers would not meet it" in first  # the CPU's stalls
    assert "requests paused about 16 ms" in first  # the GPU's
    # the same cells answer at 25 ms: the CPU without batching out-served the GPU at request batch 1, but at 2% of
    # what the CPU alone runs: no purchase, the server compared on each device, and what to run next
    assert "At p99 ≤ 25 ms the same measurements answer: no purchase from this: the serving path bounded it, not " \
           "the device (cpu-off served 2% of what the CPU alone runs at batch 1). The server on the CPU: cpu-off " \
           "(the CPU, Intel(R) Xeon(R) Processor, batching off), at least 107.5 req/s per server" in first
    assert "on the GPU: gpu-off, 58.8 req/s per server (the server on the GPU ÷ on the CPU at most ×0.55)" in first
    assert "replicas" not in first and "USD" not in first
    assert first.endswith('Run next: `make capacity SERVE="cpu/cpu cpu/off gpu/gpu gpu/off" BATCH="1 32" P99_MS=25` '
                          "where Docker runs TF Serving's containers (a GPU's needs NVIDIA's container runtime): TF "
                          "Serving itself on the same devices, at a larger request batch too.")
    assert second.startswith(f"Decision at p99 ≤ 10 ms, request batch 32, {measured}: none on this machine.")
    assert "The server on the GPU: gpu-off (the GPU, NVIDIA H100 80GB HBM3, batching off), " \
           "108.7 req/s per server (confirmed at 99% confidence; between 108.7 and 217.4 req/s" in second


def test_without_prices_the_decision_says_how_to_get_a_cost_where_it_would_give_one(tmp_path):
    results = read_results(FIXTURES / "capacity-run" / "results.jsonl")
    lines = decision_lines(answer(results), results, config_labels(config_of(c) for c in results), None)
    assert "replicas" not in lines[0] and lines[-1].endswith(
        "give a target load and prices (--target-rps, --prices) for how many and the cost.")
    # where the serving path bounded the answer no purchase is offered, so no prices are asked for either
    second = bold_lines(h100_report(tmp_path))[1]
    assert "Run next:" in second and "give a target load" not in second


def test_a_decision_gives_the_same_replicas_and_cost_as_the_answer_table(tmp_path):
    results = read_results(FIXTURES / "capacity-run" / "results.jsonl")
    labels = config_labels(config_of(c) for c in results)
    pricing = Pricing(5000.0, 0.2, load_prices(DEFAULT_PRICES))
    line = decision_lines(answer(results), results, labels, pricing)[0]
    assert line.startswith("Decision at p99 ≤ 10 ms, request batch 1, measured on the embedded server (runtime not "
                           "recorded) and TF Serving container: ")
    assert "confirmed at 99% confidence" in line
    shutil.copytree(FIXTURES / "capacity-run", tmp_path / "capacity-run")
    paths = [tmp_path / "capacity-run" / "results.jsonl"]
    md = report.run(paths, target_rps=5000, prices=DEFAULT_PRICES)[1].read_text()
    row = next(r for r in md.splitlines() if r.startswith("| gpu |") and "| 1 |" in r)
    cells = [c.strip() for c in row.strip("|").split("|")]
    replicas, instance, per_instance, instances, per_hour, per_million = cells[-6:]
    assert line.split("TF Serving container: ", 1)[1].split(" (")[0] == cells[4]
    # the arithmetic in view, in the line and the table alike: 1 replica, 1 per h100-1 at 4.00 USD/h
    assert (replicas, instance, per_instance, instances) == ("1", "h100-1 (26 vCPUs, 1 × NVIDIA H100 80GB HBM3; 4.00 "
                                                             "USD/h)", "1", "1")
    assert f"{replicas} replicas on {instances} × h100-1 for 5,000 req/s (26 vCPUs, 1 × NVIDIA H100 80GB HBM3, " \
           f"4.00 USD/h each, {per_instance} replicas each): {per_hour} USD/h, {per_million} USD per million " \
           "inferences" in line


def test_an_answer_the_serving_path_bounded_gets_no_purchase_but_what_to_run_next():
    results = read_results(FIXTURES / "demo-run" / "results.jsonl")
    pricing = Pricing(5000.0, 0.2, load_prices(DEFAULT_PRICES))
    (line,) = decision_lines(answer(results), results, config_labels(config_of(c) for c in results), pricing)
    assert line.startswith("Decision at p99 ≤ 10 ms, request batch 1, measured on the embedded server (TensorFlow, "
                           "SavedModel), not TF Serving: no purchase from this: the serving path bounded it, not the "
                           "device (cpu-cpu served 27% of what the CPU alone runs at batch 2). The server on the CPU: "
                           "cpu-cpu (the CPU, AMD EPYC, batching profile cpu), 1,005.1 req/s per server (confirmed")
    assert "replicas" not in line and "USD" not in line
    assert line.endswith('Run next: `make capacity SERVE="cpu/cpu cpu/off" BATCH="1 32" P99_MS=10` where Docker runs '
                         "TF Serving's containers (a GPU's needs NVIDIA's container runtime): TF Serving itself on the "
                         "same devices, at a larger request batch too.")


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
    from loadtest.report.glossary import glossary_markdown
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


def test_passes_below_a_failed_confirmation_give_the_highest_pass_labelled_as_the_objective_table_does():
    """The earlier H100 run's cpu-off at 10 ms: passes at 901.2 to 1,295.5 req/s, then 1,295.5's confirmation failed."""
    off = server("cpu-off", "off")
    cells = search(off, "s1", [("probe", 2000.0, 5.0), ("bracket", 901.2, 6.0), ("bracket", 1126.5, 6.0),
                               ("bisect", 1239.2, 6.0), ("bracket", 1295.5, 6.0), ("confirm", 1295.5, 12.0)])
    result = answer(cells)
    [line] = decision_lines(result, cells, config_labels(config_of(c) for c in cells), None)
    table = objective_table(result, config_labels(config_of(c) for c in cells))
    assert table is not None and any(cell == "1,239.2 passed" for row in table.rows for cell in row)
    assert "none on this machine" in line and "every rate tried missed it" not in line
    assert "cannot meet it" not in line
    assert "cpu-off's highest pass, 1,239.2 req/s, passed, not confirmed, but the search's own confirmation did not " \
           "hold" in line


def test_a_decision_line_carries_one_upper_end_per_answer():
    on, off = server("cpu-cpu", "cpu"), server("cpu-off", "off")
    cells = rates(on, 500.0, "on") + rates(off, 400.0, "off")
    [line] = decision_lines(answer(cells), cells, config_labels(config_of(c) for c in cells), None)
    # cpu-cpu's range ends at 550 (1.1 x 500, failed), with its reason; no second upper end beside it
    assert "between 500 and 550 req/s (550 failed)" in line
    above = {float(n.replace(",", "")) for n in re.findall(r"\d[\d,]*\.?\d*", line.split("cpu-cpu", 1)[1])
             if float(n.replace(",", "")) > 500}
    assert above == {550.0} and "lowest failing" not in line and "inconclusive" not in line
