"""What a request carries for any model: inputs made from the served model's signature, or read from a file.

Two input sources share one small interface (`InputSource`): how many distinct requests cover its
rows at a request batch size, and the i-th request's inputs with what to check its answer against.
The MNIST demo's sample digits (`loadtest.load.client.Samples`) are one; `ModelInputs` is the other,
for any TF Serving model, made from its signature (`loadtest.load.signature`):

- `random` (seeded): floats in [0, 1), integers in `int_range` (default [0, 100)), bools, strings as
  8 random lowercase bytes; `zeros`: zeros, False, empty strings;
- a `.npz` of the user's own samples: one array per input name, rows = samples, and optional
  `expected:<output name>` arrays of the outputs the model should give (then accuracy is measured).

Shapes: an input whose first dimension is `-1` is batched (the request batch fills it; rows cycle
through the source's rows); other `-1` dimensions become 1 unless `--input-shape NAME:DIMS` gives
them (DIMS without the batch dimension, e.g. `features:4,4`); an input with a fixed first dimension
is sent as it is in every request.

Not for: encoding requests (`loadtest.load.client`) or judging answers (`loadtest.load.outputs`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from loadtest.evidence.vocab import Check, InputKind

if TYPE_CHECKING:  # the signature module imports gRPC and TensorFlow's protos: the plan needs neither
    from loadtest.load.signature import Signature
    from serving.protocol.signatures import TensorSpec

DEMO_MODEL = "mnist"  # the model whose sample digits `auto` means
GENERATED_ROWS = 64  # distinct rows made per input for random/zeros data
STRING_BYTES = 8
EXPECTED_PREFIX = "expected:"
FLOAT_RTOL, FLOAT_ATOL = 1e-4, 1e-5  # "close" for float outputs (batching changes rounding)


class InputError(ValueError):
    """Inputs that cannot be made or read; the message names the file, input and what was expected."""


@dataclass(frozen=True)
class RequestInputs:
    """One request's inputs (alias -> array) and what its answer is checked against."""

    inputs: dict[str, np.ndarray]
    rows: int  # the request batch
    labels: np.ndarray | None = None  # MNIST: the true classes
    expected: np.ndarray | None = None  # MNIST: the exported model's own classes
    expected_outputs: dict[str, np.ndarray] = field(default_factory=dict)  # any model: from the user's .npz


class InputSource(Protocol):
    """Where requests come from: the MNIST sample digits or inputs made for any model."""

    def variants(self, batch_size: int) -> int:
        """Distinct requests of `batch_size` rows that send every row of the source at least once."""
        ...

    def request(self, index: int, batch_size: int) -> RequestInputs:
        """The `index`-th request's inputs, wrapping around the source's rows."""
        ...


@dataclass(frozen=True)
class InputOptions:
    """How to make inputs: `data` is "random", "zeros" or the path of an .npz."""

    data: str = "random"
    seed: int = 0
    int_range: tuple[int, int] = (0, 100)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # input -> dims after the batch dim
    rows: int = GENERATED_ROWS


def resolve_input_kind(input_data: str, model_name: str) -> InputKind:
    """Where the inputs come from: `auto` is the MNIST sample digits for the demo model, random inputs made
    from the signature for any other; samples, random and zeros as said; anything else is an .npz path."""
    if input_data == InputKind.AUTO:
        return InputKind.SAMPLES if model_name == DEMO_MODEL else InputKind.RANDOM
    if input_data in (InputKind.SAMPLES, InputKind.RANDOM, InputKind.ZEROS):
        return InputKind(input_data)
    return InputKind.NPZ


def effective_check(check: str, kind: InputKind) -> Check:
    """The check the answers get: MNIST's `classes` means `outputs` for inputs made for any model."""
    if check == Check.CLASSES and kind != InputKind.SAMPLES:
        return Check.OUTPUTS
    return Check(check)


def parse_int_range(text: str) -> tuple[int, int]:
    """`LO,HI` (HI excluded) -> (LO, HI)."""
    try:
        low, high = (int(part) for part in str(text).split(","))
    except ValueError:
        raise InputError(f"int range {text!r}: expected LO,HI (integers, HI excluded), e.g. 0,100") from None
    if high <= low:
        raise InputError(f"int range {text!r}: HI must be above LO")
    return low, high


def parse_shapes(items: tuple[str, ...] | list[str] | str) -> dict[str, tuple[int, ...]]:
    """`("features:4,4", "ids:8")` (or one string joined by ';') -> {"features": (4, 4), "ids": (8,)}."""
    if isinstance(items, str):
        items = [item for item in items.split(";") if item.strip()]
    shapes = {}
    for item in items:
        name, colon, dims = item.partition(":")
        try:
            parsed = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError:
            parsed = (-1,)
        if not colon or not name.strip() or any(d < 1 for d in parsed):
            raise InputError(f"input shape {item!r}: expected NAME:DIMS with positive dims, e.g. features:4,4")
        shapes[name.strip()] = parsed
    return shapes


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Every array of the user's .npz; an InputError (one line) for a file that is not one."""
    try:
        with np.load(Path(path), allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"input data {path}: not a readable .npz of arrays ({type(exc).__name__}: {exc})") from None
    if not arrays:
        raise InputError(f"input data {path}: holds no arrays")
    return arrays


def options_for(kind: InputKind, input_data: str, seed: int, int_range: str,
                shapes: tuple[str, ...] | list[str]) -> InputOptions:
    """The input flags (`--input-data` resolved to `kind`, seed, `LO,HI`, `NAME:DIMS`) as `InputOptions`: an
    .npz by its absolute path, anything else by its kind; an InputError names a bad range or shape."""
    data = str(Path(input_data).resolve()) if kind == InputKind.NPZ else kind.value
    return InputOptions(data, seed, parse_int_range(int_range), parse_shapes(shapes))


def check_input_files(kind: InputKind, input_data: str, samples: str) -> None:
    """The inputs' files are there and readable before any server or Locust starts (what the model needs is
    checked against its signature once it answers); an InputError names the file."""
    if kind == InputKind.SAMPLES and not Path(samples).exists():
        raise InputError(f"sample digits {samples} not found; run `make export` first (or --input-data random)")
    if kind == InputKind.NPZ:
        if not Path(input_data).is_file():
            raise InputError(f"input data {input_data} not found (give random, zeros or an .npz)")
        read_npz(Path(input_data))


# ----------------------------------------------------------------------------- shapes and values


def row_shape(info: TensorSpec, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
    """A batched input's shape after the batch dimension, or an unbatched input's whole shape."""
    known = None if info.shape is None else (info.shape[1:] if info.batched else info.shape)
    if info.alias in shapes:
        dims = shapes[info.alias]
        if known is not None and (len(dims) != len(known) or any(k not in (-1, d) for k, d in zip(known, dims))):
            raise InputError(f"--input-shape {info.alias}:{','.join(map(str, dims))} does not fit the signature's "
                             f"{info.describe()} (give the dims after the batch dimension)")
        return dims
    return () if known is None else tuple(1 if d == -1 else d for d in known)


def random_values(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...],
                  int_range: tuple[int, int]) -> np.ndarray:
    """Random values of `dtype`: floats in [0, 1), integers in `int_range` (clipped to the dtype),
    bools, or strings of 8 lowercase letters."""
    if dtype.kind == "f":
        return rng.random(shape).astype(dtype)
    if dtype.kind in "iu":
        limits = np.iinfo(dtype)
        low, high = max(int_range[0], int(limits.min)), min(int_range[1], int(limits.max) + 1)
        if high <= low:
            raise InputError(f"int range {list(int_range)} holds no {dtype.name} value")
        return rng.integers(low, high, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    letters = rng.integers(ord("a"), ord("z") + 1, size=(*shape, STRING_BYTES), dtype=np.uint8)
    return _bytes_array(letters.reshape(-1, STRING_BYTES), shape)


def zero_values(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    return np.full(shape, b"", dtype=object) if dtype.kind == "O" else np.zeros(shape, dtype=dtype)


def _bytes_array(rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(rows), dtype=object)
    out[:] = [row.tobytes() for row in rows]
    return out.reshape(shape)


# ----------------------------------------------------------------------------- the source


@dataclass(frozen=True)
class ModelInputs:
    """Inputs for any model: `batched` inputs hold N rows each, `fixed` ones are sent as they are."""

    signature: Signature
    batched: dict[str, np.ndarray]
    fixed: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]  # output alias -> N rows of expected values
    row_count: int

    def variants(self, batch_size: int) -> int:
        return -(-self.row_count // batch_size)

    def request(self, index: int, batch_size: int) -> RequestInputs:
        rows = (np.arange(batch_size) + index * batch_size) % self.row_count
        inputs = {name: values[rows] for name, values in self.batched.items()}
        return RequestInputs({**inputs, **self.fixed}, batch_size,
                             expected_outputs={name: values[rows] for name, values in self.expected.items()})


def model_inputs(signature: Signature, options: InputOptions) -> ModelInputs:
    """Inputs for `signature` as `options` say: random, zeros, or the arrays of an .npz."""
    for name in options.shapes:
        if name not in signature.inputs:
            raise InputError(f"--input-shape names {name!r}, not an input of {signature.describe()}")
    if options.data in ("random", "zeros"):
        return generated_inputs(signature, options)
    return npz_inputs(signature, Path(options.data), options)


def generated_inputs(signature: Signature, options: InputOptions) -> ModelInputs:
    rng = np.random.default_rng(options.seed)
    batched: dict[str, np.ndarray] = {}
    fixed: dict[str, np.ndarray] = {}
    for name, info in signature.inputs.items():
        shape = ((options.rows,) if info.batched else ()) + row_shape(info, options.shapes)
        values = (random_values(rng, info.numpy_dtype, shape, options.int_range) if options.data == "random"
                  else zero_values(info.numpy_dtype, shape))
        (batched if info.batched else fixed)[name] = values
    return ModelInputs(signature, batched, fixed, {}, options.rows if batched else 1)


def npz_inputs(signature: Signature, path: Path, options: InputOptions) -> ModelInputs:
    """The user's rows: one array per input name, `expected:<output>` arrays optional."""
    arrays = read_npz(path)
    missing = sorted(set(signature.inputs) - set(arrays))
    if missing:
        raise InputError(f"input data {path} lacks input(s) {missing} of {signature.describe()} "
                         f"(it holds {sorted(arrays)})")
    unknown = sorted(k for k in arrays if k.startswith(EXPECTED_PREFIX)
                     and k.removeprefix(EXPECTED_PREFIX) not in signature.outputs)
    if unknown:
        raise InputError(f"input data {path}: {unknown} name no output of {signature.describe()}")
    batched: dict[str, np.ndarray] = {}
    fixed: dict[str, np.ndarray] = {}
    for name, info in signature.inputs.items():
        (batched if info.batched else fixed)[name] = _as_input(arrays[name], info, path, options)
    expected = {k.removeprefix(EXPECTED_PREFIX): _as_sent(v, signature.outputs[k.removeprefix(EXPECTED_PREFIX)])
                for k, v in arrays.items() if k.startswith(EXPECTED_PREFIX)}
    counts = {name: len(values) for name, values in {**batched, **expected}.items()}
    if len(set(counts.values())) > 1:
        raise InputError(f"input data {path}: arrays hold different numbers of rows {counts}")
    if 0 in counts.values():
        raise InputError(f"input data {path}: arrays hold no rows")
    return ModelInputs(signature, batched, fixed, expected, next(iter(counts.values()), 1))


def _as_sent(values: np.ndarray, info: TensorSpec) -> np.ndarray:
    """An array of the user's as the signature's dtype (strings as bytes objects)."""
    if info.numpy_dtype.kind == "O":
        if values.dtype.kind not in "SUO":
            raise InputError(f"{info.alias}: {values.dtype} values for a string tensor")
        return np.array([v.encode() if isinstance(v, str) else bytes(v) for v in values.ravel()],
                        dtype=object).reshape(values.shape)
    if not np.can_cast(values.dtype, info.numpy_dtype, casting="same_kind") and not (
            values.dtype.kind in "iub" and info.numpy_dtype.kind in "iuf"):
        raise InputError(f"{info.alias}: {values.dtype} values cannot be sent as {info.describe()}")
    return values.astype(info.numpy_dtype)


def _as_input(values: np.ndarray, info: TensorSpec, path: Path, options: InputOptions) -> np.ndarray:
    """One input's array from the file, its dtype and shape checked against the signature."""
    sent = _as_sent(values, info)
    wanted = row_shape(info, options.shapes) if info.alias in options.shapes else None
    got = sent.shape[1:] if info.batched else sent.shape
    known = None if info.shape is None else (info.shape[1:] if info.batched else info.shape)
    fits = (wanted is None or got == wanted) and (known is None or (
        len(got) == len(known) and all(k in (-1, g) for k, g in zip(known, got))))
    if sent.ndim == 0 and info.batched or not fits:
        raise InputError(f"input data {path}: {info.alias} has shape {list(values.shape)}, which does not fit "
                         f"{info.describe()} (rows first)")
    return sent


def input_provenance(data: str, seed: int, int_range: tuple[int, int], shapes: dict) -> dict:
    """What a result records of its inputs: how they were made, or which file (and its sha256)."""
    shapes_text = {name: list(dims) for name, dims in shapes.items()}
    if data in ("random", "zeros"):
        made = {"source": data, "input_shapes": shapes_text}
        return {**made, "seed": seed, "int_range": list(int_range)} if data == "random" else made
    path = Path(data)
    return {"source": "npz", "path": str(path.resolve()), "sha256": file_sha256(path) if path.is_file() else None,
            "input_shapes": shapes_text}
