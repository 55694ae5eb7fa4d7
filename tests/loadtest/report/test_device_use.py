"""Device use in the report: server CPU % and GPU util % beside throughput, and the note at a
configuration's peak when its device was far from busy."""

from __future__ import annotations

from dataclasses import replace

from loadtest.evidence.cell_parts import TelemetryNote
from loadtest.evidence.records import append_result, read_results
from loadtest.report import device_use
from loadtest.report import page as report
from loadtest.report.answers.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import figures_of
from tests.loadtest.report import handmade
from tests.loadtest.report.test_report import md_answer_rows, table
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

CPU, GPU = handmade.server("cpu-off", "off"), handmade.server("gpu-off", "off", device="gpu")


def measured(label, rate: float, cpu: float | None, gpu: float | None = None, **more):
    return replace(handmade.cell(label, rate=rate, index=int(rate)), server_cpu_percent=cpu,
                   gpu_utilization_percent=gpu, **more)


def test_busy_text_names_the_gpu_first():
    assert device_use.busy_text(85.4, None) == "CPU 85%"
    assert device_use.busy_text(12.0, 40.0) == "GPU 40%, CPU 12%"
    assert device_use.busy_text(None, None) == "—"


def test_the_note_only_where_the_device_was_far_from_busy():
    note = device_use.idle_note(measured(CPU, 100.0, 35.2))
    assert note == ("the device was 35% busy at peak: the bottleneck is elsewhere (client, network, or the "
                    "server's request path)")
    assert device_use.idle_note(measured(CPU, 100.0, 60.0)) == ""  # busy enough
    assert device_use.idle_note(measured(GPU, 100.0, 95.0, 30.0)).startswith("the device was 30% busy")
    assert device_use.idle_note(measured(GPU, 100.0, 5.0, 80.0)) == ""  # the GPU is the device, not the CPU
    assert device_use.idle_note(measured(GPU, 100.0, 5.0, None)) == ""  # not measured: no claim


def test_the_peak_is_each_configurations_highest_valid_throughput():
    cells = [measured(CPU, 100.0, 30.0), measured(CPU, 400.0, 90.0),
             replace(measured(CPU, 800.0, 99.0), valid=False), measured(GPU, 300.0, 10.0, 45.0)]
    figures = figures_of(cells, answer(cells), config_labels(config_of(c) for c in cells))
    assert sorted(f.peak.requests_per_s for f in figures.values() if f.peak) == [297.0, 396.0]


def test_report_shows_device_use_beside_throughput(tmp_path):
    path = tmp_path / "run" / "results.jsonl"
    cells = [measured(CPU, 100.0, 20.0), measured(CPU, 400.0, 41.6, server_cpu_percent_max=70.0,
                                                   server_cpu_cores=1.0, server_rss_mib=812.4,
                                                   telemetry_note=TelemetryNote(
                                                       gpu="not sampled: the server's device is cpu")),
             measured(GPU, 300.0, 12.0, 85.0, gpu_utilization_percent_max=97.0, gpu_memory_mib=1536.0,
                      gpu_power_w=180.4)]
    old = read_results(FIXTURES / "cpu-run" / "results.jsonl")[0]  # a record from before telemetry
    for cell in [*cells, replace(old, server=replace(old.server, name="old"))]:
        append_result(path, cell)
    md = report.run([path])[1].read_text()
    peaks = table(md, "Peak throughput")  # the one peak table: device use at each series' highest
    use = {r[0]: r[:15] for r in peaks}  # its first 15 columns: the old device-use table's
    assert use["cpu-off"][1:5] == ["1", "cpu", "396.0", "396.0"]
    assert use["cpu-off"][6:15] == ["42", "70", "1.0", "812", "—", "—", "—", "—",
                                    "the device was 42% busy at peak: the bottleneck is elsewhere (client, network, "
                                    "or the server's request path)"]
    assert use["gpu-off"][6:15] == ["12", "—", "—", "—", "85", "97", "1,536", "180", ""]  # 85% busy: no note
    assert use["old"][6] == "—" and use["old"][14] == "not measured: no device telemetry in this record"
    assert {(r[3], r[6], r[10]) for r in peaks} >= {("396.0", "42", "—"), ("297.0", "12", "85")}
    html = report.run([path])[0].read_text()
    every_html = html.split("<h2>Every cell</h2>", 1)[1]
    assert "<th>server CPU %</th>" in every_html and "<th>GPU util %</th>" in every_html
    assert "<td>42</td>" in every_html and "<td>85</td>" in every_html
    assert md_answer_rows(md)[0][5] == "CPU 42%"  # the lower bound's cell (400 req/s passes p99 ≤ 50 ms)
