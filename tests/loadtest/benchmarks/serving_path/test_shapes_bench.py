"""The replica-shape benchmark's arithmetic (`loadtest.benchmarks.serving_path.shapes_bench`): which cores a shape
takes, which shapes share the load generator's core, and the scaling efficiency of each round."""

from __future__ import annotations

import pytest

from loadtest.benchmarks.serving_path.shapes_bench import ShapesOptions, cores_of, efficiencies, shapes_of
from tests.support.cli import invoke


def test_a_shape_takes_the_first_k_server_cores_and_says_when_it_shares_the_load_generators():
    assert cores_of("0,1") == (0, 1) and cores_of("0-3") == (0, 1, 2, 3) and cores_of("2,4-5") == (2, 4, 5)
    one, two = shapes_of(ShapesOptions(server_cpu="0,1", client_cpu="1", shapes=(2, 1)))
    assert (one.cores, one.shares_loadgen, two.cores, two.shares_loadgen) == ((0,), False, (0, 1), True)
    assert two.label() == "2 cores (shares the load generator's core)" and one.label() == "1 core"
    with pytest.raises(ValueError, match=r"shape\(s\) \[4\] need more cores than --server-cpu 0,1"):
        shapes_of(ShapesOptions(shapes=(1, 4)))


def test_efficiency_is_k_cores_against_k_times_one_core_round_by_round():
    found = efficiencies({1: [400.0, 500.0], 2: [600.0, 1000.0]})
    assert found == {1: [1.0, 1.0], 2: [0.75, 1.0]}


def test_a_shape_list_without_one_core_is_refused_in_one_line(tmp_path):
    done = invoke("bench", "shapes", "--model-base-path", tmp_path, "--shape", "2")
    assert done.exit_code != 0 and "the shapes must include 1" in done.stderr
