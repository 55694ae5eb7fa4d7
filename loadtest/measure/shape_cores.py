"""Replica shapes: which cores a server of k cores gets in a shape sweep, and which shapes this machine holds.

A shape sweep (`capacity --shapes 1,2,4` or `auto`, `[capacity] shapes`) measures one configuration as replicas
of k cores each: the server pinned to k cores, one gRPC frontend per core (the embedded server's default where
it is pinned), a TF Serving container's cpuset. The load generator keeps cores of its own where the machine has
enough: its pinned `loadgen_cpus`; else the cores beside a pinned server's; else the last quarter of the
machine's (at least one). A shape takes the server's cores first, then the load generator's: a shape that needed
some of those `shares_loadgen`, and its capacity is a lower bound of what k cores alone serve.

`auto`: 1, 2, 4, ... up to the server's cores; where those give one shape only (a 2-core machine), the next one
too, sharing the load generator's cores. A shape larger than the machine is refused, by name, not measured.

Not for: starting the servers (`loadtest.measure.servers`) or pricing shapes (`loadtest.report`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.evidence.search_tag import ShapeTag
from serving.deploy.process import cpu_list

AUTO = "auto"


@dataclass(frozen=True)
class ReplicaShape:
    """A server of `cores` cores: pinned to `cpus`; `shares_loadgen` where some are the load generator's too."""

    cores: int
    cpus: str  # a `taskset -c` list, "0-1"
    shares_loadgen: bool = False

    def tag(self, family: str) -> ShapeTag:
        return ShapeTag(family, self.cores, self.cpus, self.shares_loadgen)

    def describe(self) -> str:
        shared = ", sharing the load generator's cores: a lower bound" if self.shares_loadgen else ""
        return f"{self.cores} core{'' if self.cores == 1 else 's'} (cores {self.cpus}{shared})"


@dataclass(frozen=True)
class ShapePlan:
    """The shapes a sweep measures, the load generator's cores, and the shapes asked for that do not fit."""

    shapes: tuple[ReplicaShape, ...]
    loadgen_cpus: str  # the load generator's pinned cores during the sweep
    refused: tuple[str, ...] = ()  # "8 cores: this machine gives 2"

    def lines(self) -> list[str]:
        measured = "; ".join(s.describe() for s in self.shapes)
        out = [f"replica shapes: {measured}; the load generator on cores {self.loadgen_cpus}"]
        return out + [f"replica shape not measured: {why}" for why in self.refused]


def parse_shapes(text: str) -> tuple[int, ...] | str:
    """`auto`, or `1,2,4` as cores per replica, smallest first; ValueError naming what is wrong."""
    if text.strip().lower() == AUTO:
        return AUTO
    try:
        shapes = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise ValueError(f"--shapes {text!r}: expected auto or CORES,CORES,... (e.g. 1,2,4)") from None
    if not shapes or shapes[0] < 1:
        raise ValueError(f"--shapes {text!r}: expected auto or positive core counts (e.g. 1,2,4)")
    return shapes


def machine_cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


def split_cores(machine: Sequence[int], server_cpus: str, loadgen_cpus: str) -> tuple[list[int], list[int]]:
    """(the server's cores, the load generator's), in the order shapes take them."""
    cores = sorted(machine)
    if loadgen_cpus:
        loadgen = sorted(cpu_list(loadgen_cpus))
    elif server_cpus:
        loadgen = [c for c in cores if c not in cpu_list(server_cpus)] or cores[-1:]
    else:
        loadgen = cores[-max(1, len(cores) // 4):] if len(cores) > 1 else cores
    server = sorted(cpu_list(server_cpus)) if server_cpus else [c for c in cores if c not in loadgen]
    return server or list(loadgen), loadgen


def plan_shapes(asked: Sequence[int] | str, machine: Sequence[int], server_cpus: str = "",
                loadgen_cpus: str = "") -> ShapePlan:
    """The shapes to measure on `machine`'s cores: each a server of k cores, the server's cores first."""
    server, loadgen = split_cores(machine, server_cpus, loadgen_cpus)
    order = server + [c for c in loadgen if c not in server]
    sizes = auto_shapes(len(server), len(order)) if isinstance(asked, str) else tuple(int(k) for k in asked)
    shapes, refused = [], []
    for k in sizes:
        if k > len(order):
            refused.append(f"{k} cores: this machine gives {len(order)}")
            continue
        taken = order[:k]
        shapes.append(ReplicaShape(k, cpu_text(taken), any(c in loadgen for c in taken)))
    return ShapePlan(tuple(shapes), cpu_text(loadgen), tuple(refused))


def auto_shapes(server_cores: int, all_cores: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the server's cores; one more (sharing the load generator's) where that gives one only."""
    sizes = [1]
    while sizes[-1] * 2 <= server_cores:
        sizes.append(sizes[-1] * 2)
    if len(sizes) == 1 and all_cores >= 2:
        sizes.append(2)
    return tuple(sizes)


def cpu_text(cores: Sequence[int]) -> str:
    """`[0, 1, 2, 5]` -> "0-2,5"."""
    parts: list[str] = []
    ordered = sorted(set(cores))
    start = prev = ordered[0]
    for c in [*ordered[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        parts.append(f"{start}" if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(parts)


__all__ = ["AUTO", "ReplicaShape", "ShapePlan", "auto_shapes", "machine_cores", "parse_shapes", "plan_shapes"]
