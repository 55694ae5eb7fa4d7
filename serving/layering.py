"""The one settings-layering mechanism: dataclass defaults -> TOML file -> environment -> command line.

Both configurations a user tunes are layered with it: the serving config (`serving/serving.toml`,
`SERVING_*` variables, `mnist-bench serve` flags) and the load plans (`loadtest/plans/*.toml`,
`LOADTEST_*` variables, `mnist-bench loadtest` flags). Every layer is a nested dict shaped like
the TOML file; later layers win key by key (`merge`), and the merged dict is turned into frozen
dataclasses once (`typed`), so unknown keys and values of the wrong type fail with one line
naming the field, whichever layer they came from.

Not for: what the settings mean or their ranges (each config validates its own records).
"""

from __future__ import annotations

import dataclasses
import enum
import tomllib
import types
import typing
from collections.abc import Mapping
from functools import reduce
from pathlib import Path
from typing import Any, TypeVar, cast

T = TypeVar("T")


class SettingsError(ValueError):
    """A settings layer that cannot be used; the message names the file, variable or field."""


def read_toml(path: str | Path, what: str) -> dict:
    """The file layer: a TOML file as a dict; `what` names it in errors ("plan file", ...)."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise SettingsError(f"{what} {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{what} {path} is not valid TOML: {exc}") from None


def merge(base: Mapping, top: Mapping) -> dict:
    """`top` over `base`, key by key: nested tables merge, anything else is replaced."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def layered(*layers: Mapping) -> dict:
    """All layers merged, later wins."""
    return reduce(merge, layers, {})


class Sourced(str):
    """A string value that remembers where it came from (an environment variable), for errors."""

    source: str

    def __new__(cls, value: str, source: str) -> Sourced:
        text = super().__new__(cls, value)
        text.source = source
        return text


def env_layer(env: Mapping[str, str], variables: Mapping[str, tuple[str, ...]]) -> dict:
    """The environment layer: each set, non-empty variable placed at its key path.

    `variables` maps a variable name to where its value goes, e.g.
    `{"LOADTEST_MEASURE_S": ("run", "measure_s")}`. Values stay strings; `typed` converts them.
    """
    layer: dict = {}
    for name, path in variables.items():
        if env.get(name):
            node = layer
            for key in path[:-1]:
                node = node.setdefault(key, {})
            node[path[-1]] = Sourced(env[name], name)
    return layer


def field_variables(cls: type, prefix: str, section: tuple[str, ...] = ()) -> dict[str, tuple[str, ...]]:
    """`PREFIX_<FIELD>` for every field of a dataclass, placed under `section`."""
    return {f"{prefix}_{f.name.upper()}": (*section, f.name) for f in dataclasses.fields(cls)}


def typed(cls: type[T], values: Mapping[str, Any], section: str) -> T:
    """A dataclass from one merged table: unknown keys refused, strings converted to the field's type."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cast(Any, cls))}
    unknown = set(values) - known
    if unknown:
        raise SettingsError(f"unknown [{section}] field(s) {sorted(unknown)}; expected {sorted(known)}")
    converted = {name: _convert(value, hints[name], f"[{section}] {name}") for name, value in values.items()}
    try:
        return cls(**converted)
    except TypeError as exc:
        raise SettingsError(f"[{section}]: {exc}") from None


def _convert(value: Any, hint: Any, where: str) -> Any:
    """A string from the environment or command line as the field's scalar type; lists as tuples."""
    if isinstance(value, list):
        return tuple(value)
    if not isinstance(value, str):
        return value
    where = getattr(value, "source", where)
    value = str(value)
    kinds = [k for k in _scalar_kinds(hint) if k is not str]
    enums = [k for k in kinds if issubclass(k, enum.Enum)]
    if enums:
        return _as_enum(value, enums[0], where)
    if not kinds or str in _scalar_kinds(hint):
        return value
    for kind in kinds:
        try:
            return parse_bool(value) if kind is bool else kind(value)
        except ValueError:
            continue
    raise SettingsError(f"{where}={value!r} is not a {' or '.join(k.__name__ for k in kinds)}")


def _scalar_kinds(hint: Any) -> list[type]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return [k for arg in typing.get_args(hint) for k in _scalar_kinds(arg)]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return [hint]
    return [hint] if hint in (bool, int, float, str) else []


def _as_enum(value: str, kind: type[enum.Enum], where: str) -> enum.Enum:
    try:
        return kind(value)
    except ValueError:
        raise SettingsError(f"{where}={value!r}; choose from {[m.value for m in kind]}") from None


def parse_bool(text: str) -> bool:
    """true/false as written in a file, a variable or a flag (also 1/0, yes/no, on/off); ValueError else."""
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")
