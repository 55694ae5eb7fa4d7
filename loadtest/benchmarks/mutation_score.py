"""The mutation score of the modules that decide (`make mutation`, issue #69): mutmut's results read back from the
files it leaves under `mutants/`, every mutant counted except one whose only change is the words of a prose string
(a message: a string literal holding a space and a letter, which the code does not compare), then killed ÷ counted,
and each counted mutant the tests did not kill listed with the line it changed.

    mnist-bench bench mutation-score --min-score 0.85      (after `mutmut run`; make mutation runs both)

What it reads, mutmut 3.8.1's own files: `mutants/<path>.py.meta` (JSON: each mutant's name and its test run's exit
code) and `mutants/<path>.py`, which holds each mutated function twice or more: `x_<name>__mutmut_orig` and one
`x_<name>__mutmut_<n>` a mutant (`xǁ<Class>ǁ<name>...` for a method). The two are compared as syntax trees, so a
mutant is prose-only when the trees differ in string constants alone and each string it changed is prose.

A mutant whose tests timed out or crashed counts as killed (the tests noticed it); one no unit test reaches counts
as not killed; one not run yet (a run stopped early) is left out and counted apart.

Not for: running mutmut (`make mutation`, `[tool.mutmut]` in `pyproject.toml`).
"""

from __future__ import annotations

import ast
import fnmatch
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

MUTANTS = Path("mutants")
TARGET = 0.85  # issue #69: at least 85% of the counted mutants killed
PROSE = re.compile(r"[A-Za-z]")

# mutmut 3.8.1's exit codes (mutmut/stats.py status_by_exit_code), folded into what the score needs.
KILLED, SURVIVED, NO_TESTS, NOT_RUN, SUSPICIOUS = "killed", "survived", "no tests", "not run", "suspicious"
STATUS_BY_EXIT_CODE: dict[int | None, str] = {
    1: KILLED, 3: KILLED,  # a test failed; pytest's internal error
    36: KILLED, 24: KILLED, -24: KILLED, 152: KILLED, 255: KILLED,  # timed out (SIGXCPU)
    -11: KILLED, -9: KILLED,  # crashed, or killed past its time
    37: KILLED,  # caught by the type check
    0: SURVIVED,
    5: NO_TESTS, 33: NO_TESTS,
    None: NOT_RUN, 2: NOT_RUN, 34: NOT_RUN,  # not run yet, interrupted, skipped
}


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's: loadtest.judge.tool_ceiling.x_is_twin__mutmut_3
    path: Path  # the source file, from the repository root
    line: int | None  # in the source file, where the mutant changed it
    status: str
    prose_only: bool
    before: str  # the first line it changed, as written, and the same line mutated
    after: str

    @property
    def counted(self) -> bool:
        return not self.prose_only and self.status != NOT_RUN


@dataclass(frozen=True)
class Score:
    mutants: tuple[Mutant, ...]

    @property
    def counted(self) -> list[Mutant]:
        return [m for m in self.mutants if m.counted]

    @property
    def killed(self) -> int:
        return sum(m.status == KILLED for m in self.counted)

    @property
    def score(self) -> float | None:
        return self.killed / len(self.counted) if self.counted else None

    @property
    def survivors(self) -> list[Mutant]:
        return [m for m in self.counted if m.status != KILLED]


def is_prose(text: str) -> bool:
    """A string a reader reads, not one the code compares: a space and a letter ("the twin did not", not "off")."""
    return " " in text and PROSE.search(text) is not None


def string_changes(before: ast.AST, after: ast.AST, *, own_name: bool = False,
                   compared: bool = False) -> list[tuple[str, bool]] | None:
    """The string constants that differ between two trees, each with whether the code compares it (an operand of
    `==`, `in` and the like, or inside a tuple, list or set that is one); None where anything else differs.
    `own_name`: the two are mutmut's copies of one function, whose names differ by design."""
    if type(before) is not type(after):
        return None
    if isinstance(before, ast.Constant) and isinstance(after, ast.Constant):
        if type(before.value) is type(after.value) and before.value == after.value:
            return []
        if isinstance(before.value, str) and isinstance(after.value, str):
            return [(before.value, compared)]
        return None
    changes: list[tuple[str, bool]] = []
    for field in before._fields:
        if own_name and field == "name":
            continue
        one, other = getattr(before, field, None), getattr(after, field, None)
        if isinstance(one, list) and isinstance(other, list):
            if len(one) != len(other):
                return None
            pairs: Iterable[tuple[object, object]] = zip(one, other)
        else:
            pairs = [(one, other)]
        operand = (isinstance(before, ast.Compare) and field in ("left", "comparators")
                   or compared and isinstance(before, ast.Tuple | ast.List | ast.Set))
        for a, b in pairs:
            if isinstance(a, ast.AST) and isinstance(b, ast.AST):
                inner = string_changes(a, b, compared=operand)
                if inner is None:
                    return None
                changes += inner
            elif a != b:
                return None
    return changes


def prose_only(before: ast.AST, after: ast.AST) -> bool:
    """Whether all a mutant changed is prose: strings a reader reads, none of them compared by the code."""
    changes = string_changes(before, after, own_name=True)
    return bool(changes) and all(is_prose(old) and not compared for old, compared in changes or [])


def functions_of(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """A module's functions and its classes' methods, by name (mutmut's generated names are unique in a file)."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef | ast.AsyncFunctionDef):
                found[member.name] = member
    return found


def source_line(source: ast.Module, generated: str) -> int | None:
    """Where the function a generated name stands for begins (its `def`) in the source file."""
    mangled = generated.partition("__mutmut_")[0]
    if mangled.startswith("xǁ"):
        _, class_name, name = mangled.split("ǁ")
        scopes = [n.body for n in source.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    else:
        name, scopes = mangled.removeprefix("x_"), [source.body]
    for body in scopes:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
                return node.lineno
    return None


def changed_line(lines: Sequence[str], before: ast.stmt, after: ast.stmt) -> tuple[int, str, str]:
    """The first line (counted from the `def`) the mutant changed, before and after, leading spaces dropped."""
    one = lines[before.lineno - 1:before.end_lineno]
    other = lines[after.lineno - 1:after.end_lineno]
    for offset, (a, b) in enumerate(zip(one, other)):
        if offset and a != b:
            return offset, a.strip(), b.strip()
    offset = min(len(one), len(other))
    return offset, "".join(one[offset:offset + 1]).strip(), "".join(other[offset:offset + 1]).strip()


def read_file_mutants(mutants: Path, meta: Path, only: Sequence[str] = ()) -> list[Mutant]:
    """One mutated file's mutants, from its .meta file beside it (those named by one of `only`'s globs, where given)."""
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    if only:
        codes = {name: code for name, code in codes.items() if any(fnmatch.fnmatchcase(name, g) for g in only)}
    if not codes:
        return []
    mutated = meta.with_suffix("")  # mutants/loadtest/judge/tool_ceiling.py
    path = mutated.relative_to(mutants)
    text = mutated.read_text()
    lines, functions = text.splitlines(), functions_of(ast.parse(text))
    source = ast.parse(path.read_text()) if path.exists() else None
    found = []
    for name, exit_code in codes.items():
        generated = name.rpartition(".")[2]
        orig = functions.get(generated.partition("__mutmut_")[0] + "__mutmut_orig")
        mutant = functions.get(generated)
        status = STATUS_BY_EXIT_CODE.get(exit_code, SUSPICIOUS)
        if orig is None or mutant is None:
            found.append(Mutant(name, path, None, status, False, "?", "?"))
            continue
        offset, before, after = changed_line(lines, orig, mutant)
        start = source_line(source, generated) if source is not None else None
        found.append(Mutant(name, path, None if start is None else start + offset, status,
                            prose_only(orig, mutant), before, after))
    return found


def read_mutants(mutants: Path = MUTANTS, only: Sequence[str] = ()) -> Score:
    """Every mutant mutmut left under `mutants` (names matching one of `only`'s globs, where given)."""
    metas = sorted(mutants.rglob("*.py.meta"))
    return Score(tuple(m for meta in metas for m in read_file_mutants(mutants, meta, only)))


def report(score: Score, target: float = TARGET, echo: Callable[[str], None] = print) -> None:
    counted, prose = score.counted, [m for m in score.mutants if m.prose_only and m.status != NOT_RUN]
    not_run = sum(m.status == NOT_RUN for m in score.mutants)
    statuses = Counter(m.status for m in counted)
    if score.score is None:
        echo(f"no mutants checked under mutants/ ({not_run} not run): run mutmut first (make mutation)")
        return
    verdict = "met" if score.score >= target else "not met"
    echo(f"mutation score: {score.killed} of {len(counted)} counted mutants killed = {score.score:.1%} "
         f"(target {target:.0%}: {verdict})")
    echo("  counted: " + ", ".join(f"{status} {n}" for status, n in sorted(statuses.items())))
    echo(f"  left out, only a prose string's words changed: {len(prose)} "
         f"({sum(m.status == KILLED for m in prose)} of them killed); not run yet: {not_run}")
    for path, n in sorted(Counter(str(m.path) for m in counted).items()):
        killed = sum(m.status == KILLED for m in counted if str(m.path) == path)
        echo(f"  {path}: {killed} of {n} killed ({killed / n:.0%})")
    if score.survivors:
        echo(f"not killed ({len(score.survivors)}):")
    for m in score.survivors:
        where = f"{m.path}:{m.line}" if m.line is not None else str(m.path)
        echo(f"  {where} {m.name.rpartition('.')[2]} [{m.status}]: {m.before}  ->  {m.after}")
