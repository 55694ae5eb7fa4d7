"""The one glossary (`loadtest.report.answers.terms`): a report's card Terms and its Terms table give each term in
the same words, each term is defined once per report, and the meanings state the constants they name."""

from __future__ import annotations

import re
from functools import cache

from loadtest.judge.tool_ceiling import CHECK_RATIO
from loadtest.report import page
from loadtest.report.answers.bound import SERVED_SHARE
from loadtest.report.answers.terms import CARD_LABELS, GLOSSARY
from loadtest.report.glossary import glossary_markdown
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES


@cache
def report_md(run: str) -> str:
    report = page.read_report([FIXTURES / run / "results.jsonl"], target_rps=2000.0, prices=FIXTURES / "prices.toml")
    return page.render_markdown(report, "report.html")


def test_the_cards_terms_and_the_terms_table_say_each_term_in_the_same_words():
    for run in ("h200-paired", "capacity-run"):
        md = report_md(run)
        table = dict(re.findall(r"^\| (.+?) \| (.+) \|$", md[md.index("## Terms"):], re.M))
        card = [line.removeprefix("- ") for line in md.splitlines() if line.startswith("- ")
                and line.removeprefix("- ").split(": ", 1)[0] in CARD_LABELS]
        assert len(card) >= 10, run
        for line in card:
            label, said = line.split(": ", 1)
            assert said == GLOSSARY[CARD_LABELS[label]] + ".", (run, label)
            assert table[CARD_LABELS[label]] == GLOSSARY[CARD_LABELS[label]], (run, label)


def test_each_term_is_defined_once_per_report_in_one_wording():
    md = report_md("h200-paired")
    for term in ("tool ceiling", "upper end", "bounded by"):
        wordings = {m.strip() for m in re.findall(rf"(?:^- |^\| ){re.escape(term)}(?::| \|) ([^|\n]+)", md, re.M)}
        assert {w.removesuffix(".") for w in wordings} == {GLOSSARY[term]}, term


def test_the_meanings_state_the_constants_they_name():
    check, half = f"{CHECK_RATIO:g}×", f"{SERVED_SHARE:.0%}"
    assert f"({check} the answer)" in GLOSSARY["tool ceiling"] and f"under {check}" in GLOSSARY["bounded by"]
    assert f"under {half}" in GLOSSARY["served ÷ device alone"] and half in GLOSSARY["bounded by"]
    assert "| tool ceiling | " + GLOSSARY["tool ceiling"] + " |" in glossary_markdown()
