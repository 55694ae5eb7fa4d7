"""The report from hand-made fixture results: tables, never overwriting, comparison deltas, and a
self-contained HTML page (its rendering in a browser: `test_report_browser.py`)."""

from __future__ import annotations

from loadtest.analysis import report
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES


def table(md: str, title: str) -> list[list[str]]:
    """Rows (cells stripped) of the Markdown table under `## title`."""
    section = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in lines]


def test_report_written_beside_first_results_and_never_overwritten(runs):
    first = report.run([runs["cpu-run"]])
    assert first == (runs["cpu-run"].parent / "report.html", runs["cpu-run"].parent / "report.md")
    before = first[0].read_bytes()
    second = report.run([runs["cpu-run"]])
    assert second == (runs["cpu-run"].parent / "report-2.html", runs["cpu-run"].parent / "report-2.md")
    assert first[0].read_bytes() == before
    elsewhere = report.run([runs["cpu-run"]], out=runs["cpu-run"].parent / "out")
    assert elsewhere[0] == runs["cpu-run"].parent / "out" / "report.html" and elsewhere[1].is_file()


def test_cpu_vs_gpu_table_at_equal_request_batch_size(built):
    md = built[1].read_text()
    rows = {(r[0], r[1], r[2]): r for r in table(md, "CPU vs GPU at equal request batch size")}
    # Peak VALID throughput: CPU off/1 peaks at c=16 (1350; c=32 is invalid), GPU at c=16 (4600).
    assert rows[("1", "off", "closed")][3] == "1,350.0" and rows[("1", "off", "closed")][6] == "4,600.0"
    assert rows[("1", "off", "closed")][9] == "3.41x"  # 4600 / 1350
    assert rows[("32", "off", "closed")][9] == "15.56x"  # 2800*32 / (180*32)
    assert rows[("32", "latency", "closed")][3] == "4,160.0"  # c=8: 130*32; c=16/32 invalid
    assert rows[("32", "latency", "closed")][9] == "22.31x"  # 2900*32 / 4160
    assert rows[("1", "off", "open")][8] == "not measured" and rows[("1", "off", "open")][9] == "—"


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


def test_every_table_says_what_was_measured(built):
    md = built[1].read_text()
    for title in ("Peak valid throughput per series", "CPU vs GPU at equal request batch size",
                  "Invalid and failed cells"):
        caption = md.split(f"## {title}\n\n", 1)[1].split("\n", 1)[0]
        assert "embedded server on cpu (Intel(R) Xeon(R) Platinum 8375C" in caption
        assert "TF Serving container on gpu (NVIDIA H100 80GB HBM3; image=tensorflow/serving" in caption
        assert "latency (batch_timeout_micros=2000" in caption


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
    assert page.count('src="data:image/png;base64,') == 3  # throughput, latency, batch sizes


def test_report_without_valid_cells_or_batch_metrics(tmp_path):
    """A run where nothing is valid and the server exposed no batch sizes still reports it all."""
    from dataclasses import replace

    from loadtest.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    for cell in read_results(FIXTURES / "cpu-run" / "results.jsonl")[:3]:
        append_result(path, replace(cell, valid=False, server_batch_sizes={}, server_batch_size_mean=None,
                                    flags=[ValidityFlag("unstable", "windows differ by 18%")]))
    html_path, md_path = report.run([path])
    page = html_path.read_text()
    assert page.count('src="data:image/png;base64,') == 2
    assert "No server-side batch sizes were recorded" in page
    rows = table(md_path.read_text(), "Peak valid throughput per series")
    assert rows[0][2] == "no valid cell"
    assert len(table(md_path.read_text(), "Invalid and failed cells")) == 3


def test_report_of_a_run_whose_every_cell_failed(tmp_path):
    """An interrupted first cell leaves only zeros to plot; the report still lists it."""
    from dataclasses import replace

    from loadtest.records import ValidityFlag, append_result, read_results

    path = tmp_path / "run" / "results.jsonl"
    cell = read_results(FIXTURES / "cpu-run" / "results.jsonl")[0]
    append_result(path, replace(cell, status="failed", failure_reason="interrupted (Ctrl-C)", valid=False,
                                throughput_rps=0.0, throughput_ips=0.0, latency_p50_ms=None,
                                latency_p99_ms=None, flags=[ValidityFlag("failed", "interrupted (Ctrl-C)")]))
    html_path, md_path = report.run([path])
    assert html_path.read_text().count('src="data:image/png;base64,') >= 2
    rows = table(md_path.read_text(), "Invalid and failed cells")
    assert len(rows) == 1 and "interrupted (Ctrl-C)" in " ".join(rows[0])
