"""tests/ mirrors the source (issue #69 item 3): every test module is named for a source module at its mirrored path
(`tests/loadtest/report/card/test_words.py` tests `loadtest/report/card/words.py`), or is listed below as crossing
several, with one line on what it crosses. No test module is named for an issue."""

from __future__ import annotations

import re

from tests.support.paths import REPO

# test module -> what it crosses (several modules, a command end to end, or the repository itself)
CROSS = {
    "tests/docker/test_compose.py": "docker/'s compose file, its env files and the images they name",
    "tests/loadtest/benchmarks/test_loadgen_bench.py": "the load-generator bench's arithmetic over its measured cells",
    "tests/loadtest/benchmarks/test_runtimes_bench.py": "the runtimes bench's summary over the serving-path benches",
    "tests/loadtest/benchmarks/test_server_bench.py": "the server bench's per-round ratios and medians",
    "tests/loadtest/bundle/test_bundle.py": "the offline device bundle built, sized and run on CPU from its own files",
    "tests/loadtest/bundle/test_smoke_pool.py": "the bundle's smoke test on the torch runtime behind a pooled server",
    "tests/loadtest/load/test_client_connections.py": "the load generator's channels against a real pooled server",
    "tests/loadtest/measure/test_container_floor.py": "a TF Serving container's device floor, measured in a child",
    "tests/loadtest/measure/test_hosts.py": "Locust's master and workers and the server in network namespaces",
    "tests/loadtest/measure/test_loadgen_sizer.py": "Locust processes sized to a cell's rate from the generator's cost",
    "tests/loadtest/measure/test_managed.py": "servers the tool starts, measures and stops, and `tune` over them",
    "tests/loadtest/measure/test_noise_sweep.py": "host, server and client noise told apart in real sweep cells",
    "tests/loadtest/measure/test_own_model.py": "a second SavedModel end to end: server, load, report and sizing",
    "tests/loadtest/measure/test_schedule_windows.py": "a real open-loop cell's windows and the unstable rule on them",
    "tests/loadtest/measure/test_server_processes.py": "a server the tool did not start, found by its port",
    "tests/loadtest/measure/test_sweep.py": "real sweeps: Locust, the embedded server and the records they write",
    "tests/loadtest/measure/test_telemetry_sweep.py": "device telemetry in real sweep cells",
    "tests/loadtest/report/test_box_range.py": "the box range: fleet sizing read by the card, `size` and the shapes",
    "tests/loadtest/report/test_h200_paired.py": "the recorded H200 run's report, card, findings and console",
    "tests/loadtest/report/test_report.py": "the report assembled from fixtures: card, tables, files and HTML",
    "tests/loadtest/report/test_report_browser.py": "report.html in headless Chromium",
    "tests/loadtest/report/test_report_words.py": "the words of the card, the tables and the glossary across a report",
    "tests/loadtest/report/test_spare_and_resources.py": "N + 1 and every resource limiting replicas, card to `size`",
    "tests/loadtest/report/test_views_agree.py": "generated runs: card, `size` and figures give one value a fact",
    "tests/loadtest/search/test_capacity_budget.py": "`mnist-bench capacity` on a short budget against a real server",
    "tests/loadtest/search/test_capacity_noise.py": "a capacity search telling a host's stall from the server's",
    "tests/loadtest/search/test_capacity_repeats.py": "repeats past --repeat, the comparison and the report's ratios",
    "tests/loadtest/search/test_capacity_signals.py": "`mnist-bench capacity` taking SIGTERM down Ctrl-C's path",
    "tests/loadtest/search/test_paired_rounds.py": "a paired comparison's rounds: search, interleaver and pairing",
    "tests/loadtest/search/test_progress.py": "the console's progress line per search, with a terminal and without",
    "tests/loadtest/search/test_shape_sweep_run.py": "`capacity --shapes auto` against real servers of known work",
    "tests/loadtest/search/test_tool_ceiling_twin.py": "a configuration's twin as the search shapes it, plan to server",
    "tests/serving/deploy/test_backend_flags.py": "the backend a server's flags choose on each device",
    "tests/serving/pool/test_parts.py": "the pool's parts alone: messages, shared memory, the port, frontends",
    "tests/serving/pool/test_pool.py": "a pooled server end to end: frontends, owner, batching, metrics",
    "tests/serving/pool/test_runtimes_in_pool.py": "every runtime behind several frontends",
    "tests/serving/server/test_backends.py": "the null and SavedModel backends behind one interface",
    "tests/serving/server/test_fuzz.py": "10,000 mutated requests over gRPC and REST against one server",
    "tests/serving/server/test_grpc.py": "the gRPC API of a running server: answers, metadata, status codes",
    "tests/serving/server/test_jax_backend.py": "the JAX runtime against the SavedModel's answers, served",
    "tests/serving/server/test_phases.py": "per-request phases: the clock, the histograms and a real server",
    "tests/serving/server/test_runtime_registry.py": "a runtime added by one module and one registry line",
    "tests/serving/server/test_server.py": "the server's lifecycle: ready line, config file, versions, shutdown",
    "tests/serving/server/test_torch_backend.py": "the torch runtime against TensorFlow's answers, served",
    "tests/serving/server/test_validation.py": "signature checks before TensorFlow, and model config parsing",
    "tests/serving/server/test_without_tensorflow.py": "the null backend on a machine without TensorFlow",
    "tests/serving/test_import_contracts.py": "pyproject.toml's import-linter contracts against planted imports",
    "tests/support/test_reruns.py": "the reruns plugin on a real pytest run in a subprocess",
    "tests/test_clock_use.py": "every unit and untimed test, read for clocks and sleeps",
    "tests/test_layout_doc.py": "docs/layout.md against every module of serving/ and loadtest/",
    "tests/test_report_imports.py": "every module of loadtest/report/, counted for the project's modules it imports",
    "tests/test_tests_layout.py": "tests/ against the source tree",
}


def modules_of_tests() -> list[str]:
    return sorted(p.relative_to(REPO).as_posix() for p in (REPO / "tests").rglob("test_*.py")
                  if "fixtures" not in p.parts)


def mirrored(test: str) -> str:
    """`tests/loadtest/report/card/test_words.py` -> `loadtest/report/card/words.py`."""
    folder, _, name = test.removeprefix("tests/").rpartition("/")
    return f"{folder}/{name.removeprefix('test_')}".lstrip("/")


def test_every_test_module_mirrors_a_source_module_or_says_what_it_crosses():
    stray = [t for t in modules_of_tests() if t not in CROSS and not (REPO / mirrored(t)).is_file()]
    assert not stray, f"name each for the module it tests, at its mirrored path, or list it in CROSS: {stray}"
    mirrors = [t for t in CROSS if (REPO / mirrored(t)).is_file()]
    assert not mirrors, f"these mirror a source module: leave CROSS: {mirrors}"
    assert not [t for t in CROSS if not (REPO / t).is_file()], "CROSS names a test module that is gone"


def test_no_test_module_is_named_for_an_issue():
    assert not [t for t in modules_of_tests() if re.search(r"issue\d|_\d{2,3}_", t.rsplit("/", 1)[1])]


def test_the_mirror_rule_reads_the_paths_it_names():
    assert mirrored("tests/loadtest/report/card/test_words.py") == "loadtest/report/card/words.py"
    assert (REPO / mirrored("tests/loadtest/report/card/test_words.py")).is_file()
    assert not (REPO / mirrored("tests/loadtest/report/test_verdict.py")).is_file()  # flattened: not a mirror
    assert mirrored("tests/test_clock_use.py") == "clock_use.py"
