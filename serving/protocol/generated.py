"""TensorFlow's generated protobuf modules without TensorFlow's runtime.

The TF Serving API (`tensorflow_serving.apis.*_pb2`) imports TensorFlow's own generated modules
(`tensorflow.core.framework.tensor_pb2`, ...). Importing those the ordinary way runs
`tensorflow/__init__.py`, which loads the whole runtime: ~5 s and ~500 MB per process, paid by
every load-generator process although it only builds and reads protobuf messages.

`use_protos_without_runtime()` registers `tensorflow` as a bare package over the installed
directory, so `tensorflow.core...._pb2` imports find their files and nothing else of TensorFlow
runs. Only for processes that never use TensorFlow itself (the Locust processes): afterwards
`tensorflow.<anything but its protos>` is missing in that process.

Not for: converting tensors (`serving.protocol.tensors`) or TF Serving's config protos
(`serving.protocol.protos`).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

PACKAGE = "tensorflow"


def use_protos_without_runtime() -> bool:
    """Make TensorFlow's generated protos importable without its runtime; False when TensorFlow was
    already imported (then nothing changes) or is not installed (its protos then cannot be found)."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return False
    package = types.ModuleType(PACKAGE, "TensorFlow's generated protos only (serving.protocol.generated)")
    package.__path__ = list(spec.submodule_search_locations)
    # A spec of its own (no loader), so importlib.util.find_spec("tensorflow") answers instead of raising:
    # PyTorch's compiler looks every known library up that way when it is imported.
    package.__spec__ = importlib.machinery.ModuleSpec(PACKAGE, None, is_package=True)
    package.__spec__.submodule_search_locations = list(spec.submodule_search_locations)
    sys.modules[PACKAGE] = package
    return True
