"""Replicas in the units people rent: what a replica is, how many fit an instance, how many instances,
and what they cost, against numbers computed by hand; refused units with their reasons; the older
per-replica price format still read.

The demo run (fixtures/demo-run: one embedded CPU server pinned to one core of a 2-core AMD EPYC
box, capacity searches at p99 <= 10 ms, request batch 1): cpu-cpu confirmed 1005.1 req/s, cpu-off
597.4 req/s. For 5000 req/s at headroom 0.2:

    cpu-cpu  5000 / (1005.1 x 0.8) = 6.22 -> 7 replicas;  16 per general-16 -> 1 instance -> 0.68 USD/h
    cpu-off  5000 / (597.4 x 0.8) = 10.46 -> 11 replicas; 16 per general-16 -> 1 instance -> 0.68 USD/h
    per million images: 0.68 / (5000 x 3600) x 1e6 = 0.68 / 18 = 0.0378
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.evidence.cell_parts import ServerResources
from loadtest.evidence.provenance_record import Provenance
from loadtest.report import headline as summary
from loadtest.report.answers.answers import answer
from loadtest.report.configs import config_labels, config_of
from loadtest.report.series import AnalysisError, read_all
from loadtest.report.sizing import instances, prices, size
from loadtest.report.sizing.instances import Replica
from loadtest.report.sizing.prices import Instance
from tests.loadtest.report.handmade import cell, server
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

DEMO = FIXTURES / "demo-run" / "results.jsonl"
OLD_PRICES = FIXTURES / "prices.toml"
H100 = "NVIDIA H100 80GB HBM3"

GENERAL_2 = Instance("general-2", 2, 0, "", "", 0.085)
GENERAL_16 = Instance("general-16", 16, 0, "", "", 0.68)
EPYC_16 = Instance("epyc-16", 16, 0, "", "AMD EPYC", 0.70)
H100_1 = Instance("h100-1", 26, 1, H100, "", 4.00)
H100_8 = Instance("h100-8", 208, 8, H100, "", 30.00)

ONE_CORE = Replica(1.0, "AMD EPYC 7B13", 0, "", "pinned cores 0")
THREE_CORES = Replica(3.0, "Intel Xeon", 0, "", "container CPU limit")
ONE_H100 = Replica(12.0, "AMD EPYC 7B13", 1, H100, "affinity (all 12 cores)")


def price_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text('currency = "USD"\nexample = false\n' + body)
    return path


INSTANCES_16 = """
[instances."general-16"]
vcpus = 16
gpus = 0
price_per_hour = 0.68
"""


# ----------------------------------------------------------------------------- what a replica is


def test_a_replica_says_what_it_is():
    assert ONE_CORE.describe() == "1 core of AMD EPYC 7B13"
    assert THREE_CORES.describe() == "3 cores of Intel Xeon"
    assert ONE_H100.describe() == f"1 × {H100} with 12 cores"  # from its affinity: not said pinned
    assert replace(ONE_H100, source="pinned cores 0-11").describe() == f"1 × {H100} with 12 cores pinned"
    assert Replica(None, "", 0, "", "unknown").describe() == "cores unknown of an unrecorded CPU"


def test_a_replica_from_its_record_else_the_telemetry_else_the_plan():
    label = server("cpu-off", "off")
    recorded = replace(cell(label, rate=100), server_resources=ServerResources(
        2.0, "AMD EPYC", 0, "", "pinned cores 0-1"))
    assert instances.replica_of(recorded) == Replica(2.0, "AMD EPYC", 0, "", "pinned cores 0-1")
    old = replace(cell(label, rate=100), server_cpu_cores=1.0)  # a record from before server_resources
    assert instances.replica_of(old) == Replica(1.0, "Test CPU", 0, "", "the telemetry's server_cpu_cores")
    planned = replace(cell(label, rate=100), provenance=Provenance(
        plan={"configs": [{"device": "cpu"}], "launch": {"server_cpus": "0-3"}}))
    assert instances.replica_of(planned).cpus == 4.0
    by_address = replace(planned, provenance=Provenance(plan={"configs": [], "launch": {"server_cpus": "0-3"}}))
    assert instances.replica_of(by_address) == Replica(None, "Test CPU", 0, "", "unknown")
    gpu = replace(cell(server("gpu-off", "off", device="gpu"), rate=100), provenance=Provenance(cpu_model="AMD EPYC"))
    assert instances.replica_of(gpu) == Replica(None, "AMD EPYC", 1, "Test GPU", "unknown")


# ----------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize("replica, instance, holds", [
    (ONE_CORE, GENERAL_16, 16),  # floor(16 / 1)
    (THREE_CORES, GENERAL_16, 5),  # floor(16 / 3) = 5, one core left over
    (THREE_CORES, GENERAL_2, 0),  # smaller than one replica
    (Replica(0.1, "x", 0, "", "container CPU limit"), Instance("tiny", 0.3, 0, "", "", 1.0), 3),  # 0.3/0.1 = 2.9999
    (ONE_H100, H100_1, 1),
    (ONE_H100, H100_8, 8),  # GPUs / replica GPUs; its cores are not the limit
])
def test_replicas_per_instance(replica, instance, holds):
    assert instances.per_instance(replica, instance) == holds


@pytest.mark.parametrize("replicas, holds, expected", [(7, 16, 1), (16, 16, 1), (17, 16, 2), (63, 16, 4), (11, 5, 3)])
def test_instances_needed(replicas, holds, expected):
    assert instances.instances_needed(replicas, holds) == expected


def test_the_cheapest_instance_type_that_holds_the_replicas():
    """With no spare (SPARE=0): the arithmetic before N + 1."""
    small = instances.place(ONE_CORE, 7, [GENERAL_16, GENERAL_2], spare=0)
    assert isinstance(small, instances.Placement)  # 4 x 0.085 = 0.34 beats 1 x 0.68
    assert (small.instance.name, small.per_instance, small.instances) == ("general-2", 2, 4)
    assert small.cost_per_hour == pytest.approx(0.34)
    many = instances.place(ONE_CORE, 63, [GENERAL_16], spare=0)  # ceil(63 / 16) = 4 -> 2.72
    assert isinstance(many, instances.Placement) and (many.instances, many.cost_per_hour) == (4, pytest.approx(2.72))
    gpu = instances.place(ONE_H100, 10, [H100_1, H100_8], spare=0)  # 10 x 4.00 = 40 beats 2 x 30.00 = 60
    assert isinstance(gpu, instances.Placement) and (gpu.instance.name, gpu.instances) == ("h100-1", 10)
    assert not gpu.assumed_linear and instances.linear_note(ONE_H100, gpu) == ""
    assert instances.linear_note(ONE_CORE, many) == (
        "16 replicas per general-16 (16 vCPUs) assumes throughput scales linearly across its cores from a 1-core "
        "measurement; no server of that size was measured")


def test_an_instance_with_a_cpu_model_holds_only_replicas_measured_on_it():
    on_epyc = instances.place(ONE_CORE, 7, [EPYC_16], spare=1)
    assert isinstance(on_epyc, instances.Placement) and on_epyc.instance.name == "epyc-16"
    assert instances.place(THREE_CORES, 7, [EPYC_16, H100_1], spare=1) == (
        "no CPU-only instance in the price file has a Intel Xeon CPU")


@pytest.mark.parametrize("replica, offered, reason", [
    (Replica(1.0, "AMD EPYC", 1, "NVIDIA L4", "pinned cores 0"), [GENERAL_16, H100_1],
     f"no instance in the price file has a NVIDIA L4 GPU (priced GPUs: {H100})"),
    (Replica(1.0, "AMD EPYC", 1, "NVIDIA L4", "pinned cores 0"), [GENERAL_16], "(it prices no GPU instance)"),
    (Replica(None, "AMD EPYC", 0, "", "unknown"), [GENERAL_16], "the replica's cores are unknown"),
    (Replica(32.0, "AMD EPYC", 0, "", "container CPU limit"), [GENERAL_2, GENERAL_16],
     "no instance for it holds one replica (32 cores of AMD EPYC): general-2: host cores (needs 32, 2 vCPUs free); "
     "general-16: host cores (needs 32, 16 vCPUs free)"),
    (Replica(4.0, "x", 2, H100, "pinned cores 0-3"), [H100_1],
     "h100-1: GPUs (needs 2, has 1)"),
])
def test_a_unit_that_maps_onto_no_instance_is_refused_with_the_reason(replica, offered, reason):
    refused = instances.place(replica, 3, offered, spare=1)
    assert isinstance(refused, str) and reason in refused


# ----------------------------------------------------------------------------- sizing, end to end


def test_demo_sizing_prices_a_16_vcpu_instance_assuming_linear_scaling_from_one_core(tmp_path):
    """The done-when check: a one-core measurement priced on a 16-vCPU instance, the assumption stated."""
    answers, text = size.run([DEMO], size.objective_from(10, 5000, None, 0.2), price_file(tmp_path, INSTANCES_16))
    by = {a.label: a for a in answers}
    best = by["cpu-cpu"]
    assert best.replica == "1 core of AMD EPYC" and (best.capacity, best.replicas) == (pytest.approx(1005.1), 7)
    # N + 1: 7 replicas fit 1 general-16, plus 1 spare = 2 instances x 0.68 = 1.36 USD/h; 1.36 / 18 per million
    assert (best.instance, best.per_instance, best.instances, best.spare) == ("general-16", 16, 2, 1)
    assert best.cost_per_hour == pytest.approx(1.36) and best.cost_per_million == pytest.approx(1.36 / 18)
    assert (by["cpu-off"].replicas, by["cpu-off"].instances, by["cpu-off"].cost_per_hour) == (11, 2, 1.36)
    assert [a.rank for a in answers] == [1, 2] and answers[0] is best  # same cost: fewer replicas first
    assert "USD per hour per instance" in text and "prices replicas, not instances" not in text
    # not for buying (no twin ran): the most a server at least this fast needs, as the card prints it (#68)
    assert ("NOT FOR BUYING, the most a server at least this fast needs: cpu-cpu (cpu embedded server (TensorFlow, "
            "SavedModel), batching cpu) on AMD EPYC, request batch 1: ≤ 7 replica(s) of 1 core of AMD EPYC on ≤ 1 + 1 "
            "spare × general-16 (16 replica(s) per instance, by cores), ≤ 1.36 USD/h, ≤ 0.0756 USD per million "
            "images") in text
    assert "Memory not counted (the replica's memory or the instance's memory_gib is not known" in text
    assert ("Assumed: 16 replicas per general-16 (16 vCPUs) assumes throughput scales linearly across its cores "
            "from a 1-core measurement; no server of that size was measured.") in text


def test_demo_sizing_on_the_example_prices_names_instances_and_example_prices():
    done = invoke("size", "--p99-ms", "10", "--target-rps", "50000", DEMO)
    assert done.exit_code == 0, done.stderr
    # 50000 / 804.08 = 62.2 -> 63 replicas; N + 1: (32 + 1) x general-2 at 0.085 = 2.805 beats (4 + 1) x general-16
    # at 0.68 = 3.40 (with no spare the two tied at 2.72). Not for buying (no twin ran), so as the card: the most a
    # server at least this fast needs, at the range's bottom, never the range 29–32 (its upper end 1,082.4 gave 29)
    out = done.stdout
    assert "EXAMPLE prices, not quotes" in out
    assert "≤ 63 replica(s) of 1 core of AMD EPYC on ≤ 32 + 1 spare × general-2" in out
    assert "≤ 2.81 USD/h" in out and "from a 1-core measurement" in out


def test_a_refused_unit_is_listed_with_its_reason_not_priced(tmp_path):
    cpu, gpu = server("cpu-off", "off"), server("gpu-off", "off", device="gpu")
    cells = [replace(c, server_cpu_cores=1.0) for c in (cell(cpu, rate=100, p99=4.0), cell(cpu, rate=200, p99=20.0))]
    cells += [cell(gpu, rate=1000, p99=2.0, index=1), cell(gpu, rate=2000, p99=30.0, index=2)]
    book = prices.load_prices(price_file(tmp_path, INSTANCES_16))
    objective = size.objective_from(10, 1000, None, 0.2)
    answers = size.size(cells, objective, book)
    by = {a.label: a for a in answers}
    # 1000 / (100 x 0.8) = 12.5 -> 13 replicas, 16 per instance -> 1, + 1 spare -> 2 x 0.68 = 1.36; 1.36 / 3.6 per M
    off = by["cpu-off"]
    assert (off.replicas, off.instances, off.cost_per_hour) == (13, 2, 1.36)
    assert off.cost_per_million == pytest.approx(1.36 / 3.6)
    refused = by["gpu-off"]  # 1000 / (1000 x 0.8) = 1.25 -> 2 replicas, but no instance has its GPU
    assert refused.meets and refused.replicas == 2 and refused.cost_per_hour is None
    assert refused.refused == "no instance in the price file has a Test GPU GPU (it prices no GPU instance)"
    text = size.format_answers(answers, objective, book)
    assert "Not priced (the replica maps onto no instance in the price file):" in text
    assert "  gpu-off (1 × Test GPU): no instance in the price file has a Test GPU GPU" in text
    assert size.cheapest(answers) is off


def test_the_older_per_replica_format_still_prices_and_says_it_prices_replicas():
    answers, text = size.run([DEMO], size.objective_from(10, 5000, None, 0.2), OLD_PRICES)
    best = answers[0]  # (7 replicas + 1 spare) x 0.40 USD/h per replica, whatever its size = 3.20
    assert (best.label, best.replicas, best.cost_per_hour, best.instance) == ("cpu-cpu", 7, pytest.approx(3.20), "")
    assert "USD per hour per replica" in text and "This price file prices replicas, not instances" in text


def test_the_cards_cost_cells_name_instances_or_the_refusal(tmp_path):
    """The demo's answer with its device floor left out and no twin (not for buying: the tool's, its tool ceiling not
    measured), so its boxes and prices are the most a server at least this fast needs, marked "≤"."""
    from dataclasses import replace

    from loadtest.judge.goals import Target
    from loadtest.report.card.card import card_for
    from loadtest.report.sizing.instances import replicas_by_config

    results = [replace(c, device_floor=None) for c in read_all([DEMO])]
    target = [Target(10.0, 1, 5000.0)]
    book = prices.load_prices(price_file(tmp_path, INSTANCES_16))
    card = card_for(results, summary.Pricing(5000, 0.2, book, replicas_by_config(results)), target)
    assert card is not None
    [cpu] = card.table_rows()
    # 5000 / (1,005.1 x 0.8) -> 7 replicas, 16 per general-16 (16 vCPUs at 0.68 USD/h): 1 instance, 0.68 USD/h;
    # at the rate that failed above it, 6 replicas: 1 instance too; + 1 spare: 2 x 0.68 = 1.36 USD/h, / 18 per M
    assert cpu[5:] == ("the tool: tool ceiling not measured: no twin was run", "≤ 1 + 1 spare × general-16", "≤ 1.36",
                       "≤ 0.0756")
    labels = config_labels(map(config_of, results))
    out = summary.summarise(results, answer(results), labels, 10.0, summary.Pricing(5000, 0.2, book))
    # the rule under the card's sizing table, the device table pointing to it
    assert out.sizing is not None and "USD per instance-hour" in out.sizing.caption
    assert out.tables[0].caption.endswith("The card's boxes, worked: its sizing table, under its Terms.")
    nothing = prices.load_prices(price_file(tmp_path, '[instances."gpu"]\nvcpus = 8\ngpus = 1\ngpu = "NVIDIA L4"\n'
                                                      'price_per_hour = 1.0\n'))
    card = card_for(results, summary.Pricing(5000, 0.2, nothing, replicas_by_config(results)), target)
    # nothing priced: no money columns, the row says what it served of the device alone was not measured, the note
    # why it has no price
    assert card is not None and not card.priced and card.table_rows()[0][6:] == ("not measured",)
    assert card.notes == ("5,000 req/s · p99 ≤ 10 ms · 1 image, CPU: not priced: no CPU-only instance in the price "
                          "file has a AMD EPYC CPU.",)


# ----------------------------------------------------------------------------- the price file


def test_instance_price_file_reads_sizes_and_prices(tmp_path):
    book = prices.load_prices(price_file(tmp_path, INSTANCES_16 + f"""
[instances."h100-1"]
vcpus = 26
gpus = 1
gpu = "{H100}"
cpu = "AMD EPYC"
price_per_hour = 4
"""))
    assert not book.per_replica
    assert book.instances == (GENERAL_16, Instance("h100-1", 26, 1, H100, "AMD EPYC", 4.0))


@pytest.mark.parametrize("body, message", [
    ('[instances."a"]\nvcpus = 4\nprice_per_hour = 1\nram = 16\n', "[instances.'a']: unknown field(s) ram"),
    ('[instances."a"]\nvcpus = 4\n', "[instances.'a']: missing price_per_hour"),
    ('[instances."a"]\nvcpus = 0\nprice_per_hour = 1\n', "vcpus must be a positive number"),
    ('[instances."a"]\nvcpus = 4\ngpus = 1.5\nprice_per_hour = 1\n', "gpus must be a whole number"),
    ('[instances."a"]\nvcpus = 4\ngpus = 1\nprice_per_hour = 1\n', 'gpus = 1 needs gpu = "its name"'),
    ('[instances."a"]\nvcpus = 4\nprice_per_hour = -1\n', "price_per_hour must be a non-negative number"),
    ('[device]\ncpu = 1.0\n[instances."a"]\nvcpus = 4\nprice_per_hour = 1\n', "not both"),
    ('instances = 3\n', "[instances] must hold tables"),
])
def test_bad_instance_price_files(tmp_path, body, message):
    with pytest.raises(AnalysisError) as err:
        prices.load_prices(price_file(tmp_path, body))
    assert message in str(err.value)
