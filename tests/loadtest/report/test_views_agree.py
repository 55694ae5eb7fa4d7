"""Generated runs (Hypothesis): the card, `size` and the figures give each row one value of each fact (#68 item 3).

A run is one to three configurations on distinct devices, each with one capacity search of a kind drawn at random
(confirmed; a pass above its confirmed rate, never confirmed; a lower bound at the load generator's limit; stopped
before any rate failed; unmet), its twin passed at 2×, passed under 2×, could not start, or was not run; a device floor
that puts its share of the device alone under, near or far over 50%; the embedded stand-in or a TF Serving container;
searched once, or twice (a comparison's repeats, ×0.8 or ×1.25); and, for a single configuration, a paired
comparison whose reference cells moved the machine's speed 0-100%. For each device the card answers, `size`'s option
of the same configuration must read the card's capacity, verdict, boxes and USD/h, "≤" where the card says not for
buying; the findings (the report's and `capacity`'s) its "bounded by"; and the figures (figures.csv/json, the time
table) its served share.

A comparison is two or three configurations at one objective (batching on and off on a device, GPU and CPU, or all
three), capacities within ×4 of one another, searched once or twice, paired or not. Each ratio (a batching gain,
GPU/CPU) must read one value and range on the card's comparison line, in figures.json's records (a paired one's figures
being the value it prints), in the findings (the report's, and `capacity`'s paired lines), the answer table and the
console, which prints the card's line; "tie" / "no measurable difference" exactly where the printed range holds ×1.0,
paired or not. A paired run's drift (the machine's speed moved 0-100% over its
comparison, less within its second repeat) is one figure wherever printed: each row's verdict on the card and in
figures.json, its finding (the verdict and the sentence after it), the paired ratio's sentence, the console, the
comparisons table where a ratio has one repeat; and it is what the reference cells moved.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import answer
from loadtest.report.answers.paired import paired_lines
from loadtest.report.card.card import card_for
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import figures_of
from loadtest.report.headline import bound_lines, console_end, summarise
from loadtest.report.sizing.instances import Pricing
from loadtest.report.sizing.prices import load_prices
from loadtest.report.sizing.size import SizingGoal, size
from tests.loadtest.report.answers.test_bound import floor, paired
from tests.loadtest.report.handmade import search, server, twin
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

PRICES = load_prices(FIXTURES / "prices.toml")
RATE, OBJECTIVE_MS = 5000.0, 10.0
CONFIGS = {"cpu": ("cpu-off", "off", "cpu"), "gpu": ("gpu-gpu", "gpu", "gpu"),  # key: (name, profile, device)
           "cpu-batching": ("cpu-cpu", "cpu", "cpu"), "gpu-off": ("gpu-off", "off", "gpu")}
LATE = ("saturated", "2% of sends left late")


def steps(kind: str, c: float) -> list[tuple]:
    """A search's (role, offered req/s, p99 ms[, flag]) steps answering about `c` req/s in the way `kind` names."""
    return {
        "confirmed": [("bracket", c, 8.0), ("bracket", c * 2, 12.0), ("bisect", c * 1.5, 12.0), ("confirm", c, 9.0)],
        "unconfirmed": [("bracket", c / 2, 8.0), ("confirm", c / 2, 9.0), ("bracket", c, 8.0),
                        ("bracket", c * 2, 12.0)],
        "loadgen": [("bracket", c, 8.0), ("bracket", c * 2, 12.0, *LATE), ("confirm", c, 9.0)],
        "stopped": [("bracket", c, 8.0), ("confirm", c, 9.0)],
        "unmet": [("bracket", c, 12.0), ("bracket", c / 2, 12.0)],
    }[kind]


def searched(label, search_id: str, c: float, kind: str, share: float | None, twin_kind) -> list:
    """One search of `label` (see `run_of`) with its device floor and its twin."""
    fields = {} if share is None else {"device_floor": floor((1, c / share)), "server_cpu_percent": 85.0}
    own = [replace(x, **fields) for x in search(label, search_id, steps(kind, c))]
    if twin_kind == "failed":
        own.append(twin(label, search_id, 2 * c, failed="could not start"))
    elif twin_kind is not None:
        own.append(twin(label, search_id, twin_kind * c))
    return own


def run_of(configs: list[tuple], moved: float | None = None) -> list:
    """The cells of one run: per (configuration, capacity, kind, share, twin[, container, repeat]) a search of
    `CONFIGS[configuration]`, its device floor (`share`: served ÷ the device alone at its answer; None: no floor) and
    its twin (× the capacity, "failed", or None); a TF Serving container's where `container`; searched again at
    `repeat` × the capacity where given (a comparison's repeats); `moved`: paired, all of it one comparison over
    which the machine's speed moved that much: its reference cells read 500 req/s and (1 + moved) × that before the
    first repeat, half of that movement and all of it before the second (which itself moved less)."""
    first, again = [], []
    for n, (key, c, kind, share, twin_kind, *more) in enumerate(configs):
        container, repeat = (more + [False, None])[:2]
        name, profile, device = CONFIGS[key]
        label = server(name, profile, device)
        label = replace(label, kind="tfserving-container", name=f"tfs-{key}") if container else label
        first.append(searched(label, f"s{n}", c, kind, share, twin_kind))
        again.append([] if repeat is None else searched(label, f"s{n}-again", round(c * repeat, 1), kind, share,
                                                        twin_kind))
    if moved is None:
        cells = [x for own, more in zip(first, again) for x in own + more]
    else:
        base = first[0][0].server
        cells = paired(sum(first, []), (500.0, 500.0 * (1 + moved)), base)
        if any(again):
            speeds = (500.0 * (1 + moved / 2), 500.0 * (1 + moved))
            cells += [with_repeat(x, 2) for x in paired(sum(again, []), speeds, base)]
    return [replace(x, cell_index=i) for i, x in enumerate(cells)]


def with_repeat(cell, repeat: int):
    """`cell` in its comparison's repeat `repeat` (a twin, in none, as it is)."""
    tag = cell.search.comparison if cell.search else None
    return cell if tag is None else replace(cell, search=replace(cell.search, comparison=replace(tag, repeat=repeat)))


@st.composite
def runs(draw) -> list:
    devices = draw(st.sampled_from([("cpu",), ("gpu",), ("cpu", "gpu")]))
    configs = [(device, draw(st.floats(50.0, 3000.0).map(lambda x: round(x, 1))),
                draw(st.sampled_from(["confirmed", "unconfirmed", "loadgen", "stopped", "unmet"])),
                draw(st.sampled_from([None, 0.3, 0.55, 0.95])), draw(st.sampled_from([None, 2.0, 1.2, "failed"])),
                draw(st.booleans()), draw(st.sampled_from([None, 0.8, 1.25])))
               for device in devices]
    moved = draw(st.sampled_from([None, 0.0, 0.2, 0.6, 1.0])) if len(devices) == 1 else None
    return run_of(configs, moved)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
@example(run_of([("cpu", 1000.0, "confirmed", 0.95, 2.0)], moved=0.1))  # FOR BUYING: the device bounded it
@example(run_of([("cpu", 400.0, "confirmed", 0.55, 2.0)], moved=0.2))  # a share over 50% within the drift
def test_the_card_size_and_the_figures_read_one_value_of_each_fact(cells):
    card = card_for(cells, Pricing(RATE, 0.2, PRICES, {}), [Target(OBJECTIVE_MS, 1, RATE)])
    options = {a.config.device: a for a in size(cells, SizingGoal(OBJECTIVE_MS, RATE, "rps", 0.2), PRICES)}
    answers = answer(cells)
    labels = config_labels(config_of(c) for c in cells)
    figures = figures_of(cells, answers, labels)
    findings = bound_lines(cells, answers, labels, figures)
    for row in card.rows if card else ():
        option = options[row.device]
        if row.capacity_rps is None or not option.bounded:  # no search answered: size reads the cells alone
            continue
        assert option.bounded.startswith(row.verdict), (row.verdict, option.bounded)
        assert option.at_most == (not row.for_buying) or row.boxes is None, (row.verdict, option.at_most)
        if row.boxes is not None:
            assert option.capacity == row.capacity_rps
            assert (option.fewest, option.most) == row.boxes, (row.verdict, option.fewest, option.most, row.boxes)
            assert option.cost_per_hour == row.usd_per_hour
        # the findings (the report's, and what `capacity` prints): "cpu (Test CPU): bounded by WHAT (ASIDE). [DETAIL]"
        # where the card's cell reads "WHAT; ASIDE" (or "WHAT: ASIDE"), ASIDE the tool ceiling
        [line] = [f for f in findings if f.startswith(f"{row.device} (")]
        what, rest = line.split(": bounded by ", 1)[1].split(" (tool ceiling", 1)
        aside = "tool ceiling" + rest.split(").", 1)[0]
        assert row.bounded_by in (f"{what}; {aside}", f"{what}: {aside}"), (row.bounded_by, line)
        figure = figures[(option.config, 1)]
        if figure.at.startswith(("capacity", "a pass at")):  # the figures stand on the answer's cell
            assert (figure.served.share if figure.served else None) == row.served_share, (figure.at, row.verdict)


# ----------------------------------------------------------------------------- ratios and drift

VALUE = r"×\d+\.\d\d \(×\d+\.\d\d–×\d+\.\d\d\)|at (?:least|most) ×\d+\.\d\d"  # `formatting.ratio_value`, as printed
DRIFT = r"(\d+)% drift of|within the (\d+)% the machine's speed drifted|speed moved (\d+)% during"


@st.composite
def compared(draw, drift: bool = False) -> tuple[list, float | None]:
    """Two or three configurations at one objective (batching on and off on a device, GPU and CPU, or all three),
    their capacities within ×4 of one another (so that some ranges hold ×1.0), each searched as `runs` draws one,
    all once or all twice (the second a repeat); paired or not, the machine's speed moving 0-100% before each repeat.
    `drift`: always paired, one configuration or more, confirmed and their twins at 2× (no container) with floors
    near 50%, so that the verdicts weigh shares against the drift. `run_of`'s arguments (movement None: unpaired)."""
    keys = draw(st.sampled_from([*([("cpu",), ("gpu",)] if drift else []), ("cpu", "cpu-batching"), ("cpu", "gpu"),
                                 ("gpu-off", "gpu"), ("cpu", "cpu-batching", "gpu")]))
    kinds, shares, twins = ((["confirmed"] * 3 + ["unconfirmed"], [0.52, 0.55, 0.6, 0.8, 0.95], [2.0]) if drift
                            else (["confirmed", "unconfirmed", "loadgen", "stopped", "unmet"], [None, 0.3, 0.95],
                                  [2.0, None]))
    base, again = draw(st.floats(100.0, 1500.0)), draw(st.booleans())
    configs = [(key, round(base * draw(st.floats(0.5, 2.0)), 1), draw(st.sampled_from(kinds)),
                draw(st.sampled_from(shares)), draw(st.sampled_from(twins)), not drift and draw(st.booleans()),
                draw(st.sampled_from([0.8, 1.25])) if again else None) for key in keys]
    moved = round(draw(st.floats(0.0, 1.0)), 3) if drift or draw(st.booleans()) else None
    return configs, moved


def report_of(cells):
    """The report's summary (its card, findings and tables) and the console's end (`capacity`'s last lines)."""
    answers = answer(cells)
    labels = config_labels(config_of(c) for c in cells)
    pricing, targets = Pricing(RATE, 0.2, PRICES, {}), [Target(OBJECTIVE_MS, 1, RATE)]
    summary = summarise(cells, answers, labels, None, pricing, figures_of(cells, answers, labels), targets)
    return summary, console_end(cells, pricing, targets), answers, labels


def card_says(line: str) -> dict[str, tuple[str, bool]]:
    """The card's comparison line, `10 ms, 1 image: GPU/CPU tie ×1.20 (×0.80–×1.80); batching: CPU ×1.62 (...)
    unpaired.`: per ratio, its value and whether it says "tie"."""
    across, _, batching = line.partition("batching: ")
    out = {f"batching gain on {m[1].lower()}": (m[3], bool(m[2]))
           for m in re.finditer(rf"(CPU|GPU) (tie )?({VALUE})", batching)}
    if m := re.search(rf"GPU/CPU (tie )?({VALUE})", across):
        out["GPU/CPU"] = (m[2], bool(m[1]))
    return out


def findings_say(lines) -> dict[str, tuple[str, bool | None]]:
    """The findings' ratio lines: a paired comparison's (`PairedRatio.describe`, "no measurable difference, " where
    its range holds ×1.0; "—" where it has no ratio), an unpaired gain's and GPU/CPU's (", no measurable difference"
    after their objective where it does)."""
    out: dict[str, tuple[str, bool | None]] = {}
    for line in lines:
        if m := re.match(rf"([Bb]atching gain on \w+|GPU/CPU) at p99 ≤ [\d.]+ ms \(request batch \d+\), "
                         rf"(?:searched one after the other, not )?paired(?: over \d+ repeats)?: "
                         rf"(no measurable difference, )?({VALUE}|—)", line):
            out[m[1].replace("Batching", "batching")] = (m[3], bool(m[2]))
        elif m := re.match(rf"batching gain ({VALUE}) on (\w+) \(", line):
            out[f"batching gain on {m[2]}"] = (m[1], "no measurable difference" in line)
        elif m := re.match(rf"GPU/CPU ({VALUE}) at p99", line):
            out["GPU/CPU"] = (m[1], "no measurable difference" in line)
    return out


def table_says(summary) -> dict[str, tuple[str, bool | None]]:
    """The answer table's gain and GPU/CPU columns (`answer_table.device_table`): per ratio its value ("—" for none)."""
    table = summary.tables[0]
    gain, across = table.header.index("batching gain over off"), table.header.index("GPU/CPU")
    out: dict[str, tuple[str, bool | None]] = {}
    for row in table.rows:
        for what, text in ((f"batching gain on {row[0]}", row[gain]), ("GPU/CPU", row[across])):
            m = re.search(VALUE, text)
            out[what] = (m[0] if m else "—", True if "no measurable difference" in text else None)
    return out


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(compared())
@example(([("cpu", 1000.0, "confirmed", None, 2.0), ("cpu-batching", 1100.0, "confirmed", None, 2.0)], 0.3))  # a tie
@example(([("cpu", 1000.0, "confirmed", None, 2.0, False, 0.8), ("cpu-batching", 1100.0, "confirmed", None, 2.0, False,
           1.25)], 0.2))  # paired over two repeats: their median
@example(([("cpu", 400.0, "confirmed", None, 2.0, False, 0.8), ("gpu", 1200.0, "loadgen", None, 2.0, False, 1.25)],
          None))  # GPU/CPU bounded below only
def test_each_comparison_reads_one_ratio_on_the_card_in_the_findings_figures_json_and_the_console(drawn):
    cells = run_of(*drawn)
    summary, console, *_ = report_of(cells)
    card = summary.card
    assert card is not None and len(card.comparisons) <= 1  # one target: at most one comparison line
    assert set(card.comparisons) <= set(console), (card.comparisons, [x for x in console if x.startswith("10 ms")])
    records = {key.split(" at ", 1)[0]: r for key, r in card.as_dict()["ratios"].items()
               if not key.startswith("cheaper")}
    for r in records.values():  # figures.json's figures of a paired ratio are the value it prints
        if r["paired"]:
            printed = [float(x) for x in re.findall(r"×([\d.]+)", r["value"])]
            figures = [x for x in (r["ratio"], r["low"], r["high"]) if x is not None][-len(printed):]
            assert printed == [pytest.approx(x, abs=0.005) for x in figures], r
    views = {"card": card_says(card.comparisons[0]) if card.comparisons else {},
             "figures.json": {what: (r["value"], r["no_difference"]) for what, r in records.items()},
             "findings": findings_say(summary.headline), "console": findings_say(paired_lines(cells)),
             "answer table": table_says(summary)}
    assert views["card"].keys() == views["figures.json"].keys() <= views["findings"].keys(), views
    for what in set().union(*views.values()):
        said = {view: found[what] for view, found in views.items() if what in found}
        assert len({value for value, _ in said.values()}) == 1, (what, said)
        ends = re.findall(r"×(\d+\.\d\d)", next(iter(said.values()))[0])[1:]  # a two-sided range's, as printed
        holds = None if len(ends) < 2 or "1.00" in ends else float(ends[0]) < 1.0 < float(ends[1])
        for view, (_, tie) in said.items():  # "tie" / "no measurable difference" exactly where the range holds ×1.0
            assert tie is None or holds is None or tie == holds, (what, view, said)


def test_an_unpaired_ratio_holding_one_is_no_measurable_difference_in_the_findings_as_on_the_card():
    cells = run_of([("cpu", 1000.0, "confirmed", None, 2.0), ("cpu-batching", 1100.0, "confirmed", None, 2.0),
                    ("gpu", 1200.0, "confirmed", None, 2.0)])
    summary, *_ = report_of(cells)
    assert summary.card.comparisons == ("10 ms, 1 image: GPU/CPU tie ×1.09 (×0.73–×1.64); batching: CPU tie ×1.10 "
                                        "(×0.73–×1.65) (not paired).",)
    lines = [f for f in summary.headline if f.startswith(("batching gain ×", "GPU/CPU ×"))]
    assert len(lines) == 2 and all("no measurable difference" in line for line in lines), lines


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(compared(drift=True))
@example(([("cpu", 400.0, "confirmed", 0.55, 2.0)], 0.145))  # 14.5%: a rounding edge
@example(([("cpu", 400.0, "confirmed", 0.55, 2.0, False, 0.8)], 0.3))  # sized on the second repeat: the run's drift
@example(([("cpu", 400.0, "confirmed", 0.6, 2.0, False, 0.8), ("cpu-batching", 500.0, "confirmed", 0.52, 2.0, False,
           1.25)], 0.3))  # two repeats, both rows within the drift
def test_a_paired_runs_drift_is_one_figure_in_the_findings_on_the_card_and_in_figures_json(drawn):
    cells, moved = run_of(*drawn), drawn[1]
    summary, console, answers, labels = report_of(cells)
    findings = bound_lines(cells, answers, labels, figures_of(cells, answers, labels))
    card = summary.card
    saved = card.as_dict()  # figures.json's card
    for row, record in ((r, d) for r, d in zip(card.rows, saved["rows"]) if r.capacity_rps is not None):
        [line] = [f for f in findings if f.startswith(f"{row.device} (")]
        # a row's drift, where its verdict gives one: the card's, figures.json's, the finding's (verdict and detail)
        assert drifts(row.bounded_by) == drifts(record["bounded_by"]) == drifts(record["verdict"]) == drifts(line), \
            (row.bounded_by, line)
    # and the comparisons table's drift within each repeat where there is one repeat (its drift is the run's)
    table = next((t.rows for t in summary.tables if t.title == "Comparisons: each repeat's ratio"), ())
    alone = [f"speed moved {r[-1]} during" for r in table if [x[0] for x in table].count(r[0]) == 1]
    texts = [*card.lines(), json.dumps(saved, ensure_ascii=False), *findings, *summary.headline, *console,
             *paired_lines(cells), *alone]
    printed = {n: text for text in texts for n in drifts(text)}  # each figure printed, and a text that prints it
    assert len(printed) <= 1, printed  # one figure, however many places print it: what the reference cells moved
    assert all(abs(int(p) - moved * 100) <= 0.5 + 1e-9 for p in printed), (printed, moved)


def drifts(text: str) -> set[str]:
    """Every drift figure `text` prints: `DRIFT`'s `within the run's 14% drift of 50%`, and so on."""
    return {n for m in re.finditer(DRIFT, text) for n in m.groups() if n is not None}
