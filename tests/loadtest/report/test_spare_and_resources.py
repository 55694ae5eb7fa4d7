"""#60: the instance is the failure unit (N + 1 by default), and replicas per instance come from every resource:
vCPUs less a reserve, memory less a reserve ÷ (the replica's memory + 10%), GPUs; a GPU replica's host cores too.
Each test's expected figures are worked by hand in its comments, not by the code's formulas."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.report.configs import config_of
from loadtest.report.series import AnalysisError
from loadtest.report.sizing import instances, prices, size
from loadtest.report.sizing.instances import Replica
from loadtest.report.sizing.prices import Instance
from tests.loadtest.report.handmade import cell, server
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

H200 = "NVIDIA H200"
GENERAL_16 = Instance("general-16", 16, 0, "", "", 0.68)
ONE_CORE = Replica(1.0, "AMD EPYC 7B13", 0, "", "pinned cores 0")
GPU_REPLICA = Replica(12.0, "Intel(R) Xeon(R) Processor", 1, H200, "pinned cores 0-11")
H200_8C = Instance("h200-8c", 8, 1, H200, "", 3.00)
H200_16C = Instance("h200-16c", 16, 1, H200, "", 4.00)
REPO = Path(__file__).resolve().parents[3]


def price_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text('currency = "USD"\n' + body)
    return path


# ----------------------------------------------------------------------------- N + 1


def test_n_plus_1_on_one_instance():
    # 7 one-core replicas fit one general-16 (16 vCPUs); one more instance in case it is lost: 2 x 0.68 = 1.36 USD/h
    placed = instances.place(ONE_CORE, 7, [GENERAL_16], spare=1)
    assert isinstance(placed, instances.Placement)
    assert (placed.serving, placed.spare, placed.instances) == (1, 1, 2)
    assert placed.cost_per_hour == pytest.approx(1.36)


def test_n_plus_1_on_ten_instances():
    # 150 one-core replicas: 150 / 16 = 9.4 -> 10 general-16, + 1 spare = 11 x 0.68 = 7.48 USD/h
    placed = instances.place(ONE_CORE, 150, [GENERAL_16], spare=1)
    assert isinstance(placed, instances.Placement)
    assert (placed.serving, placed.instances, placed.cost_per_hour) == (10, 11, pytest.approx(7.48))


def test_spare_0_prices_only_the_instances_the_target_needs():
    # the same 150 replicas with no spare: 10 x 0.68 = 6.80 USD/h
    placed = instances.place(ONE_CORE, 150, [GENERAL_16], spare=0)
    assert isinstance(placed, instances.Placement) and (placed.instances, placed.spare) == (10, 0)
    assert placed.cost_per_hour == pytest.approx(6.80)


def test_spare_instances_flag_and_make_spare(tmp_path):
    """The demo: cpu-cpu 1005.1 req/s; 5000 / (1005.1 x 0.8) = 6.2 -> 7 one-core replicas, 1 general-16 (0.68 USD/h);
    --spare-instances 0: 1 instance, 0.68 USD/h; default: 1 + 1 spare, 1.36 USD/h; 2: 1 + 2 spare, 2.04 USD/h (each
    "≤": not for buying, no twin ran)."""
    prices_path = price_file(tmp_path, '[instances."general-16"]\nvcpus = 16\nprice_per_hour = 0.68\n')
    demo = FIXTURES / "demo-run" / "results.jsonl"
    for flags, fleet, cost in (((), "1 + 1 spare × general-16", "1.36 USD/h"),
                               (("--spare-instances", "0"), "on ≤ 1 × general-16", "0.68 USD/h"),
                               (("--spare-instances", "2"), "1 + 2 spare × general-16", "2.04 USD/h")):
        done = invoke("size", "--p99-ms", "10", "--target-rps", "5000", "--prices", prices_path, *flags, demo)
        assert done.exit_code == 0, done.stderr
        assert fleet in done.stdout and cost in done.stdout
    bad = invoke("size", "--p99-ms", "10", "--target-rps", "5000", "--spare-instances", "-1", demo)
    assert bad.exit_code == 2 and "--spare-instances" in bad.stderr
    with pytest.raises(AnalysisError, match=r"^--spare-instances must be a whole number >= 0, got -1$"):
        size.objective_from(10, 5000, None, 0.2, -1)
    makefile = (REPO / "Makefile").read_text()
    assert "SPARE_ARG = $(if $(SPARE),--spare-instances $(SPARE))" in makefile  # SPARE=0 is a value: passed on
    assert all(f"$(CLI) {command} " in makefile for command in ("size", "report", "capacity"))
    assert makefile.count("$(SPARE_ARG)") == 4  # capacity, report, size and the demo's capacity


# ----------------------------------------------------------------------------- resources


def test_memory_binds_before_cores():
    # 16 vCPUs / 1 core = 16 by cores; 16 GiB = 16384 MiB / (2000 MiB x 1.1 = 2200) = 7.4 -> 7 by memory: 7, memory
    instance = replace(GENERAL_16, memory_gib=16.0)
    replica = replace(ONE_CORE, memory_mib=2000.0)
    assert instances.fits(replica, instance) == {"cores": 16, "memory": 7}
    placed = instances.place(replica, 20, [instance], spare=1)  # 20 / 7 = 2.9 -> 3, + 1 = 4 x 0.68 = 2.72
    assert isinstance(placed, instances.Placement)
    assert (placed.per_instance, placed.binding, placed.instances) == (7, "memory", 4)
    assert placed.memory_counted and placed.cost_per_hour == pytest.approx(2.72)


def test_unknown_memory_does_not_limit():
    # the instance's memory not given, or the replica's not recorded: 16 by cores alone
    assert instances.fits(replace(ONE_CORE, memory_mib=2000.0), GENERAL_16) == {"cores": 16}
    assert instances.fits(ONE_CORE, replace(GENERAL_16, memory_gib=16.0)) == {"cores": 16}
    placed = instances.place(ONE_CORE, 7, [GENERAL_16], spare=1)
    assert isinstance(placed, instances.Placement) and not placed.memory_counted


def test_the_replicas_memory_is_its_highest_pss_and_older_records_have_none():
    off = server("cpu-off", "off")
    cells = [replace(cell(off, rate=100, p99=4.0), server_pss_mib=310.0),
             replace(cell(off, rate=200, p99=5.0, index=1), server_pss_mib=355.5)]
    assert instances.replicas_by_config(cells)[config_of(cells[0])].memory_mib == 355.5
    assert instances.replicas_by_config([cell(off, rate=100, p99=4.0)])[config_of(cells[0])].memory_mib is None


def test_a_12_host_core_gpu_replica_is_refused_on_an_8_vcpu_gpu_instance_and_placed_on_a_16_vcpu_one():
    # by GPUs both hold 1; by host cores 8 / 12 = 0.67 -> 0 (refused), 16 / 12 = 1.3 -> 1
    refused = instances.place(GPU_REPLICA, 2, [H200_8C], spare=1)
    assert refused == ("no instance for it holds one replica (1 × NVIDIA H200 with 12 cores pinned): h200-8c: host "
                       "cores (needs 12, 8 vCPUs free)")
    # the cheaper 8-vCPU instance is not chosen: 2 replicas + 1 spare = 3 x h200-16c at 4.00 = 12.00 USD/h
    placed = instances.place(GPU_REPLICA, 2, [H200_8C, H200_16C], spare=1)
    assert isinstance(placed, instances.Placement)
    assert (placed.instance.name, placed.per_instance, placed.instances) == ("h200-16c", 1, 3)
    assert placed.cost_per_hour == pytest.approx(12.0)


def test_size_on_the_h200_fixture_places_the_gpu_replica_on_the_16_vcpu_instance(tmp_path):
    """gpu-gpu at p99 <= 25 ms: 1218 req/s, a replica of 1 H200 with 12 pinned cores; 5000 / (1218 x 0.8) = 5.13 ->
    6 replicas, one per h200-16c (the 8-vCPU one holds none): 6 + 1 spare = 7 x 4.00 = 28.00 USD/h."""
    book = price_file(tmp_path, f'[instances."h200-8c"]\nvcpus = 8\ngpus = 1\ngpu = "{H200}"\nprice_per_hour = 3\n'
                                f'[instances."h200-16c"]\nvcpus = 16\ngpus = 1\ngpu = "{H200}"\nprice_per_hour = 4\n')
    answers, _ = size.run([FIXTURES / "h200-paired" / "results.jsonl"], size.objective_from(25, 5000, None, 0.2), book)
    gpu = next(a for a in answers if a.label == "gpu-gpu")
    assert (gpu.replicas, gpu.instance, gpu.instances, gpu.binding) == (6, "h200-16c", 7, "GPUs")
    assert gpu.cost_per_hour == pytest.approx(28.0)


def test_gpu_instances_honour_cpu():
    on_epyc = replace(H200_16C, cpu="AMD EPYC")
    assert instances.place(GPU_REPLICA, 1, [on_epyc], spare=1) == (
        "no NVIDIA H200 instance in the price file has a Intel(R) Xeon(R) Processor CPU")
    placed = instances.place(replace(GPU_REPLICA, cpu_model="AMD EPYC 7B13"), 1, [on_epyc], spare=1)
    assert isinstance(placed, instances.Placement) and placed.instance.name == "h200-16c"


def test_the_reserve_for_the_whole_file_and_per_instance(tmp_path):
    book = prices.load_prices(price_file(tmp_path, """
reserve_vcpus = 2
reserve_gib = 4
[instances."a"]
vcpus = 16
memory_gib = 32
price_per_hour = 1
[instances."b"]
vcpus = 16
memory_gib = 32
reserve_vcpus = 0
price_per_hour = 1
"""))
    a, b = book.instances
    assert (a.reserve_vcpus, a.reserve_gib, b.reserve_vcpus, b.reserve_gib) == (2.0, 4.0, 0.0, 4.0)
    two_cores = Replica(2.0, "x", 0, "", "pinned cores 0-1", memory_mib=1000.0)
    # a: (16 - 2) / 2 = 7 by cores; (32 - 4) GiB = 28672 MiB / 1100 = 26.1 -> 26 by memory: 7
    assert instances.fits(two_cores, a) == {"cores": 7, "memory": 26}
    # b: 16 / 2 = 8 by cores
    assert instances.per_instance(two_cores, b) == 8
    # in code the reserve is 0: 16 / 2 = 8
    assert instances.per_instance(two_cores, replace(GENERAL_16, memory_gib=32.0)) == 8


@pytest.mark.parametrize("body, message", [
    ('[instances."a"]\nvcpus = 4\nmemory_gib = -8\nprice_per_hour = 1\n',
     "[instances.'a']: memory_gib must be a positive number, got -8"),
    ('[instances."a"]\nvcpus = 4\nmemory_gib = "lots"\nprice_per_hour = 1\n',
     "[instances.'a']: memory_gib must be a positive number, got 'lots'"),
    ('reserve_vcpus = "one"\n[instances."a"]\nvcpus = 4\nprice_per_hour = 1\n',
     ": reserve_vcpus must be a non-negative number, got 'one'"),
    ('[instances."a"]\nvcpus = 4\nreserve_gib = -1\nprice_per_hour = 1\n',
     "[instances.'a']: reserve_gib must be a non-negative number, got -1"),
    ('[instances."a"]\nvcpus = 4\nreserve_vcpus = 4\nprice_per_hour = 1\n', "reserve_vcpus (4) leaves none of vcpus"),
    ('[instances."a"]\nvcpus = 4\nmemory = 16\nprice_per_hour = 1\n', "unknown field(s) memory"),
])
def test_bad_memory_and_reserves_are_one_line_naming_the_field_and_the_file(tmp_path, body, message):
    with pytest.raises(AnalysisError) as err:
        prices.load_prices(price_file(tmp_path, body))
    text = str(err.value)
    assert message in text and str(tmp_path / "prices.toml") in text and "\n" not in text


def test_the_example_prices_give_every_instance_memory():
    book = prices.load_prices(prices.DEFAULT_PRICES)
    assert book.instances and all(i.memory_gib and i.memory_gib >= 4 * i.vcpus for i in book.instances)
