"""No test outside the timed phase depends on this machine's timing (issue #69).

`make test` runs the unit tests and the `integration`+`untimed` tests on 2 workers beside each other, with no
reruns, then the timed tests (`integration`, not `untimed`) one at a time. A test in the first phase that sleeps,
spins or reads a clock must not let the machine's speed decide its outcome. This test parses every test module,
finds each first-phase test whose body calls `time.sleep`, `time.monotonic`, `time.perf_counter`, `time.time`
(or their `_ns` forms, or `sleep`/`monotonic`/`perf_counter` imported from time) or spins (a `while True:` loop, or
a busy-wait: a `while` whose body does nothing), and checks that each one is in `REVIEWED` with why its outcome does
not depend on the machine's speed.

It reads a test's own body (nested functions included), not the helpers it calls, nor a child's code in a string.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CLOCK_FUNCTIONS = {"sleep", "monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns"}

# "path::test_name" (Class.test_name for a method) -> why its outcome does not depend on this machine's speed.
REVIEWED: dict[str, str] = {
    "tests/loadtest/bundle/test_bundle.py::test_a_run_stopped_part_way_keeps_the_results_already_measured":
        "polls for the first result line with a 240 s deadline, then stops the run; checks the lines kept and the exit",
    "tests/loadtest/measure/test_hosts.py::test_a_server_host_lost_mid_search_ends_the_search_with_what_was_measured":
        "a 200 s hang bound on a test a busy machine ran in 81 s (docs/performance.md); it checks the cells kept",
    "tests/loadtest/measure/test_hosts.py::test_a_worker_host_lost_mid_cell_leaves_a_flagged_cell_with_the_others_data":
        "faults 1 s into a 3.5 s cell (2 s to spare); its bound is the master's ~120 s deadline + 30 s, ~6x its time",
    "tests/loadtest/measure/test_sweep.py::test_dead_server_mid_sweep_fails_its_cell_and_the_sweep_finishes":
        "a 150 s hang bound on a sweep that takes ~12 s here; the checks are on each cell's status and reason",
    "tests/loadtest/measure/test_telemetry.py::test_pss_counts_pages_shared_by_a_servers_processes_once":
        "its sleeps keep a forked child alive (killed after) and let it settle; the check is on bytes of memory shared",
    "tests/loadtest/search/test_interleave.py::test_ctrl_c_ends_every_body_with_its_answer_then_raises_interrupted":
        "its `while True` loops over cells until the interleaver interrupts it; it counts cells and reads no clock",
    "tests/serving/server/test_backends.py::test_null_backend_delay_and_periodic_stall":
        "lower bounds only: a delay held to its deadline, a stall timed from before its window opens; never shorter",
    "tests/serving/server/test_backends.py::test_null_backend_spends_a_fixed_cpu_time_per_call":
        "bounds this thread's CPU time (not wall time) and wall >= CPU, which a loaded machine cannot break",
    "tests/serving/server/handling/test_batching.py::test_full_batch_runs_without_waiting_for_the_timeout":
        "a full batch runs in ms against a 30 s batch timeout: its 5 s bound only catches a wait for that timeout",
    "tests/serving/server/handling/test_batching.py::test_open_batch_runs_after_the_timeout":
        "a lower bound: an open batch never runs before its 30 ms timeout, however slow the machine",
    "tests/serving/server/test_fuzz.py::test_mutated_requests_get_tf_serving_statuses_and_the_server_survives":
        "reads the clock only to print the barrage's time; checks answers, counts of a derandomized barrage and memory",
    "tests/serving/server/test_server.py::test_config_file_and_new_version_picked_up_while_running":
        "polls for version 1's unloading with a 30 s deadline; the check is on the NOT_FOUND status, not the time",
}

HINT = (
    "each of these sleeps, spins or reads a clock outside the timed phase. Either move it to the timed phase "
    "(mark it `pytest.mark.integration` without `untimed`, and check its timing bounds through "
    "tests.support.timing), inject a clock or count in place of wall time, or add it to REVIEWED in "
    "tests/test_clock_use.py with one line saying why its outcome does not depend on this machine's speed"
)


def mark_names(node: ast.expr) -> set[str]:
    """The `pytest.mark.X` names in a decorator or a `pytestmark` value (a mark, a call of one, or a list)."""
    if isinstance(node, ast.List | ast.Tuple):
        return set().union(*(mark_names(item) for item in node.elts))
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
        return {node.attr}
    return set()


def module_marks(tree: ast.Module) -> set[str]:
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "pytestmark" for target in statement.targets):
            return mark_names(statement.value)
    return set()


def decorator_marks(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> set[str]:
    return set().union(*(mark_names(decorator) for decorator in node.decorator_list))


def is_timed(marks: set[str]) -> bool:
    return "integration" in marks and "untimed" not in marks


def each_test(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    """Each test's name (Class.method for a method), its node, and its decorators' marks (its class's included)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            yield node.name, node, decorator_marks(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for method in node.body:
                if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef) and method.name.startswith("test_"):
                    yield f"{node.name}.{method.name}", method, decorator_marks(node) | decorator_marks(method)


def time_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names the time module goes by in this module, and the clock functions imported from it by name."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.asname or alias.name for alias in node.names if alias.name == "time"}
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            functions |= {alias.asname or alias.name for alias in node.names if alias.name in CLOCK_FUNCTIONS}
    return modules, functions


def calls_a_clock(call: ast.Call, modules: set[str], functions: set[str]) -> bool:
    called = call.func
    if isinstance(called, ast.Attribute) and isinstance(called.value, ast.Name):
        return called.value.id in modules and called.attr in CLOCK_FUNCTIONS
    return isinstance(called, ast.Name) and called.id in functions


def does_nothing(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Pass | ast.Continue) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))


def spins(node: ast.AST) -> bool:
    """`while True:`, or a busy-wait: a `while` whose body does nothing."""
    if not isinstance(node, ast.While):
        return False
    forever = isinstance(node.test, ast.Constant) and node.test.value is True
    return forever or all(does_nothing(statement) for statement in node.body)


def uses_a_clock(function: ast.AST, modules: set[str], functions: set[str]) -> bool:
    return any(spins(node) or (isinstance(node, ast.Call) and calls_a_clock(node, modules, functions))
               for node in ast.walk(function))


def untimed_tests_using_a_clock(tree: ast.Module) -> set[str]:
    """The names of the module's tests that run outside the timed phase and sleep, spin or read a clock."""
    modules, functions = time_names(tree)
    marks = module_marks(tree)
    return {name for name, function, own_marks in each_test(tree)
            if not is_timed(marks | own_marks) and uses_a_clock(function, modules, functions)}


def found_tests() -> set[str]:
    """"path::name" for every such test under tests/."""
    found = set()
    for path in sorted(TESTS.rglob("test_*.py")):
        names = untimed_tests_using_a_clock(ast.parse(path.read_text(), filename=str(path)))
        found |= {f"{path.relative_to(ROOT).as_posix()}::{name}" for name in names}
    return found


def test_every_untimed_test_that_uses_a_clock_is_reviewed():
    unreviewed = sorted(found_tests() - REVIEWED.keys())
    assert not unreviewed, f"{HINT}:\n" + "\n".join(unreviewed)


def test_every_reviewed_test_still_exists_and_uses_a_clock():
    stale = sorted(REVIEWED.keys() - found_tests())
    assert not stale, (
        "these REVIEWED entries name no test that runs outside the timed phase and uses a clock (gone, renamed, "
        "moved to the timed phase or no longer reading a clock): remove them from tests/test_clock_use.py:\n"
        + "\n".join(stale))


def test_the_scan_finds_sleeps_clocks_and_spins_outside_the_timed_phase():
    module = (
        "import pytest\nimport time as clock\nfrom time import sleep\n\n"
        "def test_sleeps():\n    sleep(0.1)\n\n"
        "def test_reads():\n    assert clock.perf_counter()\n\n"
        "def test_spins():\n    while True:\n        break\n\n"
        "def test_busy_waits(done):\n    while not done():\n        pass\n\n"
        "def test_loops(items):\n    while items:\n        items.pop()\n\n"
        "def test_plain():\n    assert clock.thread_time() >= 0\n\n"
        "@pytest.mark.integration\ndef test_timed():\n    sleep(1)\n\n"
        "@pytest.mark.integration\n@pytest.mark.untimed\ndef test_untimed():\n    sleep(1)\n\n"
        "class TestGroup:\n    def test_method(self):\n        clock.monotonic()\n")
    assert untimed_tests_using_a_clock(ast.parse(module)) == {
        "test_sleeps", "test_reads", "test_spins", "test_busy_waits", "test_untimed", "TestGroup.test_method"}


def test_a_module_mark_puts_its_tests_in_the_timed_phase():
    assert is_timed(module_marks(ast.parse("import pytest\npytestmark = pytest.mark.integration\n")))
    assert not is_timed(module_marks(ast.parse(
        "import pytest\npytestmark = [pytest.mark.integration, pytest.mark.untimed]\n")))
    assert not is_timed(module_marks(ast.parse("import pytest\npytestmark = pytest.mark.untimed\n")))
