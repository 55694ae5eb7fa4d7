"""A second model, not MNIST, exported with TensorFlow at test time: the "ranker".

Two inputs of different dtypes and ranks (`ids` int64 [-1, 8], `features` float32 [-1, 4, 4]) and two
outputs (`score` float32 [-1], `label` int64 [-1]), saved with an explicit `serving_default` signature
under `<models>/ranker/1/`, beside `<models>/ranker-inputs.npz`: 20 rows of inputs and the model's own
outputs as `expected:score` / `expected:label`. Exported in a subprocess, so the test process stays
free of TensorFlow's runtime.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.export import quiet_tf_env
from tests.support.paths import REPO

MODEL_NAME = "ranker"
EXPORT_SCRIPT = r'''
import sys
from pathlib import Path

import numpy as np
import tensorflow as tf

models = Path(sys.argv[1])


class Ranker(tf.Module):
    def __init__(self):
        super().__init__()
        self.weights = tf.Variable(tf.linspace(-1.0, 1.0, 16))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.int64, name="ids"),
                                  tf.TensorSpec([None, 4, 4], tf.float32, name="features")])
    def serve(self, ids, features):
        flat = tf.reshape(features, [-1, 16])
        total = tf.reduce_sum(ids, axis=1)
        score = tf.reduce_sum(flat * self.weights, axis=1) + tf.cast(total, tf.float32) * 0.01
        return {"score": score, "label": total % 7}


ranker = Ranker()
tf.saved_model.save(ranker, str(models / "ranker" / "1"), signatures={"serving_default": ranker.serve})
rng = np.random.default_rng(7)
ids = rng.integers(0, 50, size=(20, 8)).astype(np.int64)
features = rng.random((20, 4, 4)).astype(np.float32)
out = ranker.serve(tf.constant(ids), tf.constant(features))
np.savez(models / "ranker-inputs.npz", ids=ids, features=features,
         **{"expected:score": out["score"].numpy(), "expected:label": out["label"].numpy()})
'''


@dataclass(frozen=True)
class RankerModel:
    models_dir: Path
    base_path: Path  # <models>/ranker: --model_base_path
    inputs_path: Path  # the .npz of inputs with expected outputs


def export_ranker(models_dir: Path) -> RankerModel:
    """Export the ranker under `models_dir`; raises with TensorFlow's output when that fails."""
    done = subprocess.run([sys.executable, "-c", EXPORT_SCRIPT, str(models_dir)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=quiet_tf_env())
    if done.returncode != 0:
        raise RuntimeError(f"exporting the ranker failed: {done.stderr[-3000:]}")
    return RankerModel(models_dir, models_dir / MODEL_NAME, models_dir / "ranker-inputs.npz")
