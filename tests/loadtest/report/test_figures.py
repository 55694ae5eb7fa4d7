"""One number per quantity: the server's mean latency, the device floor and the peak of each configuration read
the same in the report, the `report` command's console, figures.csv and the device bundle's device-run.json."""

from __future__ import annotations

import csv
import json
import re
import shutil

from loadtest.bundle import run_outputs as outputs
from loadtest.evidence.records import read_results
from loadtest.report.answers.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import HEADER, figures_of
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

H100_RUNS = ("h100-run-b", "h100-run-b-cpu")  # the second H100 run: its GPU half, then its CPU half


def h100_report(tmp_path):
    """`mnist-bench report` over both halves of the H100 run, as a user runs it: its console and its files."""
    paths = []
    for run in H100_RUNS:
        shutil.copytree(FIXTURES / run, tmp_path / run)
        paths.append(tmp_path / run / "results.jsonl")
    done = invoke("report", *paths, "--target-rps", 2000)
    assert done.exit_code == 0, done.stderr
    return done.stdout, tmp_path / H100_RUNS[0]


def md_table(md: str, title: str) -> list[dict[str, str]]:
    """A Markdown table of the report, by its title, as one dict per row."""
    lines = md[md.index(f"## {title}"):].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = lines[first:end]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in r.strip("|").split("|")))) for r in rows[2:]]


def console_table(stdout: str) -> list[dict[str, str]]:
    """The figures table the console prints, split on its column starts."""
    lines = stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith(HEADER[0] + "  "))
    starts: list[int] = []
    for name in HEADER:  # each column's start, searched after the one before ("at" is also in "batch")
        starts.append(lines[head].index(name, starts[-1] + 1 if starts else 0))
    rows = []
    for line in lines[head + 1:]:
        if not line.strip() or line.startswith(("report:", "summary:")):
            break
        bounds = zip(starts, [*starts[1:], None])
        rows.append({name: line[a:b].strip() for name, (a, b) in zip(HEADER, bounds)})
    return rows


def keyed(rows: list[dict[str, str]], batch_column: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["configuration"], r[batch_column]): r for r in rows}


def number(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def test_the_server_mean_the_floor_and_the_peak_are_one_number_everywhere(tmp_path):
    stdout, out = h100_report(tmp_path)
    md = (out / "report.md").read_text()
    record = outputs.figures_record(out / "figures.json")  # what device-run.json keeps
    times = keyed(md_table(md, "Where each request's time went, and the device alone"), "request batch")
    console = keyed(console_table(stdout), "request batch")
    with (out / "figures.csv").open() as f:
        table = keyed(list(csv.DictReader(f)), "request batch")
    use = keyed([r for r in md_table(md, "Peak throughput") if r["configuration's peak"] == "yes"], "request batch")
    figures = [(label, batch, f) for label, batches in record["by_configuration"].items()
               for batch, f in batches.items()]
    # 8 configurations and batches were measured; cpu-cpu at request batch 32 had no valid cell, so no figures
    assert len(figures) == 7 and set(times) == set(console) == set(table) == {(a, b) for a, b, _ in figures}
    for label, batch, f in figures:
        mean = number(f["server_mean_ms"], 3)
        assert times[(label, batch)]["server mean ms"] == console[(label, batch)]["server mean ms"] == mean
        assert float(table[(label, batch)]["server mean ms"]) == f["server_mean_ms"]  # the CSV's numbers are plain
        floor = f["device_floor"]
        floor_ips = number(floor and floor["images_per_s"], 1)
        assert times[(label, batch)]["device alone images/s"] == f"{floor_ips} (batch {floor['batch']})"
        assert console[(label, batch)]["device alone images/s"] == floor_ips
        assert float(table[(label, batch)]["device alone images/s"]) == floor["images_per_s"]
        assert console[(label, batch)]["device alone at batch"] == str(floor["batch"])
        peak = number(f["peak"]["images_per_s"], 1)
        assert console[(label, batch)]["peak images/s"] == use[(label, batch)]["peak images/s"] == peak
        assert float(table[(label, batch)]["peak images/s"]) == f["peak"]["images_per_s"]
        assert use[(label, batch)]["peak load"] == f["peak"]["load"] == console[(label, batch)]["peak load"]
    for row in table.values():  # the CSV, read alone, says what was measured
        assert row["server"].startswith("embedded server (") and row["device"] in ("cpu", "gpu")
        assert row["device name"] in ("NVIDIA H100 80GB HBM3", "Intel(R) Xeon(R) Processor")
    for label, batch, f in figures:  # figures.json (so device-run.json) says the same
        written = table[(label, batch)]
        assert (f["server"], f["device_name"]) == (written["server"], written["device name"])
    # the H100 findings the issue named: gpu-gpu's server mean at request batch 1, its floor at the batch it ran
    gpu = record["by_configuration"]["gpu-gpu"]
    assert gpu["1"]["server_mean_ms"] == 3.352 and gpu["32"]["device_floor"]["batch"] == 128


def test_the_headlines_floor_and_served_figures_are_the_tables(tmp_path):
    stdout, out = h100_report(tmp_path)
    md = (out / "report.md").read_text()
    record = outputs.figures_record(out / "figures.json")
    floors = {number(f["device_floor"]["images_per_s"], 1) + f" images/s at batch {f['device_floor']['batch']}"
              for batches in record["by_configuration"].values() for f in batches.values() if f["device_floor"]}
    said = re.findall(r"alone runs the model at ([\d,.]+ images/s at batch \d+)", md)
    assert said and set(said) <= floors
    assert record["decision"][0].startswith("# NOT FOR BUYING — the embedded stand-in (JAX) on ")
    assert stdout.startswith("\n".join(record["decision"]))  # the console opens with the same card


def test_the_cpu_gpu_table_compares_the_peaks_it_names(tmp_path):
    _, out = h100_report(tmp_path)
    md = (out / "report.md").read_text()
    record = json.loads((out / "figures.json").read_text())
    peaks = {f["peak"]["images_per_s"] for f in record["figures"] if f["peak"]}
    rows = [r for r in md_table(md, "Peak throughput") if r["configuration's peak"] == "yes"]
    at = {(r["configuration"], r["request batch"]): r for r in rows}
    assert at[("gpu-gpu", "32")]["GPU/CPU peaks"] == "—"  # cpu-cpu at batch 32 had no valid cell
    compared = [r for r in rows if r["GPU/CPU peaks"] != "—"]
    assert compared
    for row in compared:
        gpu_label, cpu_label = re.fullmatch(r"×[\d.]+ \((\S+) ÷ (\S+)\)", row["GPU/CPU peaks"]).groups()
        cpu, gpu = (float(at[(label, row["request batch"])]["peak images/s"].replace(",", ""))
                    for label in (cpu_label, gpu_label))
        assert cpu in peaks and gpu in peaks
        assert row["GPU/CPU peaks"] == f"×{gpu / cpu:.2f} ({gpu_label} ÷ {cpu_label})"


def test_figures_are_never_overwritten(tmp_path):
    _, out = h100_report(tmp_path)
    again = invoke("report", out / "results.jsonl")
    assert again.exit_code == 0
    assert (out / "figures.json").is_file() and (out / "figures-2.json").is_file() and (out / "figures-2.csv").is_file()


def test_a_paired_comparisons_reference_cells_are_no_configurations_figures():
    """The reference cell (the first server, one request at a time, request batch 1) measures the machine: with
    gpu-off's own searches left out, gpu-off at request batch 1 has no figures (the demo, compared at batch 16,
    had printed a `cpu-off 1 peak` row from its reference cells alone)."""
    cells = read_results(FIXTURES / "h200-paired" / "results.jsonl")
    kept = [c for c in cells if c.server.name != "gpu-off" or (c.search and c.search.role) == "reference"]
    assert any(c.server.name == "gpu-off" for c in kept)
    labels = config_labels(config_of(c) for c in kept)
    figures = figures_of(kept, answer(kept), labels)
    assert sorted(labels[config] for config, _ in figures) == ["cpu-cpu", "cpu-off", "gpu-gpu"]


def test_each_answer_stands_on_the_cell_its_verdict_reads():
    """Where one search answers a configuration at a request batch, the tables' served share is the card's: both at
    the cell the verdict reads (its confirmation's, else its highest pass's), never the peak beside an unconfirmed
    pass (#68: the card read 19% at the highest pass, the time table and figures.json 28.5% at the peak)."""
    from loadtest.report.answers.answers import typical
    from loadtest.report.answers.verdict import answer_cell, what_bounded

    checked = {"confirmed": 0, "passed": 0}
    runs = {p.name: read_results(p / "results.jsonl") for p in sorted(FIXTURES.iterdir())
            if (p / "results.jsonl").exists()}
    runs["demo-run, unconfirmed"] = [c for c in runs["demo-run"] if not (c.search and c.search.role == "confirm")]
    for run, cells in runs.items():
        answers = answer(cells)
        figures = figures_of(cells, answers, config_labels(config_of(c) for c in cells))
        searches = [s for s in typical(answers.searches) if s.conclusion and s.conclusion.answer]
        for s in searches:
            if [t.config for t in searches if t.request_batch_size == s.request_batch_size].count(s.config) > 1:
                continue  # several objectives: figures read the highest confirmed of them
            f = figures[(s.config, s.request_batch_size)]
            assert f.cell is answer_cell(s), (run, s.search_id)
            served = what_bounded(s).served
            assert (f.served.share if f.served else None) == (served.share if served else None), (run, s.search_id)
            checked["confirmed" if s.met else "passed"] += 1
            assert f.at.startswith("capacity" if s.met else "a pass at"), (run, f.at)
    assert checked["confirmed"] > 0 and checked["passed"] > 0, checked
