"""#40's remaining asks: the CPU named as the machine reports it, offered req/s against images/s served explained,
one peak table, the demo's decision printed once, and terms plain or linked to the glossary."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

from loadtest.evidence.cell_parts import ServerResources
from loadtest.report import page as report
from loadtest.report.blocks import OFFERED_VS_SERVED, OFFERED_VS_SERVED_REF, cpu_count_words, machine_words
from loadtest.report.card.card import card_for
from loadtest.report.card.decision import spelled
from loadtest.report.configs import config_labels, config_of
from loadtest.report.glossary import TERMS, anchor
from loadtest.report.sections.details import configurations_table
from loadtest.report.sections.noise_table import noise_table
from tests.loadtest.report.handmade import rates, server
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES
from tests.support.paths import REPO

VM = {"cpu_model": "Test CPU", "cpu_count": 16, "cpu_physical_cores": 16, "cpu_virtualization": "kvm"}
LOCAL = ServerResources(1.0, "Test CPU", 0, "", "pinned cores 0")
INTERNAL = ("ABBA", "reference cell", "oversleep", "overslept", "host allows", "est. p99")


def on_machine(cells, facts=VM, resources=LOCAL):
    return [replace(c, provenance=replace(c.provenance, **facts), server_resources=resources) for c in cells]


def test_the_cpu_is_named_with_its_vcpus_and_as_a_vm():
    cells = on_machine(rates(server("cpu-off", "off"), 400.0, "s1"))
    labels = config_labels(config_of(c) for c in cells)
    config = config_of(cells[0])
    assert spelled(config, labels) == "cpu-off (the CPU, Test CPU, 16 vCPUs (VM), batching off)"
    card = card_for(cells)
    assert card is not None and " on Test, 16 vCPUs (VM): " in card.title
    assert configurations_table(cells, labels).rows[0][3] == "Test CPU, 16 vCPUs (VM)"
    assert cpu_count_words(32, 16, "none") == "16 cores, 32 threads" and cpu_count_words(8, None, "unknown") == "8 CPUs"


def test_old_records_and_servers_elsewhere_say_less():
    old = rates(server("cpu-off", "off"), 400.0, "s1")  # no machine facts recorded
    elsewhere = on_machine(old, resources=replace(LOCAL, source="unknown"))  # a server given by address
    gpu = on_machine(rates(server("gpu-off", "off", device="gpu"), 400.0, "s2"))
    assert machine_words(old[0]) == machine_words(elsewhere[0]) == machine_words(gpu[0]) == ""
    labels = config_labels(config_of(c) for c in old)
    assert spelled(config_of(old[0]), labels) == "cpu-off (the CPU, Test CPU, batching off)"


def test_offered_and_served_are_explained_where_both_appear(tmp_path):
    shutil.copytree(FIXTURES / "capacity-run", tmp_path / "run")
    html, md_path, *_ = report.run([tmp_path / "run" / "results.jsonl"], target_rps=5000,
                                   prices=FIXTURES / "prices.toml")
    md = md_path.read_text()
    answer_table = md.split("\n\n| device |", 1)[1].split("\n\n", 1)  # the first table below the card's
    assert "images/s served" in answer_table[0].splitlines()[0]
    # the definition printed once, in Terms; each table where both appear points there
    assert OFFERED_VS_SERVED_REF in answer_table[1].split("\n\n", 1)[0]
    assert "## Capacity searches" in md and OFFERED_VS_SERVED_REF in md.split("## Capacity searches", 1)[1]
    assert md.count(OFFERED_VS_SERVED) == 1 and md.index(OFFERED_VS_SERVED) > md.index("## Terms")
    assert dict(TERMS)["offered req/s, images/s served"] == OFFERED_VS_SERVED


def h200_report(tmp_path):
    shutil.copytree(FIXTURES / "h200-paired", tmp_path / "h200")
    html, md, *_ = report.run([tmp_path / "h200" / "results.jsonl"], target_rps=5000, prices=FIXTURES / "prices.toml")
    return html.read_text(), md.read_text()


def test_one_peak_table_and_terms_plain_or_linked(tmp_path):
    page, md = h200_report(tmp_path)
    titles = re.findall(r"^## (.+)$", md, flags=re.M)
    assert [t for t in titles if "peak" in t.lower()] == ["Peak throughput"]  # not three
    # the card, the findings and the first table: no internal word, and every term header linked to a glossary row
    findings = md.split("## Findings\n", 1)[1].split("\n|", 1)[0]
    said = [*md.split("## Terms of the card", 1)[0].splitlines(), *findings.splitlines()]
    assert len([line for line in said if line]) > 8
    first_header = md.split("\n\n|", 1)[1].splitlines()[0]
    for word in INTERNAL:
        assert not any(word in line for line in said) and word not in first_header, word
    answer_box = page.split('<section class="answer"', 1)[1].split("</section>", 1)[0]
    links = set(re.findall(r'<a href="#(term-[a-z0-9-]+)">', answer_box))
    assert {anchor("tool ceiling"), anchor("bounded by"), anchor("est. p99"), anchor("upper end"),
            anchor("device busy"), anchor("offered req/s, images/s served")} <= links
    assert all(f'id="{link}"' in page for link in links) and 'id="terms"' in page
    assert "what each term means: [its Terms](report.html#terms)" in md


def test_the_noise_tables_terms_are_in_the_glossary():
    cells = rates(server("cpu-off", "off"), 400.0, "s1")
    header = noise_table(cells, config_labels(config_of(c) for c in cells), (10.0,)).header
    glossary = " ".join(term for term, _ in TERMS)
    for term in ("host oversleep", "host stalls > objective per s", "host allows p99 ≥", "client over", "server over",
                 "host over", "whose"):
        assert term in glossary and any(h.startswith(term) for h in header), term


def test_make_demo_prints_the_decision_once():
    """One command: the capacity run builds the report itself, priced, and its console end is the only one that
    prints the decision (a second `report` step printed it again)."""
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("\ndemo: setup\n", 1)[1].split("\n\n", 1)[0]
    commands = [line for line in recipe.splitlines() if "$(CLI)" in line]
    assert len(commands) == 1 and " capacity " in commands[0]
    assert "--no-report" not in commands[0] and "--target-rps $(DEMO_TARGET_RPS)" in commands[0]
