"""A second Keras model, not MNIST, exported as the MNIST one is: `model.keras` beside its SavedModel.

Two named inputs of different shapes (`features` float32 [-1, 4, 4], fed to a 16-wide input; `extra`
float32 [-1, 3]) and one output (`score` float32 [-1, 3]); the SavedModel's `serving_default` adds
`label` (int64 [-1], the argmax of `score`), as the MNIST export adds `classes`. The version directory also
holds `reference_outputs.npz`: the SavedModel's outputs on 20 rows. Exported in a subprocess, so the test
process stays free of TensorFlow's runtime and of Keras.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.export import quiet_tf_env
from tests.support.paths import REPO

MODEL_NAME = "keras-ranker"
EXPORT_SCRIPT = r'''
import sys
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

version = Path(sys.argv[1]) / "keras-ranker" / "1"
keras.utils.set_random_seed(3)
features = keras.Input(shape=(16,), name="features")
extra = keras.Input(shape=(3,), name="extra")
hidden = keras.layers.Dense(8, activation="relu")(keras.layers.Concatenate()([features, extra]))
score = keras.layers.Dense(3, name="score")(hidden)
model = keras.Model(inputs=[features, extra], outputs=score)

module = tf.Module()
module.model = model


@tf.function(input_signature=[tf.TensorSpec([None, 4, 4], tf.float32, name="features"),
                              tf.TensorSpec([None, 3], tf.float32, name="extra")])
def serve(features, extra):
    out = module.model([tf.reshape(features, [-1, 16]), extra], training=False)
    return {"score": out, "label": tf.argmax(out, axis=1, output_type=tf.int64)}


tf.saved_model.save(module, str(version), signatures={"serving_default": serve})
model.save(version / "model.keras")
rng = np.random.default_rng(5)
inputs = {"features": rng.random((20, 4, 4)).astype(np.float32), "extra": rng.random((20, 3)).astype(np.float32)}
out = serve(**{k: tf.constant(v) for k, v in inputs.items()})
np.savez(version / "reference_outputs.npz", **{f"input.{k}": v for k, v in inputs.items()},
         **{f"output.{k}": v.numpy() for k, v in out.items()})
'''


@dataclass(frozen=True)
class KerasRankerModel:
    base_path: Path  # <models>/keras-ranker: --model_base_path
    version_dir: Path


def export_keras_ranker(models_dir: Path) -> KerasRankerModel:
    """Export it under `models_dir`; raises with TensorFlow's output when that fails."""
    done = subprocess.run([sys.executable, "-c", EXPORT_SCRIPT, str(models_dir)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=quiet_tf_env())
    if done.returncode != 0:
        raise RuntimeError(f"exporting the Keras ranker failed: {done.stderr[-3000:]}")
    return KerasRankerModel(models_dir / MODEL_NAME, models_dir / MODEL_NAME / "1")
