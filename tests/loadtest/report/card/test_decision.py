"""The card a report opens with (`loadtest.report.card.card`): for buying or not, per target and device, and why none
met where none did (`loadtest.report.card.decision.why_none_lines`)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from loadtest.evidence.records import read_results
from loadtest.judge.goals import Target
from loadtest.report import page as report
from loadtest.report.answers.answers import answer
from loadtest.report.card.capacity_table import capacity_row
from loadtest.report.card.card import card_for
from loadtest.report.card.decision import run_next, why_none_lines
from loadtest.report.configs import config_labels, config_of
from loadtest.report.sections.objective_table import objective_table
from loadtest.report.sizing.instances import Pricing, replicas_by_config
from loadtest.report.sizing.prices import DEFAULT_PRICES, load_prices
from tests.loadtest.report.handmade import rates, search, server, twin
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES


def h100_report(tmp_path, **kwargs) -> str:
    """The report rebuilt from both halves of the second H100 run (GPU, then CPU, on two machines)."""
    paths = []
    for run in ("h100-run-b", "h100-run-b-cpu"):
        shutil.copytree(FIXTURES / run, tmp_path / run)
        paths.append(tmp_path / run / "results.jsonl")
    return report.run(paths, **kwargs)[1].read_text()


def card_rows(md: str) -> list[list[str]]:
    """The card's table: the first Markdown table (after the title), cells stripped."""
    return [[c.strip() for c in ln.strip("|").split(" | ")] for ln in md.split("\n\n", 2)[1].splitlines()[2:]]


def pricing_for(results, rate: float = 5000.0) -> Pricing:
    return Pricing(rate, 0.2, load_prices(DEFAULT_PRICES), replicas_by_config(results))


def test_the_h100_card_says_no_setup_met_10_ms_and_why_below_it(tmp_path):
    md = h100_report(tmp_path, target_rps=5000, prices=DEFAULT_PRICES)
    assert md.splitlines()[0] == ("# NOT FOR BUYING — the embedded stand-in (JAX) on Intel Xeon and NVIDIA H100 80GB "
                                  "HBM3: no setup met any target's objective")
    rows = card_rows(md)
    assert [(r[0], r[1], r[3]) for r in rows] == [
        ("5,000 req/s · p99 ≤ 10 ms · 1 image", "CPU", "none"),  # no rate passed: not even a pass to give
        ("5,000 req/s · p99 ≤ 10 ms · 1 image", "GPU", "none"),
        ("5,000 req/s · p99 ≤ 10 ms · 32 images/request", "CPU", "none"),
        ("5,000 req/s · p99 ≤ 10 ms · 32 images/request", "GPU", "none")]
    first_screen = "\n".join(md.splitlines()[:25])
    assert "USD" not in first_screen and "replicas" not in first_screen
    # the run's own targets; its price list is the default one, which `make capacity` reads without PRICES
    assert ('Run next: `make capacity SERVE="cpu/cpu cpu/off gpu/gpu gpu/off" GOALS="5000:10:1 5000:10:32"` on TF '
            'Serving.') in md
    assert ('Run the stand-in again as measured: `make capacity SERVE="cpu/cpu cpu/off gpu/gpu gpu/off" '
            'GOALS="5000:10:1 5000:10:32" LOADTEST_ARGS=') in md
    why = [line for line in md.splitlines() if line.startswith("Why none confirmed")]
    assert why[0].startswith("Why none confirmed p99 ≤ 10 ms at request batch 1: on the CPU")
    assert "requests paused about 30 ms" in why[0] and "more servers would not meet it" in why[0]  # the CPU's stalls
    assert "requests paused about 16 ms" in why[0]  # the GPU's
    assert "every rate tried missed it (the lowest failing: 76.0 req/s)" in why[1]


def test_a_target_at_a_looser_objective_is_answered_from_the_same_cells_and_unconfirmed_rows_get_no_boxes(tmp_path):
    """At 25 ms no rate was confirmed on either device: both rows are unconfirmed (the capacity's own state, read from
    the one-figure rule, not recomputed), so neither carries boxes or prices, whatever it served of the device."""
    results = [*read_results(FIXTURES / "h100-run-b" / "results.jsonl"),
               *read_results(FIXTURES / "h100-run-b-cpu" / "results.jsonl")]
    card = card_for(results, pricing_for(results), [Target(25.0, 1, 5000.0)])
    assert card is not None and not card.for_buying
    assert card.title.endswith(": no answer was confirmed")
    cpu, gpu = card.table_rows()
    # no rate confirmed at 25 ms, but 107.5 req/s passed with nothing above it failing: the figure, with its state
    assert cpu[1:4] == ("CPU", "batching off", "none confirmed (≥ 107.5 passed: the load generator's limit)")
    shown = dict(zip(card.header(), cpu))
    assert shown["served ÷ device alone"] == "2%"
    # a "≥" is never bought; the H100 box's Locust at 10% of its core did not bound it by its CPU (issue #59)
    assert shown["bounded by"] == ("unconfirmed: a lower bound: the load generator's limit (its dispatch: sends late "
                                   "with Locust at 10% of a core, no host probe on its cores); tool ceiling not "
                                   "measured: no twin was run")
    assert dict(zip(card.header(), gpu))["bounded by"] == ("unconfirmed: passed, not confirmed; tool ceiling not "
                                                           "measured: no twin was run")
    assert gpu[1:3] == ("GPU", "batching off") and gpu[3] == "none confirmed (58.8 passed)"
    assert capacity_row(card.rows[1])[4] == "117.5"  # its upper end, in the table under the card
    assert not card.priced and all(r.usd_per_hour is None and r.boxes is None for r in card.rows)


def test_without_a_rate_the_card_is_not_for_buying_and_says_so():
    # the hand-made twin fixture: the GPU container's row is the production server's, the CPU's unmeasured alone
    results = read_results(FIXTURES / "capacity-run-twins" / "results.jsonl")
    card = card_for(results)
    assert card is not None and not card.for_buying and not card.priced
    assert card.title.endswith(": no target rate given (--target-rps)")
    assert card.table_rows()[0][0] == "p99 ≤ 10 ms · 1 image"


def test_the_cards_boxes_and_cost_are_the_sizing_arithmetic_on_the_capacitys_range(tmp_path):
    results = read_results(FIXTURES / "capacity-run" / "results.jsonl")
    card = card_for(results, pricing_for(results))
    # no twin measured a tool ceiling in these records, so every row is the tool's: not for buying; the CPU servers'
    # cores were not recorded: no instance can be said to hold one, so the CPU rows have no price
    assert card is not None and not card.for_buying and card.priced
    assert card.title.startswith("NOT FOR BUYING — TF Serving containers and the embedded stand-in")
    assert card.title.endswith(": tool ceiling not measured; example prices")
    assert any(note.startswith("5,000 req/s · p99 ≤ 10 ms · 8 images/request, CPU: not priced: the replica's cores "
                               "are unknown") for note in card.notes)
    gpu = next(r for r in card.rows if r.device == "gpu")
    # 5000 / (6250 x 0.8) = 1 replica, one per h100-1; the rate above (7000) needs as many; N + 1: 1 + 1 spare
    # h100-1 at 4.00 USD/h = 8.00 USD/h
    assert gpu.boxes == (1, 1) and gpu.spare == 1 and gpu.instance == "h100-1" and gpu.usd_per_hour == 8.0
    assert round(gpu.usd_per_m_requests or 0, 4) == round(8.0 / (5000 * 3600) * 1e6, 4)
    cells = dict(zip(card.header(), card.table_rows()[1]))
    # not for buying: the most a server at least this fast needs, marked "≤"
    assert cells["boxes"] == "≤ 1 + 1 spare × h100-1" and cells["USD/h"] == "≤ 8.00"
    assert cells["bounded by"] == "the tool: tool ceiling not measured: no twin was run"  # the ceiling said once
    assert cells["capacity req/s"] == "6,250.0 confirmed"
    assert capacity_row(card.rows[1])[4] == "7,000.0"  # 6,500 stayed inconclusive: no end
    cpu = next(r for r in card.rows if r.device == "cpu" and r.target.batch == 1)
    assert cpu.capacity_rps == 675.0 and cpu.failed_rps == 700.0 and not cpu.for_buying and cpu.boxes is None
    md = report.run([_copy(tmp_path, "capacity-run")], target_rps=5000, prices=DEFAULT_PRICES)[1].read_text()
    assert md.splitlines()[0] == f"# {card.title}"
    assert card_rows(md)[1][6] == "≤ 1 + 1 spare × h100-1"
    assert card_rows(md)[0][6:] == ["not priced", "—", "—"]
    # a price file of per-replica prices: 5000 / (675 x 0.8) = 9.26 -> 10 at the capacity, 8.9 -> 9 at 700 failed;
    # + 1 spare replica: (10 + 1) x 0.40 = 4.40 USD/h, 4.40 / 18 = 0.2444 per M requests
    per_replica = Pricing(5000.0, 0.2, load_prices(FIXTURES / "prices.toml"), replicas_by_config(results))
    priced = card_for(results, per_replica)
    assert priced is not None
    assert priced.table_rows()[0][6:] == ("≤ 10 + 1 spare replicas", "≤ 4.40", "≤ 0.244")
    # with a passing twin beside each search (the hand-made fixture), the GPU container's row is for buying, with its
    # range; the CPU stand-in's (no device floor) still not: device alone not measured, at most 10 + 1
    twins = read_results(FIXTURES / "capacity-run-twins" / "results.jsonl")
    bought = card_for(twins, Pricing(5000.0, 0.2, load_prices(FIXTURES / "prices.toml"), replicas_by_config(twins)))
    assert bought is not None and bought.for_buying and bought.title.startswith("FOR BUYING — ")
    cpu_row, gpu_row = bought.table_rows()
    assert gpu_row[5:] == ("the production server; tool ceiling ≥ 12,500.0 req/s (2× the answer)",
                           "1 + 1 spare replicas", "8.00", "0.444")
    assert cpu_row[5:] == ("device alone not measured; tool ceiling ≥ 1,350.0 req/s (2× the answer)",
                           "≤ 10 + 1 spare replicas", "≤ 4.40", "≤ 0.244")


def _copy(tmp_path, run: str):
    shutil.copytree(FIXTURES / run, tmp_path / run)
    return tmp_path / run / "results.jsonl"


def test_an_answer_the_serving_path_bounded_gets_at_most_boxes_and_what_to_run_next():
    """The demo's records with a passing twin beside each search: its tool ceiling clears 2× the answer, so what it
    served of the CPU alone (27%) names the stand-in's serving path; the row still answers what it can: "≤" boxes."""
    results = read_results(FIXTURES / "demo-run" / "results.jsonl")
    found = answer(results)
    results = [*results, *(twin(s.conclusion.capacity.result.server, s.search_id, 2 * (s.capacity_rps or 0.0),
                                index=1000 + i) for i, s in enumerate(found.searches) if s.met and s.conclusion
                           and s.conclusion.capacity)]
    card = card_for(results, pricing_for(results))
    assert card is not None and not card.for_buying
    assert card.title == ("NOT FOR BUYING — the embedded stand-in (TensorFlow) on AMD EPYC: the stand-in's serving "
                          "path, not the CPU, bounded every answer; example prices")
    [row] = card.table_rows()
    assert row[:6] == ("5,000 req/s · p99 ≤ 10 ms · 1 image", "CPU", "batching on (profile cpu)",
                       "1,005.1 confirmed", "9.55",
                       "the stand-in's serving path: served 27% of the device alone; tool ceiling ≥ 2,010.2 req/s (2× "
                       "the answer)")
    assert all(cell.startswith("≤ ") for cell in row[6:]), row
    # priced on the default list, which `make capacity` reads without PRICES: none printed
    assert card.run_next == '`make capacity SERVE="cpu/cpu cpu/off" GOALS="5000:10:1"` on TF Serving.'
    assert card.words_outside_table() <= 60 and len(card.header()) <= 9


def test_run_next_names_a_price_list_only_where_the_run_used_its_own():
    configs = [config_of(c) for c in read_results(FIXTURES / "demo-run" / "results.jsonl")][:1]
    targets = [Target(10.0, 1, 5000.0)]
    assert "PRICES" not in run_next(configs, targets, str(DEFAULT_PRICES))
    assert "PRICES" not in run_next(configs, targets, "")
    assert f"PRICES={FIXTURES / 'prices.toml'}" in run_next(configs, targets, str(FIXTURES / "prices.toml"))


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
        "docs/glossary.md is stale: run make glossary"
    assert "(docs/glossary.md)" in (REPO / "README.md").read_text()


def test_a_card_on_repeated_searches_gives_the_lower_repeat():
    on, off = server("cpu-cpu", "cpu"), server("cpu-off", "off")
    cells = rates(on, 539.4, "on-1") + rates(on, 464.1, "on-2") + rates(off, 391.8, "off-1") + rates(off, 392.1, "o2")
    card = card_for(cells)
    assert card is not None and card.rows[0].capacity_rps == 464.1
    # the objective table's rows of one configuration searched twice are labelled as its repeats
    table = objective_table(answer(cells), config_labels(config_of(c) for c in cells))
    assert table is not None
    assert [row[0] for row in table.rows[:4]] == ["cpu-cpu (repeat 1)", "cpu-cpu (repeat 2)", "cpu-off (repeat 1)",
                                                  "cpu-off (repeat 2)"]


def test_two_targets_at_one_batch_have_a_row_each_labelled_by_its_search_and_a_card_row_each():
    """Two searches of one configuration at request batch 1, at 10 ms and at 50 ms (two targets): the objective table
    says which is which (not repeats); each target's card row reads its own search."""
    on = server("cpu-cpu", "cpu")
    cells = rates(on, 300.0, "t10", objective=10.0) + rates(on, 420.0, "t50", objective=50.0)
    table = objective_table(answer(cells), config_labels(config_of(c) for c in cells))
    assert table is not None
    assert [row[0] for row in table.rows[:2]] == ["cpu-cpu (searched at 10 ms)", "cpu-cpu (searched at 50 ms)"]
    card = card_for(cells, None, [Target(10.0, 1), Target(50.0, 1)])
    assert card is not None and [r.capacity_rps for r in card.rows] == [300.0, 420.0]


def test_passes_below_a_failed_confirmation_are_a_why_not_a_capacity():
    """The earlier H100 run's cpu-off at 10 ms: passes at 901.2 to 1,295.5 req/s, then 1,295.5's confirmation failed:
    the card gives the highest pass as "none confirmed (… passed)", unpriced, as the objective table does, and the
    reason below it says why it was not confirmed."""
    off = server("cpu-off", "off")
    cells = search(off, "s1", [("probe", 2000.0, 5.0), ("bracket", 901.2, 6.0), ("bracket", 1126.5, 6.0),
                               ("bisect", 1239.2, 6.0), ("bracket", 1295.5, 6.0), ("confirm", 1295.5, 12.0)])
    result = answer(cells)
    labels = config_labels(config_of(c) for c in cells)
    [line] = why_none_lines(result, cells, labels)
    table = objective_table(result, labels)
    figure = "none confirmed (1,239.2 passed)"
    assert table is not None and any(cell == figure for row in table.rows for cell in row)
    assert "every rate tried missed it" not in line and "cannot meet it" not in line
    assert "cpu-off's highest pass, 1,239.2 req/s, passed, not confirmed: the search's own confirmation did not " \
           "hold" in line
    card = card_for(cells)
    assert card is not None and card.rows[0].capacity_rps == 1239.2
    assert card.rows[0].why_not == card.rows[0].verdict == "unconfirmed: passed, not confirmed"
    assert card.table_rows()[0][3] == figure and capacity_row(card.rows[0])[4] == "1,295.5"


def test_a_card_row_carries_one_upper_end_per_answer():
    on, off = server("cpu-cpu", "cpu"), server("cpu-off", "off")
    cells = rates(on, 500.0, "on") + rates(off, 400.0, "off")
    card = card_for(cells)
    assert card is not None
    # cpu-cpu's range ends at 550 (1.1 x 500, failed); no second upper end beside it
    assert card.table_rows()[0][2:4] == ("batching on (profile cpu)", "500.0 confirmed")
    assert capacity_row(card.rows[0])[3:5] == ("500.0 confirmed", "550.0")


def test_each_targets_cost_at_every_objective_is_the_cards_arithmetic_at_that_capacity():
    from loadtest.report.card.objective_costs import objective_curves

    results = read_results(FIXTURES / "capacity-run" / "results.jsonl")
    pricing = Pricing(5000.0, 0.2, load_prices(FIXTURES / "prices.toml"), replicas_by_config(results))
    card = card_for(results, pricing)
    assert card is not None
    curves = {c.label: dict(c.points) for c in objective_curves(answer(results), [Target(10.0, 1, 5000.0)], pricing,
                                                                 priced=True)}
    cpu, gpu = curves["5,000 req/s · 1 image, CPU"], curves["5,000 req/s · 1 image, GPU"]
    row = next(r for r in card.rows if r.device == "gpu" and r.target.batch == 1)
    assert gpu[10.0] == row.usd_per_hour == 8.0  # at the card's own objective, the card's figure: (1 + 1) x 4.00
    assert cpu[10.0] == next(r for r in card.rows if r.device == "cpu" and r.target.batch == 1).usd_per_hour
    assert sorted(cpu) == [10.0, 25.0, 50.0, 100.0] and cpu[10.0] >= cpu[100.0]  # none confirmed at 5 ms: unpriced
    unpriced = objective_curves(answer(results), [Target(10.0, 1, 5000.0)], pricing, priced=False)
    assert dict(unpriced[1].points)[10.0] == 6250.0  # not for buying: capacities, not prices


def test_the_box_range_counts_one_instance_type():
    """The demo on 11-27: 17 one-core replicas at the capacity (9 x general-2 at the example prices), 16 at the rate
    that failed, where one general-16 ties eight general-2: the range is 8-9 x general-2, never '1-9'; N + 1 adds one
    general-2: (9 + 1) x 0.085 = 0.85 USD/h beats (2 + 1) x general-16 at 0.68 = 2.04."""
    from loadtest.report.configs import config_of
    from loadtest.report.sizing.instances import Replica

    on = replace(server("cpu-cpu", "cpu"), kind="tfserving-container")  # the production server: for buying
    cells = search(on, "s1", [("bracket", 376.0, 30.0), ("bracket", 399.5, 80.0), ("confirm", 376.0, 40.0)],
                   objective=50.0, batch=16)
    cells.append(twin(on, "s1", 752.0, objective=50.0, batch=16))
    replica = Replica(1.0, "AMD EPYC", 0, "", "pinned cores 0")
    pricing = Pricing(5000.0, 0.2, load_prices(DEFAULT_PRICES), {config_of(cells[0]): replica})
    card = card_for(cells, pricing, [Target(50.0, 16, 5000.0)])
    assert card is not None
    [row] = card.rows
    assert row.boxes == (8, 9) and row.instance == "general-2" and round(row.usd_per_hour or 0, 4) == 0.85
    assert "8–9 + 1 spare × general-2" in "\n".join(card.lines())


def test_run_next_parses_as_make_capacity_with_the_runs_goals_prices_and_server_flags(tmp_path):
    """Pasted as printed, it runs: `make capacity` with the run's own targets (GOALS, as goals.py parses them),
    its price list (one of its own: the default one is not printed) and the embedded server's flags, every variable
    one the Makefile defines."""
    import re
    import shlex

    from loadtest.judge.goals import parse_goal
    from tests.support.paths import REPO

    shutil.copytree(FIXTURES / "h200-paired", tmp_path / "h200-paired")
    own = tmp_path / "my prices.toml"  # a space in it: quoted for the shell
    shutil.copy(DEFAULT_PRICES, own)
    md = report.run([tmp_path / "h200-paired" / "results.jsonl"], p99_ms=25, target_rps=2000,
                    prices=own)[1].read_text()
    [line] = [line for line in md.splitlines() if line.startswith("Run next: ")]
    [again] = [line for line in md.splitlines() if line.startswith("Run the stand-in again as measured: ")]
    # two commands: TF Serving itself, with none of the embedded server's flags (pasted, it measures TF Serving, not
    # the stand-in again), and under the card the stand-in as measured, with them; each says which it is
    assert line.endswith("` on TF Serving.") and again.endswith("`.")
    tf_serving, stand_in = (shlex.split(re.findall(r"`([^`]*)`", text)[0]) for text in (line, again))
    for words in (tf_serving, stand_in):
        assert words[:2] == ["make", "capacity"]
    assigned = dict(word.split("=", 1) for word in stand_in[2:])
    assert dict(word.split("=", 1) for word in tf_serving[2:]) == {k: v for k, v in assigned.items()
                                                                   if k != "LOADTEST_ARGS"}
    assert set(assigned) == {"SERVE", "GOALS", "PRICES", "SHAPES", "LOADTEST_ARGS"}
    assert assigned["SHAPES"] == "auto"  # its CPU replica kept 0.8 of its 12 cores busy
    assert [parse_goal(goal) for goal in assigned["GOALS"].split()] == [Target(25.0, 1, 2000.0)]
    assert assigned["SERVE"].split() == ["cpu/cpu", "cpu/off", "gpu/gpu", "gpu/off"]
    assert Path(assigned["PRICES"]) == own
    assert shlex.split(assigned["LOADTEST_ARGS"]) == ["--server-flags=--backend jax"]
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile[makefile.index("\ncapacity: "):].split("\n\n", 1)[0]
    for name in assigned:
        assert re.search(rf"^{name} \?=", makefile, re.M), name
    assert "$(LOADTEST_ARGS)" in recipe and "$(PRICES)" in recipe and "$(CAPACITY_GOALS)" in recipe
