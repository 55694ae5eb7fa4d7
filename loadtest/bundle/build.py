"""The offline device bundle: everything a lent accelerator machine needs to run the comparison.

Such a machine (`/work/.library/device/KINDS.md`: one NVIDIA GPU, Python 3.12, JAX with CUDA,
no TensorFlow, no network, files only as a copy of the tree plus ≤ 64 MiB carried) gets
`build/device-bundle/`:

- `project/`: this project's packages (`model_export`, `serving`, `loadtest`) and the newest
  exported model version (its SavedModel's signatures and `model.keras`) with the sample digits;
- `protos/`: TensorFlow's and TF Serving's generated `_pb2` modules that the server and the load
  generator import, copied from the installed packages (never committed): with no
  `tensorflow/__init__.py` beside them, nothing of TensorFlow's runtime can load;
- `wheels/`: wheels for the machine's Python and platforms (`WheelPlatforms`) of what the machine's image lacks
  (Keras and its small dependencies, Locust and its, hdrhistogram, ...), resolved by pip against
  this project's lock file; packages the image already has (`IMAGE_PACKAGES`) are left out, except
  `KEEP_ANYWAY` (protobuf: TF's generated code needs a runtime at least as new as its own);
- `run.py` (`loadtest.bundle.device_run`): installs the wheels with no network, plans the capacity
  searches to a time budget, runs them, and writes results, the report and a profile (py-spy's wheel
  is one of the bundle's);
- `manifest.json`: what is inside, for which Python, and its size;
- `project/SOURCE.json`: the commit and work-tree state it was built from (`source_record`).

Not for: running anything (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from model_export.provenance import SOURCE_RECORD

REPO = Path(__file__).resolve().parents[2]
LIMIT_BYTES = 64 << 20  # what the device tool carries per call
PACKAGES = ("model_export", "serving", "loadtest")
TOP_FILES = ("pyproject.toml", "requirements.lock")
MODEL_NAME = "mnist"
CHANGED_LISTED = 20  # changed files named in the source record (all are counted)
# What the bundle installs: the project's own dependencies (pyproject.toml) less what only the
# TensorFlow side needs and the machine's own PyTorch (its CUDA build; the build machines' is CPU-only),
# plus Keras (the jax and torch backends) and protobuf (TF's protos without TF); versions from the lock file.
NOT_ON_THE_DEVICE = frozenset({"tensorflow", "tensorflow-serving-api", "mlxtend", "jax", "torch"})
EXTRA_REQUIREMENTS = ("keras", "protobuf")
PROTO_ROOTS = ("tensorflow", "tensorflow_serving")
# Not imported while listing the protos: Locust's file patches the standard library with gevent on
# import (nor are `__main__` modules, which run).
SKIPPED_IN_PROBE = ("loadtest.load.locustfile",)
# The lent machines' image ('cuda'), as listed in the device tool's KINDS.md on 2026-11-17.
IMAGE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cycler cython diffrax einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py
hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jaxlib
jaxtyping jinja2 joblib kiwisolver lazy-loader linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpmath msgpack multidict multipledispatch
mypy-extensions nanobind narwhals networkx ninja numba numpy numpyro nvidia-ml-py onnx onnxruntime optax
opt-einsum orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil pyyaml regex
requests rich safetensors scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece setuptools
shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard tensorstore threadpoolctl
tifffile tokenizers toolz torch tqdm transformers treescope triton typer typing-extensions typing-inspect
urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())
KEEP_ANYWAY = frozenset({"protobuf"})


class BundleError(RuntimeError):
    """The bundle cannot be built; the message says why."""


@dataclass(frozen=True)
class WheelPlatforms:
    """What the bundle's wheels are for: the machine's Python and platforms, the packages its image already has
    (left out), and the size the bundle may reach."""

    python_version: str = "3.12"
    platforms: tuple[str, ...] = ("manylinux1_x86_64", "manylinux_2_5_x86_64",  # py-spy's
                                  "manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_24_x86_64",
                                  "manylinux_2_26_x86_64", "manylinux_2_27_x86_64", "manylinux_2_28_x86_64")
    image_packages: frozenset[str] = IMAGE_PACKAGES  # left out: the machine's image already has them
    limit_bytes: int | None = LIMIT_BYTES  # None: a self-contained bundle for a bare Python, any size


@dataclass
class Manifest:
    python_version: str
    model_version: int
    wheels: list[str] = field(default_factory=list)
    left_out_for_the_image: list[str] = field(default_factory=list)
    protos: int = 0
    size_bytes: int = 0
    source: dict = field(default_factory=dict)  # also `project/SOURCE.json`


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build(out: Path, models_dir: Path, wheel_platforms: WheelPlatforms = WheelPlatforms()) -> Manifest:
    """Write the bundle into `out` (replacing an older bundle there); its manifest."""
    if out.exists():
        shutil.rmtree(out)
    (out / "project").mkdir(parents=True)
    copy_project(out / "project")
    source = source_record()
    (out / "project" / SOURCE_RECORD).write_text(json.dumps(source, indent=2) + "\n")
    version = copy_model(models_dir, out / "project" / "models")
    protos = copy_protos(out / "protos")
    kept, left_out = download_wheels(out / "wheels", wheel_platforms)
    shutil.copy2(Path(__file__).with_name("device_run.py"), out / "run.py")
    manifest = Manifest(wheel_platforms.python_version, version, kept, left_out, protos, source=source)
    manifest.size_bytes = tree_size(out)
    (out / "manifest.json").write_text(json.dumps(asdict(manifest), indent=2) + "\n")
    limit = wheel_platforms.limit_bytes
    if limit is not None and manifest.size_bytes > limit:
        raise BundleError(f"{out} is {manifest.size_bytes / 2**20:.1f} MiB, over the {limit >> 20} MiB "
                          f"a device call carries")
    return manifest


def copy_project(dest: Path) -> None:
    """The project's packages as git tracks them (plus files not yet committed, never ignored ones)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", *PACKAGES, *TOP_FILES],
                            cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:
        raise BundleError(f"git ls-files failed in {REPO}: {listed.stderr.strip()}")
    for relative in listed.stdout.split():
        source = REPO / relative
        if source.is_file():
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / relative)


def source_record() -> dict:
    """What the bundle was built from (`model_export.provenance` reads it back in the bundle's copy, so
    every result names this source rather than whatever checkout the copy lands in): the commit, whether
    the work tree differed from it and the first files that did, and the build's UTC time."""
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, capture_output=True, text=True)
    changed = [line[3:] for line in status.stdout.splitlines()] if status.returncode == 0 else []
    return {"commit": commit.stdout.strip() if commit.returncode == 0 else "unknown",
            "dirty": bool(changed) if status.returncode == 0 else None,
            "changed": changed[:CHANGED_LISTED], "changed_count": len(changed),
            "built_utc": datetime.now(UTC).isoformat(timespec="seconds")}


def copy_model(models_dir: Path, dest: Path) -> int:
    """The newest exported version (it must have `model.keras`, the jax backend's weights) and the samples."""
    base = models_dir / MODEL_NAME
    versions = sorted(int(p.name) for p in base.glob("[0-9]*") if p.is_dir()) if base.is_dir() else []
    if not versions:
        raise BundleError(f"no exported model under {base}: run `make export` first")
    newest = base / str(versions[-1])
    if not (newest / "model.keras").is_file():
        raise BundleError(f"{newest} has no model.keras (exported before the jax backend): run `make export`")
    samples = models_dir / f"{MODEL_NAME}-samples.npz"
    if not samples.is_file():
        raise BundleError(f"no sample digits at {samples}: run `make export`")
    shutil.copytree(newest, dest / MODEL_NAME / newest.name)
    shutil.copy2(samples, dest / samples.name)
    return versions[-1]


def copy_protos(dest: Path) -> int:
    """The generated modules a TensorFlow-free server and load generator import: every module of the
    TF Serving API (some are imported lazily) and what it and this project's modules import, found
    by importing them all in a child process that has no TensorFlow runtime (it fails if one of them
    loads it); their count."""
    probe = ("import importlib, json, pkgutil, sys\n"
             "from serving.protocol.generated import use_protos_without_runtime\n"
             "use_protos_without_runtime()\n"
             "import serving, loadtest, tensorflow_serving\n"
             "for package in (serving, loadtest, tensorflow_serving):\n"
             "    for module in pkgutil.walk_packages(package.__path__, package.__name__ + '.'):\n"
             f"        if module.name not in {SKIPPED_IN_PROBE!r} and not module.name.endswith('.__main__'):\n"
             "            importlib.import_module(module.name)\n"
             f"roots = {PROTO_ROOTS!r}\n"
             "assert 'tensorflow.python' not in sys.modules, 'a module loaded the TensorFlow runtime'\n"
             "print(json.dumps({n: m.__file__ for n, m in sys.modules.items()\n"
             "                  if n.split('.')[0] in roots and getattr(m, '__file__', None)}))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(f"could not list TensorFlow's generated protos: {done.stderr.strip()[-500:]}")
    files = json.loads(done.stdout.strip().splitlines()[-1])
    for name, path in files.items():
        relative = Path(*name.split(".")).with_suffix(".py")
        if Path(path).name == "__init__.py":
            relative = relative.with_suffix("") / "__init__.py"
        if relative == Path("tensorflow", "__init__.py"):
            continue  # never TensorFlow's own package: importing it would load the runtime
        (dest / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest / relative)
    return len(files)


def requirements() -> list[str]:
    """The distributions to install: pyproject's dependencies by name, less `NOT_ON_THE_DEVICE`."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = [normalized(re.split(r"[\[<>=!~; ]", spec, maxsplit=1)[0]) for spec in project["dependencies"]]
    return sorted({*(n for n in names if n not in NOT_ON_THE_DEVICE), *EXTRA_REQUIREMENTS})


def download_wheels(dest: Path, wheel_platforms: WheelPlatforms) -> tuple[list[str], list[str]]:
    """pip resolves `requirements()` for `wheel_platforms` against the lock, then what the image has goes (a
    self-contained bundle also gets JAX, which the image has)."""
    wanted = (*requirements(), *(() if wheel_platforms.image_packages else ("jax",)))
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--implementation", "cp",
               "--python-version", wheel_platforms.python_version,
               *(f"--platform={p}" for p in wheel_platforms.platforms),
               "--platform=any", "-c", str(REPO / "requirements.lock"), "-d", str(dest), *wanted]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(f"pip download failed: {done.stderr.strip()[-800:]}")
    kept, left_out = [], []
    for wheel in sorted(dest.glob("*.whl")):
        name = normalized(wheel.name.split("-")[0])
        if name in wheel_platforms.image_packages and name not in KEEP_ANYWAY:
            wheel.unlink()
            left_out.append(name)
        else:
            kept.append(wheel.name)
    return kept, left_out


def tree_size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
