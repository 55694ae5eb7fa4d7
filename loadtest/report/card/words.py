"""The card's words: its title (for buying or not, what was measured, why not) and what each term on it means.

Not for: the card's figures (`loadtest.report.card.card`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from loadtest.report.blocks import DEVICES
from loadtest.report.card.records import CardRow
from loadtest.report.configs import Config
from loadtest.report.sizing.instances import Pricing
from serving.endpoint import ServerKind

BOUNDED_BY = "bounded by"
AT_MOST = "≤ boxes"  # a NOT FOR BUYING row's boxes and prices: the most a server at least this fast needs
SHAPES = "k-core replicas"  # a row sized on a measured replica shape
SHARED_CORES = "shared cores"  # that shape's capacity is a lower bound: it shared the load generator's cores
SHAPED_SETUP = ("the configuration and replica shape whose boxes cost least on that device at the target (a tie: the "
                "smaller shape; without a price, the most capacity a core).")  # "best setup" where shapes were
STAND_IN = "embedded stand-in"
UPPER_END = "upper end"
LOWER_BOUND = "≥"
UNPAIRED = " unpaired"  # a ratio of searches run one after the other: its range does not allow for the drift
TERMS = {
    "target": "what must be served: requests a second, the p99 latency objective, images in one request.",
    "best setup": "the batching configuration with the highest capacity on that device at the target's objective.",
    "capacity req/s": "the highest offered rate (open loop) whose p99 stayed within the objective, confirmed at the "
                      "stated confidence (MLPerf's early-stopping rule) by a separate, longer measurement; in "
                      "brackets a higher rate that passed without one; \"none confirmed (… passed)\": no rate was "
                      "confirmed, the highest pass is the figure; a higher figure of another setup on the device is "
                      "named after it.",
    "p99 upper estimate ms": "the early-stopping rule's upper confidence bound on the true p99 at the capacity, "
                             "client side, from the intended send (the answer table's column of that name).",
    "busy": "the server's CPU (% of the cores it may use, and how many) and GPU utilisation while serving at the "
            "capacity.",
    "served ÷ device alone": "images/s served at the capacity ÷ the model alone on its device at the batch the "
                             "server ran; under 50%, or within the run's drift (its reference cells) of 50%: our "
                             "serving path, not the device, bounded the answer.",
    "boxes": "instances for the target rate with the headroom (for bursts only), over the capacity's range: fewest "
             "at its top, most at its bottom (one search: its upper end and its capacity; repeated searches: the "
             "highest repeat's upper end and the lowest repeat's capacity); + k spare: k instances more, so the "
             "target is still served with k instances lost (N + 1 unless --spare-instances says); not for buying: "
             "\"≤\", the most only; an unconfirmed answer: no boxes; the arithmetic: the sizing table below.",
    "USD/h": "what the boxes at the capacity (the most) cost an hour at the price list's prices (of repeated "
             "searches, at the typical one: their lower median).",
    "USD per million requests": "USD/h ÷ the requests served in that hour, × 1,000,000 (per image, for a request "
                                "of several, below the card).",
    STAND_IN: "this project's own gRPC server (serving/), speaking TF Serving's Predict API with the same model "
              "weights and batching parameters: it stands in for TF Serving where no container runs, so its figures "
              "are its own, not TF Serving's.",
    UPPER_END: "the lowest rate above the capacity shown to fail (never one whose verdict stayed open): the true "
               "capacity lies between, at 99% confidence each end, slow requests that came in clusters counted as "
               "fewer.",
    LOWER_BOUND: "a lower bound, with why: the search stopped (no higher rate failed: it did not go high enough) or "
                 "the load generator's limit (it could not offer more).",
    "for buying": "the device or the production server (a TF Serving container) bounded the answer (\"bounded by\") "
                  "and it is priced; the title says FOR BUYING when each target's cheapest row is.",
    "ranges": "×ratio (low–high): the paired comparison's ratio and the range its repeats and the machine's drift "
              "allow; \"tie\": a range that holds ×1.0, no measurable difference (a best setup \"tie with\" the "
              "other is no better than it). GPU/CPU: the best GPU setup's capacity ÷ the best CPU setup's; batching: "
              "batching on ÷ off on that device; unpaired, not paired: from searches run one after the other, whose "
              "range does not allow for the machine's drift.",
    BOUNDED_BY: "what bounded the answer, the first that applies: unconfirmed (passed, not confirmed, or a lower "
                "bound, with why); the tool (its tool ceiling not measured or under 2× the answer, or the load "
                "generator saturated); the host (its stalls, measured by the host probe, explain the dispatch lag or "
                "the tail); device alone not measured; the stand-in's serving path (served under 50% of the device "
                "alone, or within the run's drift of 50%); the runtime's dispatch; an idle device; the device; the "
                "production server (a TF Serving container).",
    "tool ceiling": "what the load generator and the path to the model sustained in the same run with a model that "
                    "costs nothing (the embedded server's null backend, shaped as the configuration): \"≥ X (2× the "
                    "answer)\": it carried twice the answer, so it did not bound it (the 2× is ours); \"X\": the "
                    "highest rate it carried, where it did not carry 2×, with what stood at 2× (the load generator, "
                    "or the twin's own server, which a TF Serving container's requests do not cross); not "
                    "measured: why.",
    AT_MOST: "a row not for buying with a confirmed answer: its boxes and prices are the most a server at least this "
             "fast needs (an upper bound: the capacity is a floor on what the device serves), not a quote.",
    SHAPES: "the replica shape sized on: each shape measured (k cores, k frontends a replica) is priced and the "
            "cheapest taken (a tie: the smaller); no shape between or beyond them is priced. \"8 per general-16\": "
            "one general-16 holds 8 replicas, each on its own cores.",
    SHARED_CORES: "a lower bound: some of the replica's cores were also the load generator's, so its cores alone "
                  "serve at least this.",
}


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
        stand_in = "; figures are the stand-in's" if any(c.kind != ServerKind.CONTAINER for c in configs) else ""
        return f"FOR BUYING — {measured}{stand_in}" + ("; example prices" if example else "")
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
        return "no answer was confirmed"
    if what == "device alone not measured":
        return "the device alone was not measured"
    devices = list(dict.fromkeys(DEVICES.get(r.device, r.device) for r in answered))
    device = f"the {devices[0]}" if len(devices) == 1 else "a device"
    return f"{what}, not {device}, bounded every answer"


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
