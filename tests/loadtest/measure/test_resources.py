"""What a server had, recorded with each cell: cores pinned to or a container's CPU limit, CPU model, GPUs;
and records from before the field reading back with {}."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.evidence.cell_parts import ServerResources
from loadtest.evidence.records import CellResult, read_results
from loadtest.measure import device_sources as sources
from loadtest.measure.resources import core_list, cpu_resources, server_resources
from serving.endpoint import ServedEndpoint
from tests.support.paths import ANALYSIS_FIXTURES


def endpoint(**changes) -> ServedEndpoint:
    base = ServedEndpoint(name="cpu", kind="embedded", device="cpu", device_name="Test CPU", host="127.0.0.1",
                          grpc_port=8500, rest_port=8501, model_name="mnist", batching_profile="off")
    return replace(base, **changes)


def process_source(cpu_set: set[int]) -> sources.ProcessSource:
    """A ProcessSource's figures without a process: pinned to `cpu_set`."""
    source = sources.ProcessSource.__new__(sources.ProcessSource)
    source.cpu_set, source.cores = frozenset(cpu_set), float(len(cpu_set))
    return source


@pytest.mark.parametrize("cores, text", [({0}, "0"), ({0, 1, 2, 5}, "0-2,5"), ({3, 1}, "1,3"), ({4, 5, 6, 7}, "4-7")])
def test_core_list(cores, text):
    assert core_list(cores) == text


def test_cores_from_affinity_container_limit_or_unknown():
    assert cpu_resources(process_source({0}), 2) == (1.0, "pinned cores 0")
    assert cpu_resources(process_source({0, 1}), 2) == (2.0, "affinity (all 2 cores)")
    limited = sources.CgroupSource(Path("cpu.stat"), 1e-6, Path("memory.current"), 1.5)
    assert cpu_resources(limited, 8) == (1.5, "container CPU limit")
    unlimited = sources.CgroupSource(Path("cpu.stat"), 1e-6, Path("memory.current"), 8.0)
    assert cpu_resources(unlimited, 8) == (8.0, "container without a CPU limit (all 8 cores)")
    shape = sources.CgroupSource(Path("cpu.stat"), 1e-6, Path("memory.current"), 2.0, frozenset({2, 3}))
    assert cpu_resources(shape, 8) == (2.0, "container cpuset 2-3")  # a replica shape's container
    quota_within = sources.CgroupSource(Path("cpu.stat"), 1e-6, Path("memory.current"), 1.5, frozenset({2, 3}))
    assert cpu_resources(quota_within, 8) == (1.5, "container CPU limit")
    assert cpu_resources(None, 8) == (None, "unknown")


def test_this_process_as_the_server():
    mine = sources.ProcessSource(os.getpid())
    resources = server_resources(endpoint(pid=os.getpid()), mine, len(os.sched_getaffinity(0)), "Host CPU")
    assert resources.cpus == float(len(os.sched_getaffinity(0))) and resources.cpu_model == "Host CPU"


def test_server_resources_for_cpu_gpu_and_an_address():
    cpu = server_resources(endpoint(pid=123), process_source({0}), 2, "AMD EPYC 7B13")
    assert cpu.to_dict() == {"cpus": 1.0, "cpu_model": "AMD EPYC 7B13", "gpus": 0, "gpu_name": "",
                             "source": "pinned cores 0"}
    gpu = server_resources(endpoint(device="gpu", device_name="NVIDIA H100 80GB HBM3", pid=123),
                           process_source(set(range(12))), 12, "AMD EPYC 7B13")
    assert gpu.to_dict() == {"cpus": 12.0, "cpu_model": "AMD EPYC 7B13", "gpus": 1, "gpu_name": "NVIDIA H100 80GB HBM3",
                   "source": "affinity (all 12 cores)"}
    remote = server_resources(endpoint(device_name="Remote CPU"), None, 2, "AMD EPYC 7B13")
    assert remote.to_dict() == {"cpus": None, "cpu_model": "Remote CPU", "gpus": 0, "gpu_name": "", "source": "unknown"}


def test_records_round_trip_the_field_and_old_records_read_it_as_empty(tmp_path):
    [old, *_] = read_results(ANALYSIS_FIXTURES / "demo-run" / "results.jsonl")
    assert old.server_resources is None
    new = replace(old, server_resources=ServerResources(1.0, "AMD EPYC", 0, "", "pinned cores 0"))
    assert CellResult.from_dict(json.loads(new.to_json())) == new
