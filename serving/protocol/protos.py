"""TF Serving config messages that tensorflow-serving-api does not ship.

The pip package carries `ModelServerConfig` but not `BatchingParameters`
(tensorflow_serving/servables/tensorflow/session_bundle_config.proto) nor
`MonitoringConfig` (tensorflow_serving/config/monitoring_config.proto). They are
declared here with TF Serving's own package, message names, field names and field
numbers, so files written or parsed with them are byte- and text-compatible with
`tensorflow_model_server --batching_parameters_file` / `--monitoring_config_file`.

Not for: anything TF Serving does not define. Keep this a faithful mirror.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
    wrappers_pb2,  # noqa: F401  (registers wrappers.proto in the default pool)
)
from google.protobuf.message import Message

_PACKAGE = "tensorflow.serving"
_FILE_NAME = "mnist_serving_bench/tfs_config_mirror.proto"

_F = descriptor_pb2.FieldDescriptorProto

# (name, number, type, label, type_name) exactly as in TF Serving's .proto files.
_BATCHING_FIELDS = [
    ("max_batch_size", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.Int64Value"),
    ("batch_timeout_micros", 2, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.Int64Value"),
    ("max_enqueued_batches", 3, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.Int64Value"),
    ("num_batch_threads", 4, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.Int64Value"),
    ("thread_pool_name", 5, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.StringValue"),
    ("allowed_batch_sizes", 6, _F.TYPE_INT64, _F.LABEL_REPEATED, None),
    ("pad_variable_length_inputs", 7, _F.TYPE_BOOL, _F.LABEL_OPTIONAL, None),
    ("enable_large_batch_splitting", 8, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.BoolValue"),
    ("max_execution_batch_size", 9, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".google.protobuf.Int64Value"),
]

_PROMETHEUS_FIELDS = [
    ("enable", 1, _F.TYPE_BOOL, _F.LABEL_OPTIONAL, None),
    ("path", 2, _F.TYPE_STRING, _F.LABEL_OPTIONAL, None),
]

_MONITORING_FIELDS = [
    ("prometheus_config", 1, _F.TYPE_MESSAGE, _F.LABEL_OPTIONAL, ".tensorflow.serving.PrometheusConfig"),
]


def _add_message(file_proto: descriptor_pb2.FileDescriptorProto, name: str, fields: list) -> None:
    message = file_proto.message_type.add(name=name)
    for field_name, number, field_type, label, type_name in fields:
        field = message.field.add(name=field_name, number=number, type=field_type, label=label)
        if type_name:
            field.type_name = type_name


def _build_classes() -> dict[str, type[Message]]:
    pool = descriptor_pool.Default()
    try:
        file_desc = pool.FindFileByName(_FILE_NAME)
    except KeyError:
        file_proto = descriptor_pb2.FileDescriptorProto(
            name=_FILE_NAME, package=_PACKAGE, syntax="proto3",
            dependency=["google/protobuf/wrappers.proto"],
        )
        _add_message(file_proto, "BatchingParameters", _BATCHING_FIELDS)
        _add_message(file_proto, "PrometheusConfig", _PROMETHEUS_FIELDS)
        _add_message(file_proto, "MonitoringConfig", _MONITORING_FIELDS)
        file_desc = pool.Add(file_proto)
        file_desc = pool.FindFileByName(_FILE_NAME)
    return {
        name: message_factory.GetMessageClass(file_desc.message_types_by_name[name])
        for name in ("BatchingParameters", "PrometheusConfig", "MonitoringConfig")
    }


_CLASSES = _build_classes()
BatchingParameters = _CLASSES["BatchingParameters"]
PrometheusConfig = _CLASSES["PrometheusConfig"]
MonitoringConfig = _CLASSES["MonitoringConfig"]


def parse_text_file(path: str | Path, message_class: type[Message]) -> Message:
    """Parse a text-format proto file into `message_class`; raises ValueError with the file name."""
    text = Path(path).read_text()
    try:
        return text_format.Parse(text, message_class())
    except text_format.ParseError as exc:
        raise ValueError(f"{path}: not a valid {message_class.DESCRIPTOR.name} text proto: {exc}") from exc


def load_batching_parameters(path: str | Path):
    """Read a `--batching_parameters_file` as TF Serving does (text format)."""
    return parse_text_file(path, BatchingParameters)


def load_monitoring_config(path: str | Path):
    """Read a `--monitoring_config_file` as TF Serving does (text format)."""
    return parse_text_file(path, MonitoringConfig)


def load_model_server_config(path: str | Path):
    """Read a `--model_config_file` with TF Serving's own ModelServerConfig proto."""
    from tensorflow_serving.config import model_server_config_pb2

    return parse_text_file(path, model_server_config_pb2.ModelServerConfig)
