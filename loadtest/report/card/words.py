"""The card's words: its title (for buying or not, what was measured, why not) and what each term on it means.

Not for: the card's figures (`loadtest.report.card.card`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from loadtest.report.answers.terms import CARD_LABELS, GLOSSARY, meaning
from loadtest.report.blocks import DEVICES
from loadtest.report.card.records import CardRow
from loadtest.report.configs import Config
from loadtest.report.sizing.instances import Pricing
from serving.endpoint import ServerKind

BOUNDED_BY = "bounded by"
AT_MOST = "≤ boxes"  # a NOT FOR BUYING row's boxes and prices: the most a server at least this fast needs
SHAPES = "k-core replicas"  # a row sized on a measured replica shape
SHARED_CORES = "shared cores"  # that shape's capacity is a lower bound: it shared the load generator's cores
SHAPED_SETUP = GLOSSARY["best setup, shapes measured"]  # "best setup" where shapes were measured
STAND_IN = "embedded stand-in"
UPPER_END = "upper end"
LOWER_BOUND = "≥"
UNPAIRED = " unpaired"  # a ratio of searches run one after the other: its range does not allow for the drift
TERMS = {label: meaning(label) for label in CARD_LABELS}  # the one glossary's words, under the card's labels


def memory_note(rows: Sequence[CardRow]) -> tuple[str, ...]:
    """A line where memory did not limit a priced row's replicas per instance because a memory was unknown."""
    devices = list(dict.fromkeys(DEVICES.get(r.device, r.device) for r in rows if r.instance and not r.memory_counted))
    if not devices:
        return ()
    return (f"Memory not counted ({', '.join(devices)}): the replica's memory (PSS: older records lack it) or the "
            "instance's memory_gib is not known, so memory does not limit replicas per instance.",)


def title(for_buying: bool, rows: Sequence[CardRow], configs: Sequence[Config], example: bool,
           pricing: Pricing | None) -> str:
    measured = f"{_server(configs)} on {_machines(configs)}"
    if for_buying:
        return f"FOR BUYING — {measured}{_whose(rows)}" + ("; example prices" if example else "")
    return f"NOT FOR BUYING — {measured}: {_why_not(rows, pricing)}" + ("; example prices" if example else "")


def _why_not(rows: Sequence[CardRow], pricing: Pricing | None) -> str:
    """Why the card is not for buying, in at most 12 words."""
    answered = [r for r in rows if r.capacity_rps is not None]
    if not rows:
        return "no capacity search in these results"
    if not answered:
        return "no setup met any target's objective"
    bounded = {r.bounded for r in answered}
    if len(bounded) == 1 and not any(r.for_buying for r in answered):
        return _bounded_every(answered)
    if pricing is None or not any(r.target.rate_rps for r in rows):
        return "no target rate given (--target-rps)"
    if any(r.at_most for r in answered):
        return "neither the device nor the production server bounded a target's best answer"
    missing = sorted({r.target.p99_objective_ms for r in rows if r.capacity_rps is None})
    if missing:
        return f"no setup met p99 ≤ {missing[0]:g} ms"
    return "no price for a target's answer (below the card)"


def _bounded_every(answered: Sequence[CardRow]) -> str:
    """Why not, where one verdict held every answer (`loadtest.report.answers.verdict.Bounded`'s values)."""
    what = answered[0].bounded
    if what == "the tool" and all("not measured" in r.tool_ceiling for r in answered):
        return "tool ceiling not measured"
    if what == "unconfirmed":
        return _unconfirmed_every(answered)
    if what == "device alone not measured":
        return "the device alone was not measured"
    devices = list(dict.fromkeys(DEVICES.get(r.device, r.device) for r in answered))
    device = f"the {devices[0]}" if len(devices) == 1 else "a device"
    return f"{what}, not {device}, bounded every answer"


def _whose(rows: Sequence[CardRow]) -> str:
    """Whose figures the rows for buying are, where any is the stand-in's: every one, or those bounded by the device
    (a TF Serving container's read "the production server")."""
    buying = [r for r in rows if r.for_buying]
    if not any(r.stand_in for r in buying):
        return ""
    return "; figures are the stand-in's" if all(r.stand_in for r in buying) else \
        "; the stand-in's figures where the device bounded them"


def _unconfirmed_every(answered: Sequence[CardRow]) -> str:
    """Why not, where every answer is unconfirmed: none confirmed, each confirmed only as a lower bound, or both."""
    bounds = [r.at_least and r.confirmed for r in answered]
    if not any(bounds):
        return "no answer was confirmed"
    return "every answer confirmed is only a lower bound" if all(bounds) else \
        "each answer unconfirmed or only a lower bound"


def _server(configs: Sequence[Config]) -> str:
    kinds = {c.kind for c in configs}
    versions = sorted({v for c in configs for v in c.versions.split(", ") if v.startswith("tfs=")})
    containers = "TF Serving" + (f" {versions[0].removeprefix('tfs=')}" if len(versions) == 1 else "") + " containers"
    runtimes = list(dict.fromkeys(c.runtime.split(",")[0] for c in configs if c.kind != ServerKind.CONTAINER))
    stand_in = "the embedded stand-in" + (f" ({', '.join(runtimes)})" if runtimes else "")
    if kinds == {ServerKind.CONTAINER}:
        return containers
    return f"{containers} and {stand_in}" if ServerKind.CONTAINER in kinds else stand_in


def _machines(configs: Sequence[Config]) -> str:
    """`Intel Xeon, 2 vCPUs (VM) and NVIDIA H200`."""
    found = []
    for c in sorted(configs, key=lambda c: c.device):
        name = _plain(c.device_name) or DEVICES.get(c.device, c.device)
        found.append(name + (f", {c.machine}" if c.machine else ""))
    return " and ".join(dict.fromkeys(found)) or "an unrecorded machine"


def _plain(name: str) -> str:
    """`Intel(R) Xeon(R) Processor` → `Intel Xeon`."""
    text = re.sub(r"\((R|TM|tm|r)\)", "", name)
    text = re.sub(r"\s+(Processor|CPU)\b.*$", "", text)
    return re.sub(r"\s+", " ", text).strip()


__all__ = ["AT_MOST", "BOUNDED_BY", "SHAPED_SETUP", "SHAPES", "SHARED_CORES", "TERMS", "title"]
