"""How each runtime the embedded server knows is named: the one table of these names. The server's runtimes
(`serving.server.runtimes`) take theirs from it, and the load test's reports read it without importing them.

Two names are for people: `backend`, what a user types (`--backend`), and `display`, what a report prints
for what ran the model (both in docs/glossary.md's Runtimes table, written from this one). The other three
are each one output's words, kept because that output has readers: `runtime`, what the ready line,
server_info and the device floor report (results record it: reports read old ones by it); `short`, the
report's shorter form inside a sentence; `metric`, the runtime-latency label (TF Serving's "TF2" for the
SavedModel). A recorded runtime is looked up by its backend or runtime name (`named`).

A runtime not in this table (one registered at run time) is reported under its own runtime name.

Not for: what a runtime does (`serving.server.runtimes`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuntimeName:
    """One runtime's names."""

    backend: str  # `--backend` (`savedmodel`)
    runtime: str  # as the ready line, server_info and the device floor report it (`tensorflow`)
    display: str  # what ran the model, in a report's words ("TensorFlow, SavedModel")
    short: str  # in a sentence ("TensorFlow")
    metric: str  # the `runtime` label of the runtime-latency histogram (TF Serving's "TF2")


RUNTIME_NAMES: tuple[RuntimeName, ...] = (
    RuntimeName("savedmodel", "tensorflow", "TensorFlow, SavedModel", "TensorFlow", "TF2"),
    RuntimeName("jax", "jax", "JAX, the same weights (.keras)", "JAX", "jax"),
    RuntimeName("torch", "keras-torch", "PyTorch, the same weights (.keras)", "PyTorch (Keras)", "torch"),
    RuntimeName("null", "none (null backend)", "no model (null backend)", "none (null backend)", "null"),
)


def names_of(backend: str) -> RuntimeName:
    """The names of the runtime `--backend` chooses; KeyError for one this table does not know."""
    for names in RUNTIME_NAMES:
        if names.backend == backend:
            return names
    raise KeyError(backend)


def named(recorded: str) -> RuntimeName | None:
    """The runtime a recorded name stands for, its backend or runtime name (any case); None if unknown."""
    lowered = recorded.lower()
    return next((n for n in RUNTIME_NAMES if lowered in (n.backend, n.runtime)), None)


def display_name(recorded: str) -> str:
    """"TensorFlow, SavedModel" for `tensorflow`; an unknown runtime under its own name."""
    found = named(recorded)
    return found.display if found else recorded


def short_name(recorded: str) -> str:
    """"TensorFlow" for `tensorflow` or `savedmodel`; an unknown runtime under its own name."""
    found = named(recorded)
    return found.short if found else recorded


__all__ = ["RUNTIME_NAMES", "RuntimeName", "display_name", "named", "names_of", "short_name"]
