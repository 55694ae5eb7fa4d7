"""Which backend a server's flags choose on each device: `--gpu_backend` on a GPU, `--backend` elsewhere."""

from __future__ import annotations

from serving.server.flags import backend_in as backend_of
from serving.server.flags import parse_args


def test_the_gpu_backend_applies_on_a_gpu_only():
    flags = ["--backend", "jax", "--gpu_backend", "torch"]
    assert backend_of(flags, "cpu") == "jax" and backend_of(flags, "gpu") == "torch"
    assert backend_of(["--backend=jax"], "gpu") == "jax" and backend_of([], "gpu") == "savedmodel"
    assert parse_args(["--model_base_path", "m", *flags]).backend == "jax"
    assert parse_args(["--model_base_path", "m", *flags, "--device", "gpu"]).backend == "torch"


def test_every_runtime_that_runs_a_model_has_a_gpu_probe():
    from serving.server.runtimes import RUNTIMES

    assert {b for b, r in RUNTIMES.items() if r.gpu_probe} == {b for b, r in RUNTIMES.items() if r.runs_model} \
        == {"savedmodel", "jax", "torch"}
