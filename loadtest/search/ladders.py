"""The batching tuner's candidates: each tuned field's ladder of values around TF Serving's advice, a profile
with one field moved (its dependants kept consistent), and how visits are named and keyed.

Not for: the tuner's search (`loadtest.search.tuning`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from serving.deploy.config import BatchingProfile, effective_profile_name, validate_profile
from serving.endpoint import Device

# The fields the ascent moves, in the order it moves them.
TUNED_FIELDS = ("batch_timeout_micros", "max_batch_size", "num_batch_threads", "max_enqueued_batches")
TIMEOUT_LADDER_MICROS = (0, 500, 1000, 2000, 5000, 10000)  # the advice: 0, then try 1-10 ms
OFF = BatchingProfile(name="off")

Ladders = Mapping[str, tuple[int, ...]]


def default_ladders(device: Device, cores: int, batch_size: int = 1) -> dict[str, tuple[int, ...]]:
    """Candidate values per field, around TF Serving's advice for the device.

    Threads: up to the cores (the CPU advice; more threads only oversubscribe the model's own
    thread pool), and 2 x cores on a GPU, where batch threads also overlap CPU work with kernels.
    max_batch_size never goes below the request batch size, which a smaller one would reject.
    """
    threads = {*_powers_of_two(1, cores), cores}
    if device == Device.GPU:
        threads.add(2 * cores)
    return {
        "batch_timeout_micros": TIMEOUT_LADDER_MICROS,
        "max_batch_size": tuple(size for size in _powers_of_two(8, 1024) if size >= batch_size) or (batch_size,),
        "num_batch_threads": tuple(sorted(threads)),
        "max_enqueued_batches": tuple(sorted({*_powers_of_two(1, max(16, 4 * cores)), cores})),
    }


def _powers_of_two(low: int, high: int) -> tuple[int, ...]:
    return tuple(2 ** n for n in range(math.ceil(math.log2(low)), math.floor(math.log2(high)) + 1))


def grid_size(start: BatchingProfile, ladders: Ladders) -> int:
    """Configurations in the full grid: every ladder value (and the start's) of every field."""
    return math.prod(len({*ladders[name], getattr(start, name)}) if ladders[name] else 1 for name in TUNED_FIELDS)


def neighbour(ladder: tuple[int, ...], value: int, upward: bool) -> int | None:
    """The next ladder value above (or below) `value`, which need not be on the ladder itself."""
    if upward:
        return min((v for v in ladder if v > value), default=None)
    return max((v for v in ladder if v < value), default=None)


def with_field(profile: BatchingProfile, name: str, value: int) -> BatchingProfile:
    """`profile` with one field changed, kept consistent: the sizes follow a new max_batch_size.

    allowed_batch_sizes keeps its entries below the new maximum and ends with it; a
    max_execution_batch_size that matched the old maximum follows it, and never exceeds the new one.
    """
    change: dict[str, Any] = {name: value}
    changed = replace(profile, **change)
    if name == "max_batch_size":
        changed = replace(changed, allowed_batch_sizes=_sizes_up_to(profile.allowed_batch_sizes, value),
                          max_execution_batch_size=_execution_size(profile, value))
    validate_profile(changed)
    return changed


def _sizes_up_to(sizes: tuple[int, ...], maximum: int) -> tuple[int, ...]:
    return (*(size for size in sizes if size < maximum), maximum) if sizes else ()


def _execution_size(profile: BatchingProfile, maximum: int) -> int | None:
    execution = profile.max_execution_batch_size
    if execution is None:
        return None
    return maximum if execution == profile.max_batch_size else min(execution, maximum)


def tuned_fields(start: BatchingProfile, profile: BatchingProfile) -> dict[str, Any]:
    """The tuned fields whose values differ from the start's."""
    return {name: getattr(profile, name) for name in TUNED_FIELDS if getattr(profile, name) != getattr(start, name)}


def labelled(start: BatchingProfile, profile: BatchingProfile) -> BatchingProfile:
    """`profile` named after the start plus every tuned field that differs: `cpu+max_batch_size=512`."""
    return replace(profile, name=effective_profile_name(start.name, tuned_fields(start, profile)))


def check_start(start: BatchingProfile, ladders: Ladders) -> None:
    """The start must batch, be valid, and set every field the ascent moves."""
    if not start.enable_batching:
        raise ValueError(f"the start profile {start.name!r} turns batching off; start from the cpu or gpu profile")
    validate_profile(start)
    unset = [name for name in TUNED_FIELDS if ladders[name] and getattr(start, name) is None]
    if unset:
        raise ValueError(f"the start profile {start.name!r} leaves {', '.join(unset)} unset; "
                         "set it in serving.toml or give it an empty ladder")


def parameters_key(profile: BatchingProfile) -> tuple:
    return tuple(sorted((name, tuple(value) if isinstance(value, list) else value)
                        for name, value in profile.parameters().items()))


# ---------------------------------------------------------------- the search
