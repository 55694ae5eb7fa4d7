"""The bundle's smoke test on the torch runtime behind two frontends and an owner, TensorFlow importable.

The bundle's `environment()` names `KERAS_BACKEND=jax`; a `--backend torch` server's owner must still run on
PyTorch (`serving.pool.roles`), and the smoke test's judgement must read keras-torch from its cells. Real parts:
the smoke's own plan and command (`mnist-bench loadtest`, real Locust), a real pooled server on a real port.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from loadtest.bundle import smoke
from loadtest.bundle.device_run import environment, write_plan
from model_export.provenance import REPO

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

SERVER_FLAGS = "--server-flags=--device cpu --backend torch --enable_batching --workers 2"


def test_a_torch_owner_behind_two_frontends_passes_the_smoke_test_as_keras_torch(exported_model, tmp_path):
    env = environment()
    assert env["KERAS_BACKEND"] == "jax"  # the bundle's, which the torch runtime must not take
    base = write_plan(tmp_path / "base-plan.toml", argparse.Namespace(measure_s=2.0), 1, exported_model.output_dir)
    plan = tmp_path / "smoke-plan.toml"
    plan.write_text(smoke.smoke_plan(base.read_text()))
    command = [sys.executable, "-m", "loadtest", "loadtest", "--plan", str(plan), "--serve=cpu/cpu", SERVER_FLAGS,
               "--models-dir", str(exported_model.output_dir), "--results-dir", str(tmp_path / "smoke"), "--no-report"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    tail = (done.stdout + done.stderr).splitlines()[-20:]
    found = smoke.judge(smoke.read_cells(tmp_path / "smoke"), "cpu-cpu", "cpu", done.returncode, tail,
                        runtime_asked="keras-torch")
    assert found.ok, (found.why, tail)
    assert found.runtime == "keras-torch" and [c.batch for c in found.cells] == list(smoke.BATCHES)
    assert all(c.requests > 0 and c.device_alone_ips for c in found.cells)
    # the cpu's usual runtime is jax: the same cells judged by the bundle's default fail, naming what ran
    assert smoke.judge(smoke.read_cells(tmp_path / "smoke"), "cpu-cpu", "cpu", 0, []).why == \
        "the cpu server ran keras-torch, not jax"
