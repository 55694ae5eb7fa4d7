"""`make mutation`'s score read back from files laid out as mutmut 3.8.1 leaves them: a mutant that changes only a
prose string's words is left out, every other one counted, and each one not killed listed with its line."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadtest.benchmarks.mutation_score import is_prose, prose_only, read_mutants, report
from loadtest.commands.bench_commands import bench

SOURCE = '''\
"""A module."""


def verdict(rate: float, limit: float) -> str:
    if rate > limit:
        raise ValueError(f"rate {rate} over the limit")
    return "off" if rate == 0 else "on"


class Box:
    def size(self, n: int) -> int:
        return n * 2
'''

# mutmut's copies of each function, named as it names them; the bodies below differ from the original in one place.
VERDICT = '''\
def x_verdict__mutmut_{n}(rate: float, limit: float) -> str:
    if rate {op} limit:
        raise ValueError(f"{message} {{rate}} over the limit")
    return "{off}" if rate == 0 else "on"
'''
SIZE = '''\
    def xǁBoxǁsize__mutmut_{n}(self, n: int) -> int:
        return n {op} 2
'''


def mutated_file() -> str:
    variants = {"orig": dict(op=">", message="rate", off="off"),
                "1": dict(op=">=", message="rate", off="off"),  # an operator: counted
                "2": dict(op=">", message="XXrateXX", off="off"),  # part of a prose f-string: left out
                "3": dict(op=">", message="rate", off="OFF")}  # a string the code compares: counted
    functions = "\n\n".join(VERDICT.format(n=n, **v) for n, v in variants.items())
    sizes = "\n".join(SIZE.format(n=n, op=op) for n, op in [("orig", "*"), ("1", "/")])
    return f'"""A module."""\n\n\n{functions}\n\nclass Box:\n{sizes}'


@pytest.fixture
def mutants(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE)
    out = tmp_path / "mutants" / "pkg"
    out.mkdir(parents=True)
    (out / "mod.py").write_text(mutated_file())
    codes = {"x_verdict__mutmut_1": 0, "x_verdict__mutmut_2": 0, "x_verdict__mutmut_3": 1, "xǁBoxǁsize__mutmut_1": 33}
    meta = {"exit_code_by_key": {f"pkg.mod.{name}": code for name, code in codes.items()}, "hash_by_function_name": {},
            "type_check_error_by_key": {}, "durations_by_key": {}, "estimated_durations_by_key": {}}
    (out / "mod.py.meta").write_text(json.dumps(meta))
    return tmp_path / "mutants"


def test_prose_is_a_string_with_a_space_and_a_letter() -> None:
    assert is_prose("the twin did not carry its rate")
    assert not is_prose("off")
    assert not is_prose(" ")
    assert not is_prose("1 2")


def test_a_mutant_is_prose_only_where_the_trees_differ_in_prose_strings_alone() -> None:
    def function(body: str) -> ast.AST:
        return ast.parse(body).body[0]

    before = function('def f(x):\n    return f"{x} requests failed" if x else "none"')
    assert prose_only(before, function('def g(x):\n    return f"{x}XX requests failedXX" if x else "none"'))
    assert not prose_only(before, function('def g(x):\n    return f"{x} requests failed" if x else "NONE"'))
    assert not prose_only(before, function('def g(x):\n    return f"{x} requests failed" if not x else "none"'))
    assert not prose_only(before, function('def g(x):\n    return f"{x} requests failed" if x else None'))
    assert not prose_only(before, before)
    # a string the code compares is no prose, spaces or not
    compared = 'def f(reason):\n    return "load generator" in reason or reason in ("a b", "c d")'
    assert not prose_only(function(compared), function(compared.replace('"load generator"', '"XXload generatorXX"')))
    assert not prose_only(function(compared), function(compared.replace('"c d"', '"C D"')))


def test_prose_only_mutants_are_left_out_and_the_rest_scored(mutants: Path) -> None:
    score = read_mutants(mutants)
    by_name = {m.name.rpartition(".")[2]: m for m in score.mutants}
    assert [name for name, m in by_name.items() if m.prose_only] == ["x_verdict__mutmut_2"]
    assert [m.name.rpartition(".")[2] for m in score.counted] == ["x_verdict__mutmut_1", "x_verdict__mutmut_3",
                                                                  "xǁBoxǁsize__mutmut_1"]
    assert score.killed == 1
    assert score.score == pytest.approx(1 / 3)
    survived = by_name["x_verdict__mutmut_1"]
    assert (str(survived.path), survived.line, survived.before, survived.after) == (
        "pkg/mod.py", 5, "if rate > limit:", "if rate >= limit:")
    no_tests = by_name["xǁBoxǁsize__mutmut_1"]
    assert (no_tests.status, no_tests.line, no_tests.after) == ("no tests", 12, "return n / 2")


def test_only_scores_the_mutants_named(mutants: Path) -> None:
    score = read_mutants(mutants, ["pkg.mod.xǁBox*"])
    assert [m.status for m in score.counted] == ["no tests"]
    assert score.score == 0


def test_the_report_names_each_survivor_and_the_target(mutants: Path) -> None:
    lines: list[str] = []
    report(read_mutants(mutants), echo=lines.append)
    assert lines[0] == "mutation score: 1 of 3 counted mutants killed = 33.3% (target 85%: not met)"
    assert "  left out, only a prose string's words changed: 1 (0 of them killed); not run yet: 0" in lines
    assert "  pkg/mod.py:5 x_verdict__mutmut_1 [survived]: if rate > limit:  ->  if rate >= limit:" in lines


def test_the_command_fails_below_its_minimum(mutants: Path) -> None:
    low = CliRunner().invoke(bench, ["mutation-score", "--mutants", str(mutants), "--min-score", "0.85"])
    assert low.exit_code == 1, low.output
    assert "33.3%" in low.output
    met = CliRunner().invoke(bench, ["mutation-score", "--mutants", str(mutants), "--min-score", "0.3"])
    assert met.exit_code == 0, met.output
    empty = CliRunner().invoke(bench, ["mutation-score", "--mutants", str(mutants / "none")])
    assert empty.exit_code == 1
    assert "run mutmut first" in empty.output
