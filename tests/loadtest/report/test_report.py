"""The report from hand-made fixture results: the answer first, configurations stated once, tables,
never overwriting, comparison deltas, and a self-contained HTML page (its rendering in a browser:
`test_report_browser.py`)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from loadtest.evidence.cell_parts import ServerScrape
from loadtest.report import page as report
from loadtest.report.answers.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.headline import summarise
from loadtest.report.sections.details import latency_split
from loadtest.report.series import AnalysisError
from tests.loadtest.report import handmade
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES


def headline_of(cells) -> tuple[str, ...]:
    """The report's first sentences for these cells alone (`headline.summarise`'s headline)."""
    return summarise(cells, answer(cells), config_labels(config_of(c) for c in cells)).headline


def table(md: str, title: str) -> list[list[str]]:
    """Rows (cells stripped) of the Markdown table under `## title`."""
    section = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def test_report_written_beside_first_results_and_never_overwritten(runs):
    here = runs["cpu-run"].parent
    first = report.run([runs["cpu-run"]])
    assert first == (here / "report.html", here / "report.md", here / "figures.csv", here / "figures.json")
    before = first[0].read_bytes()
    second = report.run([runs["cpu-run"]])
    assert second == (here / "report-2.html", here / "report-2.md", here / "figures-2.csv", here / "figures-2.json")
    assert first[0].read_bytes() == before
    elsewhere = report.run([runs["cpu-run"]], out=runs["cpu-run"].parent / "out")
    assert elsewhere[0] == runs["cpu-run"].parent / "out" / "report.html" and elsewhere[1].is_file()


def md_answer_rows(md: str) -> list[list[str]]:
    """Rows of the first Markdown table below the card (the answer's), cells stripped."""
    tables = [t for t in md.split("\n\n|")[1:] if not t.startswith(" target |")]
    lines = tables[0].split("\n\n", 1)[0].splitlines()[2:]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def test_markdown_opens_with_the_card_then_its_terms_then_the_findings_and_the_answer_table(bought):
    md = bought[1].read_text()
    lines = md.splitlines()
    # The card first: its title the page's heading, one row per target and device, with what bounded each answer
    # and its tool ceiling: the GPU container's row is the production server's (for buying), the CPU stand-in's
    # device alone was not measured (not for buying: the most it needs, "≤"); the row for buying is the container's,
    # so the title does not call its figures the stand-in's (#68)
    assert lines[0] == ("# FOR BUYING — TF Serving containers and the embedded stand-in (runtime not recorded) on "
                        "Intel Xeon Platinum 8375C and NVIDIA H100 80GB HBM3")
    assert lines[2] == ("| target | device | best setup | capacity req/s | p99 upper estimate ms | bounded by | "
                        "boxes | USD/h | USD per million requests |")
    rows = [line for line in lines[4:] if line.startswith("| ")][:3]
    assert rows[0] == ("| 5,000 req/s · p99 ≤ 10 ms · 1 image | CPU | batching on (profile cpu) | 675.0 confirmed "
                       "| 9.49 | device alone not measured; tool ceiling ≥ 1,350.0 req/s (2× the "
                       "answer) | ≤ 10 + 1 spare replicas | ≤ 4.40 | ≤ 0.244 |")
    # per-replica prices with one spare replica (N + 1): CPU (10 + 1) x 0.40 = 4.40 USD/h, / 18 = 0.244 per M;
    # GPU (1 + 1) x 4.00 = 8.00, / 18 = 0.444
    assert rows[1] == ("| 5,000 req/s · p99 ≤ 10 ms · 1 image | GPU | batching on (profile gpu) | 6,250.0 confirmed "
                       "| 9.26 | the production server; tool ceiling ≥ 12,500.0 req/s (2× the "
                       "answer) | 1 + 1 spare replicas | 8.00 | 0.444 |")
    assert lines[6] == ""  # one target (request batch 1), two devices: two rows
    # one comparison line: no cheaper device (a "≤" price is not a quote), GPU/CPU, the batching gains with their
    # ranges (675 / 489.4, off's upper end, to 700 / 453.1)
    assert "10 ms, 1 image: GPU/CPU ×9.26 (×8.93–×10.37); batching: CPU ×1.49 (×1.38–×1.54), GPU ×1.85 " \
           "(×1.79–×2.07) (not paired)." in lines
    assert not any(line.startswith("**") for line in lines)  # no bold paragraph: the title is the heading
    assert lines.index("## Terms of the card") < lines.index("## Findings")
    # the first screen holds the card alone (the design's ≤ 60 words outside its table, a command one word): its
    # notes and the chart's link come under its Terms
    first_screen = [line for line in md.split("\n## ", 1)[0].splitlines() if line and not line.startswith("|")]
    assert sum(len(re.sub(r"`[^`]*`", "command", line).split()) for line in first_screen) <= 60
    assert not any("report.html" in line for line in first_screen)
    assert "The chart, each answer beside its device alone: [report.html](report.html)." in lines[
        lines.index("## Terms of the card"):lines.index("## Findings")]
    findings = lines[lines.index("## Findings"):]
    assert findings[2] == ("cpu (Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz): bounded by device alone not measured "
                           "(tool ceiling ≥ 1,350.0 req/s (2× the answer)).")
    assert findings[4].startswith("batching gain ×1.49 (×1.38–×1.54) on cpu")
    assert ("gpu (NVIDIA H100 80GB HBM3): bounded by the production server (tool ceiling ≥ 12,500.0 req/s (2× the "
            "answer)).") in findings
    assert ("GPU/CPU ×9.26 (×8.93–×10.37) at p99 ≤ 10 ms (request batch 1): gpu-gpu 6,250.0 req/s vs cpu-cpu 675.0 "
            "req/s.") in findings
    assert "GPU/CPU at request batch 1 at the other objectives: ×10.00 (×6.67–×15.00) at 5 ms." in findings  # passes
    table = next(i for i, line in enumerate(findings) if line.startswith("|"))
    assert findings[table].startswith("| device | device name | request batch | p99 objective ms | best "
                                      "configuration |")
    answer_rows = {(r[0], r[2]): r for r in md_answer_rows(md)}
    cpu = answer_rows[("cpu", "1")]
    # "—": no device telemetry; 9.49: the confirmation's early-stopping estimate (its raw p99 is 9.60)
    assert cpu[4:11] == ["cpu-cpu", "675.0", "668.2", "—", "3.20", "9.49", "700.0"]
    assert cpu[11] == "×1.49 (×1.38–×1.54) (cpu-cpu vs cpu-off 453.1 req/s)" and cpu[12] == "×9.26 (×8.93–×10.37)"
    assert cpu[13] == "≥ 1,350.0 req/s (2× the answer)"  # its tool ceiling, as the card gives it
    assert len(cpu) == 14  # boxes and prices are the card's alone
    assert md.index("Capacity under the latency objective, per device.") < md.index("Generated ")
    figures = json.loads(bought[3].read_text())
    assert figures["card"]["rows"][1]["capacity_rps"] == 6250.0 and figures["card"]["title"] == lines[0][2:]
    assert figures["card"]["rows"][1]["bounded"] == "the production server"
    by_config = {f["configuration"]: f for f in figures["figures"]}
    assert by_config["gpu-gpu"]["tool_ceiling"]["text"] == "≥ 12,500.0 req/s (2× the answer)"


def test_html_opens_with_the_card_then_its_chart_before_any_other_plot(bought):
    page = bought[0].read_text()
    body = page.split("<body>", 1)[1]
    title = body.index('<h1 class="buy">FOR BUYING — ')
    card_table = body.index('<table class="card">')
    chart = body.index('<img class="chart" alt="What the server served, against the device alone"')
    assert title < card_table < chart == body.index("<img")  # the card, then its chart
    # then USD/h for each target against the objective (the run is for buying: priced), then the findings
    cost = body.index('<img class="chart" alt="USD/h for each target at each p99 objective"')
    assert chart < cost == body.index("<img", chart + 1)
    after = body.index("<img", cost + 1)  # the other plots
    assert chart < body.index('id="card-terms"') < body.index("batching gain ×1.49 (×1.38–×1.54) on cpu") \
        < after
    assert body.index("Capacity under the latency objective, per device") < after
    assert body.index("<h2>Latency vs offered load</h2>") < body.index("<h2>Throughput vs load</h2>")
    assert body.index("<img") < body.index("<h2>Configurations</h2>")  # the wide table is a detail


def test_without_capacity_searches_the_answer_says_so_and_gives_lower_bounds(built):
    md = built[1].read_text()
    assert md.splitlines()[2] == "no capacity search in these results: run make capacity or make tune."
    rows = md_answer_rows(md)
    assert rows == [["cpu-off", "1", "800.0", "796.0", "796.0", "—", "21.00",
                     "highest passing offered rate 800 req/s; 1600 req/s failed"]]
    assert "Best measured open-loop rate at p99 ≤ 50 ms: a lower bound." in md


def test_answer_at_an_objective_not_searched_says_so(runs):
    md = report.run([runs["capacity-run"]], p99_ms=20)[1].read_text()
    assert md.splitlines()[2] == "no capacity search at p99 ≤ 20 ms in these results (searched: 10 ms)."
    assert md_answer_rows(md) == [["cpu-off", "1", "400.0", "398.0", "398.0", "—", "7.50",
                                   "highest passing offered rate 400 req/s; 800 req/s failed"]]  # the sweep only


@pytest.mark.parametrize("kwargs, message", [
    ({"target_rps": -5}, "--target-rps must be positive"),
    ({"p99_ms": 0}, "--p99-ms must be a positive number"),
    ({"target_rps": 10, "headroom": 1.0}, "--headroom must be in [0, 1)"),
    ({"target_rps": 10, "prices": "nope.toml"}, "price file not found"),
])
def test_bad_answer_inputs_are_errors(runs, kwargs, message):
    with pytest.raises(AnalysisError) as err:
        report.run([runs["capacity-run"]], **kwargs)
    assert message in str(err.value)


def test_searches_table(searched):
    rows = {(r[0], r[1]): r for r in table(searched[1].read_text(), "Capacity searches")}
    # one upper end (489.4: the lowest rate above it shown to fail; 471.2 stayed inconclusive, no upper end) and
    # one p99 (the estimate the verdict is on; not also the cell's raw p99)
    assert rows[("cpu-off", "1")][3:10] == ["yes", "453.1", "448.6", "—", "3.10", "9.22", "489.4"]
    assert rows[("cpu-off", "1")][10] == "not measured: no twin was run"  # its tool ceiling
    assert rows[("cpu-off", "1")][13] == "between 453.1 and 489.4 req/s"  # to its upper end, as every table prints it
    assert rows[("cpu-off", "8")][3:5] == ["NO", "—"] and rows[("cpu-off", "8")][9] == "2.5"  # its lowest shown to fail
    assert rows[("cpu-off", "8")][13].startswith("unmet: stalls of about 23 ms")
    assert len(rows) == 6


def test_cpu_vs_gpu_peaks_at_equal_request_batch_size(built):
    md = built[1].read_text()
    peaks = {(r[0], r[1]): r for r in table(md, "Peak throughput") if r[20] == "yes"}  # each configuration's peak
    # Peaks: the highest VALID throughput of any load mode. CPU off/1 peaks at c=16 (1350; c=32 is invalid),
    # GPU at c=16 (4600).
    assert peaks[("cpu-off", "1")][3] == "1,350.0" and peaks[("cpu-off", "1")][5] == "closed loop, 16 users"
    assert peaks[("gpu-off", "1")][3] == "4,600.0"
    assert peaks[("cpu-off", "1")][21] == peaks[("gpu-off", "1")][21] == "×3.41 (gpu-off ÷ cpu-off)"  # 4600 / 1350
    assert peaks[("gpu-off", "32")][21] == "×15.56 (gpu-off ÷ cpu-off)"  # 2800*32 / (180*32)
    assert peaks[("cpu-latency", "32")][3] == "4,160.0"  # c=8: 130*32; c=16/32 invalid
    assert peaks[("gpu-latency", "32")][21] == "×22.31 (gpu-latency ÷ cpu-latency)"  # 2900*32 / 4160
    ratios = {r[21] for r in peaks.values()} - {"—"}
    assert len(ratios) == 4  # one ratio per request batch and batching on or off, as the old table's four rows


def test_invalid_and_failed_cells_listed_with_reasons(built):
    md = built[1].read_text()
    rows = table(md, "Invalid and failed cells")
    assert len(rows) == 6  # 5 in the CPU run, 1 in the GPU run; none dropped
    reasons = {r[-1] for r in rows}
    assert "failed: server stopped answering: UNAVAILABLE for 12.0 s" in reasons
    assert "unstable: window throughput CV 0.31 > 0.10" in reasons
    assert all(r[3] == "NO" for r in rows)
    every = built[0].read_text().split("<h2>Every cell</h2>", 1)[1]
    assert every.count('<tr class="failed">') == 1 and every.count('<tr class="invalid">') == 5


def test_what_was_measured_is_stated_once_per_configuration(searched, built):
    rows = table(searched[1].read_text(), "Configurations")
    assert [r[0] for r in rows] == ["cpu-cpu", "cpu-off", "gpu-gpu", "gpu-off"]
    gpu = rows[2]
    assert gpu[1:6] == ["TF Serving container", "gpu", "NVIDIA H100 80GB HBM3", "gpu",
                        "batch_timeout_micros=500, max_batch_size=128, max_enqueued_batches=100, num_batch_threads=4"]
    assert gpu[6] == "image=tensorflow/serving:2.19.0-gpu, tensorflow=2.19.0"
    assert gpu[10].startswith("bench-01 @ 3f2c1e0; ")
    for path in (*searched[:2], *built[:2]):  # two batching-enabled and two GPU configurations in each page
        page = path.read_text()
        assert "Measured:" not in page
        assert page.count("batch_timeout_micros=") == 2 and page.count("image=tensorflow/serving:2.19.0-gpu") == 2


def test_comparison_deltas(built):
    rows = table(built[1].read_text(), "Comparison with another run")
    by = {(r[0], r[1], r[2], r[3]): r for r in rows}
    # A = 1300 images/s, p99 30 ms; B (10% faster run) = 1430 images/s, p99 30/1.1 = 27.273 ms.
    row = by[("cpu embedded server", "off", "1", "concurrency 8")]
    assert row[4:10] == ["1,430.0", "1,300.0", "-9.1%", "27.27", "30.00", "+10.0%"]
    gpu = by[("gpu TF Serving container", "off", "1", "concurrency 8")]
    assert gpu[4] == "—" and gpu[6] == "—" and gpu[10] == "absent"


def test_cli_errors_are_one_line(runs, tmp_path):
    done = invoke("report", tmp_path / "missing.jsonl")
    assert done.exit_code == 1
    err = done.stderr
    assert err.count("\n") == 1 and err.startswith("mnist-bench report: error: ") and "results file not found" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    done = invoke("report", empty)
    assert done.exit_code == 1
    assert "no cells" in done.stderr


def test_html_is_self_contained(built):
    page = built[0].read_text()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert page.count('src="data:image/png;base64,') == 4  # latency vs offered load, throughput, latency, batch


def test_report_without_valid_cells_or_batch_metrics(tmp_path):
    """A run where nothing is valid and the server exposed no batch sizes still reports it all."""
    from dataclasses import replace

    from loadtest.evidence.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    for cell in read_results(FIXTURES / "cpu-run" / "results.jsonl")[:3]:
        append_result(path, replace(cell, valid=False, server_batch_sizes={}, server_batch_size_mean=None,
                                    flags=[ValidityFlag("unstable", "windows differ by 18%")]))
    html_path, md_path, *_ = report.run([path])
    page = html_path.read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert "No server-side batch sizes were recorded" in page
    rows = table(md_path.read_text(), "Peak throughput")
    assert rows[0][3] == "no valid cell"
    assert len(table(md_path.read_text(), "Invalid and failed cells")) == 3


def test_report_of_a_run_whose_every_cell_failed(tmp_path):
    """An interrupted first cell leaves only zeros to plot; the report still lists it."""
    from dataclasses import replace

    from loadtest.evidence.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    cell = read_results(FIXTURES / "cpu-run" / "results.jsonl")[0]
    append_result(path, replace(cell, status="failed", failure_reason="interrupted (Ctrl-C)", valid=False,
                                throughput_rps=0.0, throughput_ips=0.0, latency_p50_ms=None,
                                latency_p99_ms=None, flags=[ValidityFlag("failed", "interrupted (Ctrl-C)")]))
    html_path, md_path, *_ = report.run([path])
    assert html_path.read_text().count('src="data:image/png;base64,') >= 2
    rows = table(md_path.read_text(), "Invalid and failed cells")
    assert len(rows) == 1 and "interrupted (Ctrl-C)" in " ".join(rows[0])


def test_a_search_whose_server_never_started_is_reported_not_plotted(runs):
    from loadtest.evidence.records import append_result, read_results
    from loadtest.report.answers.answers import answer
    from loadtest.report.charts.assembly import colours_of, offered_lines
    from loadtest.report.configs import config_labels, config_of
    from tests.loadtest.report.handmade import cell, server

    start = cell(server("cpu-late", "cpu"), rate=None, p99=None, failed="server cpu-late is not answering",
                 search={"id": "never", "role": "start", "p99_objective_ms": 10.0, "offered_rps": None})
    append_result(runs["capacity-run"], start)
    html_path, md_path, *_ = report.run([runs["capacity-run"]])
    rows = {r[12]: r for r in table(md_path.read_text(), "Capacity searches")}
    assert rows["never"][3] == "NO" and rows["never"][13] == "no rate measured: server cpu-late is not answering"
    cells = read_results(runs["capacity-run"])
    labels = config_labels(config_of(c) for c in cells)
    panels = [line.label for line in offered_lines(cells, answer(cells), labels, colours_of(labels))]
    assert len(panels) == 6 and not any(p.startswith("cpu-late") for p in panels)  # nothing offered: no panel
    [late] = [r for r in md_answer_rows(md_path.read_text()) if r[1] == "Test CPU"]
    assert late[4] == "none met the objective" and late[11] == "— no batching-off search to compare with"


def test_each_cell_splits_its_latency_into_the_server_and_the_rest():
    measured = replace(handmade.cell(handmade.server("cpu-off", "off"), rate=100.0), latency_mean_ms=3.5,
                       server_metrics=ServerScrape(True, request_latency_mean_us=2900.0))
    assert latency_split(measured) == ("2.900", "0.600")
    assert latency_split(replace(measured, server_metrics=None)) == ("—", "—")  # a TF Serving container may not say
