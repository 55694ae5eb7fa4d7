"""The fixed vocabularies of a load test: load modes, protocols, arrivals, checks, inputs, cell statuses, flags.

Each is a `StrEnum`, so a value compares equal to its string and serialises as it: records written
with these members are byte-identical to records written with the plain strings.

Not for: what a server is (`serving.endpoint`: `ServerKind`, `Device`).
"""

from __future__ import annotations

from enum import StrEnum


class LoadMode(StrEnum):
    CLOSED = "closed"  # each user sends back to back: the level is a concurrency
    OPEN = "open"  # arrivals at a rate, whatever the server does: the level is requests/s


class Protocol(StrEnum):
    GRPC = "grpc"
    REST = "rest"


class Arrival(StrEnum):
    CONSTANT = "constant"
    POISSON = "poisson"


class Check(StrEnum):
    CLASSES = "classes"  # every returned class equals the exported model's own prediction
    SHAPE = "shape"  # output shapes only: the null backend answers zeros
    OUTPUTS = "outputs"  # any model: output names, dtypes and shapes as its signature says (values when given)


class InputKind(StrEnum):
    """Where a load test's inputs come from (`[run] input_data`; a path means an .npz)."""

    AUTO = "auto"  # the MNIST samples for the model "mnist", random inputs for any other
    SAMPLES = "samples"  # the MNIST demo's sample digits (`[run] samples`)
    RANDOM = "random"  # made from the served model's signature, seeded
    ZEROS = "zeros"
    NPZ = "npz"  # the user's own .npz: one array per input name


class CellStatus(StrEnum):
    OK = "ok"
    FAILED = "failed"


class Flag(StrEnum):
    """Why a cell is not valid evidence."""

    SATURATED = "saturated"
    UNSTABLE = "unstable"
    ERRORS = "errors"
    FAILED = "failed"

class Role(StrEnum):
    """Why a search measured a cell; recorded with the cell."""

    PROBE = "probe"  # a short closed loop that picks the start rate
    BRACKET = "bracket"
    BISECT = "bisect"
    CONFIRM = "confirm"
    EXTEND = "extend"  # the same rate measured longer: its verdict pools every window at that rate
    # A paired search's upper end measured again in the round after its final confirmation, so that both ends of its
    # range come from the same minutes: a new attempt at that rate, whose verdict stands on its own windows.
    RECHECK = "recheck"
    START = "start"  # the search's server did not start or answer: its one cell, recorded failed
    RETRY = "retry"  # older searches: a failing rate measured once more (pooled like an extension)
    REFERENCE = "reference"  # a paired comparison's reference cell (`loadtest.search.comparison`): not a search's
    # The tool ceiling's twin (`loadtest.judge.tool_ceiling`): the embedded server with the null backend, shaped as
    # the configuration it checks, at 2x that search's answer (or its own search where that fails): not an answer's
    TOOL_CEILING = "tool_ceiling"
