"""How results name the server and the runtime that ran the model."""

from __future__ import annotations

from serving.endpoint import ServerKind, runtime_display_name, server_with_runtime


def test_a_tf_serving_container_is_named_tf_serving_whatever_runtime_was_recorded():
    assert runtime_display_name(ServerKind.CONTAINER, None) == "TF Serving"
    assert server_with_runtime(ServerKind.CONTAINER, runtime_display_name(ServerKind.CONTAINER, "jax")) == \
        "TF Serving container"


def test_the_embedded_server_is_named_with_the_runtime_its_ready_line_gave():
    jax = runtime_display_name(ServerKind.EMBEDDED, "jax")
    assert jax == "JAX, the same weights (.keras)" and "TF Serving" not in jax
    assert server_with_runtime(ServerKind.EMBEDDED, jax) == "embedded server (JAX, the same weights (.keras))"
    assert runtime_display_name(ServerKind.EMBEDDED, "tensorflow") == "TensorFlow, SavedModel"
    assert runtime_display_name(ServerKind.EMBEDDED, "none (null backend)") == "no model (null backend)"


def test_a_result_without_a_runtime_says_so():
    assert runtime_display_name(ServerKind.EMBEDDED, None) == "runtime not recorded"
    assert runtime_display_name(ServerKind.EMBEDDED, "onnx") == "onnx"  # an unknown name is shown as recorded
