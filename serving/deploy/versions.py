"""Does a server know the ops of the model it loads? The TensorFlow that wrote a model version against the server's.

A SavedModel names the ops its graphs use; a TensorFlow older than the one that wrote it may not
know some of them, and then refuses the model or cannot run it. New ops arrive with minor releases
(2.20 -> 2.21), not with patch releases, so versions are compared on major.minor. TF Serving's
releases follow TensorFlow's (tensorflow/serving:2.20.0 is built on TensorFlow 2.20), so an
image's tag says which TensorFlow it runs; the embedded server runs the installed TensorFlow, and
its JAX and null backends load no SavedModel at all (nothing to check).

`model_server_gap` is the pure comparison; `gap_warning` the one line the launcher, `mnist-bench
k8s` and the report print. Unknown versions are never a gap: the caller says "unknown" if it must.

Not for: reading the model's metadata (`model_export.metadata`) or starting servers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MODEL_TENSORFLOW = "model_tensorflow"  # key in a server's recorded versions: the TensorFlow that wrote its model
_MAJOR_MINOR = re.compile(r"\s*v?(\d+)\.(\d+)")
_IMAGE_RELEASE = re.compile(r":v?(\d+\.\d+(?:\.\d+)?)(?:-[\w.]+)?$")  # "…:2.20.0", "…:2.20.0-gpu"


def major_minor(version: str | None) -> tuple[int, int] | None:
    """(2, 21) for "2.21.0", "2.21.0rc1" or "2.21"; None for anything that names no release."""
    found = _MAJOR_MINOR.match(version) if version else None
    return (int(found[1]), int(found[2])) if found else None


def model_server_gap(model_tf_version: str | None, server_tf_version: str | None) -> str | None:
    """How far the server's TensorFlow is behind the one that wrote the model ("2.21 > 2.20"), on
    major.minor; None when the server is as new or newer, or when either version is unknown."""
    model, server = major_minor(model_tf_version), major_minor(server_tf_version)
    if model is None or server is None or model <= server:
        return None
    return f"{model[0]}.{model[1]} > {server[0]}.{server[1]}"


def gap_warning(model_name: str, model_version: int | str, model_tf_version: str | None, server: str,
                server_tf_version: str | None) -> str | None:
    """The one-line warning when the model was written by a newer TensorFlow than the server's; None otherwise.

    `server` names the server as the user knows it: an image ("tensorflow/serving:2.20.0") or
    `embedded_server(version)`.
    """
    if model_server_gap(model_tf_version, server_tf_version) is None:
        return None
    return (f"model {model_name} version {model_version} was written by TensorFlow {model_tf_version}; "
            f"{server} is older: a SavedModel can use ops it does not know")


def image_tensorflow_version(image: str) -> str | None:
    """The TensorFlow release a TF Serving image runs, from its tag ("tensorflow/serving:2.20.0-gpu" ->
    "2.20.0"); None for a tag that names no release ("latest", "nightly") or no tag."""
    found = _IMAGE_RELEASE.search(image)
    return found[1] if found else None


def embedded_server(tensorflow_version: str) -> str:
    """How a warning names the embedded server running the SavedModel on TensorFlow."""
    return f"the embedded server's TensorFlow {tensorflow_version}"


def server_tensorflow(versions: Mapping[str, str]) -> tuple[str, str | None] | None:
    """(the server's name, its TensorFlow) from a server's recorded versions (`ServedEndpoint.versions`,
    `ServerLabel.versions`); None where no TensorFlow loads the model (the JAX or null backend) or
    the versions do not say which."""
    image = versions.get("image")
    if image:
        return image, image_tensorflow_version(image)
    tensorflow = versions.get("tensorflow")
    if versions.get("runtime", "tensorflow") != "tensorflow" or major_minor(tensorflow) is None:
        return None  # older embedded servers recorded no runtime: they ran TensorFlow
    return embedded_server(str(tensorflow)), tensorflow
