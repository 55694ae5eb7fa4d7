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
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import answer
from loadtest.report.card.card import card_for
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import figures_of
from loadtest.report.headline import bound_lines
from loadtest.report.sizing.instances import Pricing
from loadtest.report.sizing.prices import load_prices
from loadtest.report.sizing.size import Objective, size
from tests.loadtest.report.answers.test_bound import floor, paired
from tests.loadtest.report.handmade import search, server, twin
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

PRICES = load_prices(FIXTURES / "prices.toml")
RATE, OBJECTIVE_MS = 5000.0, 10.0
CONFIGS = {"cpu": ("cpu-off", "off"), "gpu": ("gpu-gpu", "gpu")}
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
    """The cells of one run: per (device, capacity, kind, share, twin[, container, repeat]) a configuration's search,
    its device floor (`share`: served ÷ the device alone at its answer; None: no floor) and its twin (× the capacity,
    "failed", or None); a TF Serving container's where `container`; searched again at `repeat` × the capacity where
    given (a comparison's repeats); `moved`: paired, its reference cells moving the machine's speed that much (one
    configuration only)."""
    cells = []
    for n, (device, c, kind, share, twin_kind, *more) in enumerate(configs):
        container, repeat = (more + [False, None])[:2]
        name, profile = CONFIGS[device]
        label = server(name, profile, device)
        label = replace(label, kind="tfserving-container", name=f"tfs-{device}") if container else label
        own = searched(label, f"s{n}", c, kind, share, twin_kind)
        if repeat is not None:
            own += searched(label, f"s{n}-again", round(c * repeat, 1), kind, share, twin_kind)
        cells += own if moved is None else paired(own, (500.0, 500.0 * (1 + moved)), label)
    return [replace(x, cell_index=i) for i, x in enumerate(cells)]


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
    options = {a.config.device: a for a in size(cells, Objective(OBJECTIVE_MS, RATE, "rps", 0.2), PRICES)}
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
