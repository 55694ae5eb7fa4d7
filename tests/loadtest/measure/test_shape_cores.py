"""Which cores each replica shape gets, on a 2-core machine like this one and on the 16-core GPU machines."""

from __future__ import annotations

import pytest

from loadtest.measure.shape_cores import AUTO, ReplicaShape, auto_shapes, cpu_text, parse_shapes, plan_shapes


def test_on_two_cores_auto_measures_one_core_and_two_sharing_the_load_generators():
    planned = plan_shapes(AUTO, [0, 1])
    assert planned.shapes == (ReplicaShape(1, "0"), ReplicaShape(2, "0-1", shares_loadgen=True))
    assert planned.loadgen_cpus == "1" and planned.refused == ()
    assert "lower bound" in planned.lines()[0]


def test_on_sixteen_cores_the_load_generator_keeps_its_quarter_and_no_shape_shares_it():
    planned = plan_shapes(AUTO, range(16))
    assert [s.cores for s in planned.shapes] == [1, 2, 4, 8]
    assert planned.loadgen_cpus == "12-15" and not any(s.shares_loadgen for s in planned.shapes)


def test_pinned_cores_of_the_plan_decide_the_split():
    planned = plan_shapes((1, 2, 3), range(8), server_cpus="2-3", loadgen_cpus="6")
    assert [(s.cpus, s.shares_loadgen) for s in planned.shapes] == [("2", False), ("2-3", False), ("2-3,6", True)]


def test_a_shape_larger_than_the_machine_is_refused_by_name():
    planned = plan_shapes((1, 4), [0, 1])
    assert [s.cores for s in planned.shapes] == [1] and planned.refused == ("4 cores: this machine gives 2",)
    assert "4 cores: this machine gives 2" in planned.lines()[-1]


@pytest.mark.parametrize("server, every, expected", [(1, 2, (1, 2)), (1, 1, (1,)), (12, 16, (1, 2, 4, 8)),
                                                     (3, 4, (1, 2))])
def test_auto_shapes(server, every, expected):
    assert auto_shapes(server, every) == expected


@pytest.mark.parametrize("text, expected", [("auto", AUTO), ("AUTO", AUTO), ("2,1,2", (1, 2)), ("4", (4,))])
def test_parse_shapes(text, expected):
    assert parse_shapes(text) == expected


@pytest.mark.parametrize("text", ["", "0", "1,x", "-1"])
def test_a_malformed_shape_list_is_refused(text):
    with pytest.raises(ValueError, match="--shapes"):
        parse_shapes(text)


def test_cpu_text_writes_ranges():
    assert cpu_text([5, 0, 1, 2]) == "0-2,5" and cpu_text([3]) == "3"
