"""Your own model, end to end: a second SavedModel (the "ranker", `tests.support.ranker`: two inputs of
different dtypes and ranks) on the real embedded server, load-tested with inputs made from its
signature or read from an .npz, sized by a capacity search the tool serves itself, and named in the report.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from loadtest.records import read_results
from loadtest.sweep import plan as plans
from loadtest.sweep.runner import Sweep
from serving.deploy.process import start_server
from tests.loadtest.sweep.test_sweep import target_of
from tests.support.cli import command
from tests.support.paths import REPO

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def ranker_server(ranker_model):
    with start_server("--model_name", "ranker", "--model_base_path", str(ranker_model.base_path),
                      "--device_floor_s", "0.3") as server:
        yield server


def ranker_plan(input_data: str) -> plans.Plan:
    run = plans.RunSettings(warmup_s=0.5, measure_s=2.0, window_s=1.0, startup_timeout_s=60.0, request_timeout_s=5.0,
                            model_name="ranker", input_data=input_data, input_seed=5)
    return plans.Plan("own", run, plans.Grid(batch_sizes=(3,), concurrency=(2,), rates_rps=()))


def sweep_once(server, input_data: str, tmp_path: Path):
    from dataclasses import replace

    target = replace(target_of(server), model_name="ranker")
    [result] = Sweep(ranker_plan(input_data), [target], tmp_path, out=open(os.devnull, "w")).run()
    return result


def test_random_inputs_are_checked_by_the_signatures_outputs(ranker_server, tmp_path):
    result = sweep_once(ranker_server, "random", tmp_path)
    assert result.status == "ok" and result.requests > 0 and result.errors_by_code == {}, result.error_examples
    assert result.load.check == "outputs" and result.accuracy is None  # no expected outputs: no accuracy
    assert result.images == 3 * result.ok_requests and result.server.model_name == "ranker"
    assert result.provenance["inputs"] == {"source": "random", "seed": 5, "int_range": [0, 100], "input_shapes": {}}


def test_an_npz_with_the_models_own_outputs_is_answered_right(ranker_server, ranker_model, tmp_path):
    result = sweep_once(ranker_server, str(ranker_model.inputs_path), tmp_path)
    assert result.status == "ok" and result.errors_by_code == {} and result.accuracy == 1.0
    inputs = result.provenance["inputs"]
    assert inputs["source"] == "npz" and inputs["path"] == str(ranker_model.inputs_path) and len(inputs["sha256"]) == 64


def test_wrong_expected_outputs_lower_the_accuracy(ranker_server, ranker_model, tmp_path):
    data = dict(np.load(ranker_model.inputs_path))
    data["expected:label"] = data["expected:label"] + 1  # every row now expects a label the model never gives
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, **data)
    result = sweep_once(ranker_server, str(wrong), tmp_path)
    assert result.errors_by_code == {} and result.accuracy == 0.0


def test_capacity_of_your_own_model_on_a_server_the_tool_starts(ranker_model, tmp_path):
    done = subprocess.run([*command("capacity"), "--serve", "cpu/off", "--model-name", "ranker",
                           "--model-base-path", str(ranker_model.base_path), "--input-data", "random",
                           "--p99-ms", "200", "--confidence", "0.9", "--precision", "0.5", "--max-steps", "5",
                           "--max-minutes", "3", "--max-rate-s", "6", "--warmup-s", "0.5", "--measure-s", "2",
                           "--server-flags", "--device_floor_s 0.3", "--results-dir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[-1].startswith("capacity: ") and "req/s" in lines[-1] and "<= 200 ms" in lines[-1]
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    assert all(c.server.model_name == "ranker" and c.load.check == "outputs" for c in cells)
    assert all(c.errors_by_code == {} for c in cells if c.status == "ok")
    report = next(tmp_path.glob("*/report.md")).read_text()
    assert "**model ranker: " in report and "(model ranker)" in report
