"""The one glossary (#68 item 2): each term the report and the card print, with its one meaning, built from the
constants it states. The card's Terms (`loadtest.report.card.words.TERMS`: its column headers and words, each named
to its entry here by `CARD_LABELS`), the report's Terms table (`loadtest.report.glossary`), the tables' captions and
docs/glossary.md (`make glossary`) all read it.

Not for: how a term is measured (docs/methodology.md) or where a report links it (`loadtest.report.glossary`).
"""

from __future__ import annotations

from loadtest.judge.tool_ceiling import CHECK_RATIO
from loadtest.report.answers.bound import SERVED_SHARE
from loadtest.report.blocks import OFFERED_VS_SERVED

CHECK = f"{CHECK_RATIO:g}×"
HALF = f"{SERVED_SHARE:.0%}"

GLOSSARY: dict[str, str] = {
    "target": "what must be served: requests a second, the p99 latency objective, images in one request",
    "best setup": "the batching configuration with the highest capacity on that device at the target's objective",
    "best setup, shapes measured": "the configuration and replica shape whose boxes cost least on that device at the "
                                   "target (a tie: the smaller shape; without a price, the most capacity a core)",
    "capacity": "the highest offered rate (requests/s, open loop: sends on a schedule, latency timed from the "
                "intended send) whose p99 met the objective at the stated confidence (MLPerf's early-stopping rule), "
                "confirmed by a separate, longer measurement; \"(… passed)\": a higher rate that passed without one; "
                "\"none confirmed (… passed)\": no rate was confirmed, the highest pass is the figure; the card gives "
                "the first figure, the table under it the rest and any higher figure of another setup on the device",
    "confirmed": "a separate, longer measurement at that rate passed too; the answer rests on it",
    "passed, not confirmed": "the rate's own windows passed, but no confirmation was measured (a search cut short)",
    "at least, ≥": "a lower bound, with why: the search stopped (no higher rate failed: it did not go high enough) or "
                   "the load generator's limit (it could not offer more)",
    "upper end": "the lowest rate above the capacity shown to fail the objective (never one whose verdict stayed "
                 "open): the true capacity lies between, at 99% confidence each end, slow requests that came in "
                 "clusters counted as fewer",
    "effective N": "where the slow requests came in clusters (a backlog holds every request behind it over the "
                   "objective), N ÷ their clustering: what the confidence rule stands on",
    "recheck": "in a paired comparison, an answer's upper end measured again in the round after its confirmation, "
               "so both ends of its range come from the same minutes",
    "unmet: stalls": "requests paused for about the same time at every load tried: a pause, not a lack of capacity; "
                     "the noise table says whose (the host's, the server's, the client's)",
    "inconclusive": "too few requests at that rate to say pass or fail at the stated confidence, or latency that grew "
                    "within one cell: measured again, a queue building shows again, a burst does not",
    "N, k": "N: requests judged at a rate; k: how many of them were over the objective",
    "est. p99": "the upper confidence bound on the true p99 from N and k (MLPerf's early-stopping rule), client side, "
                "from the intended send: a pass needs it within the objective; the card's \"p99 upper estimate\"",
    "offered req/s, images/s served": OFFERED_VS_SERVED,
    "device busy": "the server's CPU (% of the cores it may use, and how many) and the GPU's utilisation at the "
                   "answer's cell",
    "serving path": "everything between the client and the model on its device: gRPC, decoding, queues, batching, "
                    "the server's processes; where it, not the device, bounded an answer, a faster device would not "
                    "raise it, so no purchase follows from that answer",
    "embedded stand-in": "this project's own gRPC server (serving/), speaking TF Serving's Predict API with the same "
                         "model weights and batching parameters: it stands in for TF Serving where no container runs, "
                         "so its figures are its own, not TF Serving's",
    "tool ceiling": "what the load generator and the path to the model sustained in the same run with a model that "
                    "costs nothing (a twin: the embedded server with the null backend, shaped as the configuration, "
                    f"answering tensors of the real sizes), checked at {CHECK} the answer (the {CHECK} is ours): \"≥ "
                    f"X ({CHECK} the answer)\" where it carried that, so the tool did not bound the answer; \"X\", its "
                    "own search's answer (confirmed, else its highest unconfirmed pass), where it searched, with what "
                    f"stood at {CHECK} (the load generator, or the twin's own server, which a TF Serving container's "
                    "requests do not cross); \"the check did not run: why\"; \"not measured: why\" where no twin ran "
                    "or it could not start",
    "bounded by": "what bounded an answer, the first that applies: unconfirmed (passed, not confirmed, or a lower "
                  f"bound, with why); the tool (its tool ceiling not measured or under {CHECK} the answer, or the "
                  "load generator saturated); the host (its stalls, measured by the host probe, explain the dispatch "
                  "lag or the tail); device alone not measured; the stand-in's serving path (served under "
                  f"{HALF} of the device alone, or within the run's drift of {HALF}); the runtime's dispatch; an idle "
                  "device; the device; the production server (a TF Serving container). Only the last two are for "
                  "buying",
    "for buying": "the device or the production server (a TF Serving container) bounded the answer (\"bounded by\") "
                  "and it is priced; the title says FOR BUYING when each target's cheapest row is",
    "served ÷ device alone": f"what the server delivered at its answer against the device floor at the batch it ran; "
                             f"under {HALF}, or within the run's drift (its reference cells) of {HALF}: the serving "
                             "path, not the device, bounded the answer",
    "probe, bracket, bisect, extend, confirm": "a search's steps: a closed-loop probe sets the start rate; bracket "
                                               "doubles the rate until one fails; bisect halves the gap; extend "
                                               "measures a rate longer when it was inconclusive; confirm measures the "
                                               "answer again, longer",
    "reference": "in a paired comparison, one server with 4 users back to back (never idle), measured between "
                 "rounds: how far the machine's own speed moved (the drift); never an answer",
    "paired": "the servers compared were up at once and measured in alternating turns, so the machine's drift lands "
              "on both sides of the ratio",
    "ranges": "×ratio (low–high): the paired comparison's ratio and the range its repeats and the machine's drift "
              "allow; \"tie\": a range that holds ×1.0, no measurable difference (a best setup \"tie with\" the other "
              "is no better than it); unpaired, not paired: from searches run one after the other, whose range does "
              "not allow for the machine's drift",
    "moves with the machine's speed": "over four or more repeats or runs, the ratio followed the reference cell's "
                                      "speed (|r| >= 0.8): its servers answer a slower machine differently, so the "
                                      "ratio is not one number on this machine",
    "batching gain": "best batching-enabled capacity ÷ batching-off capacity, same device, request batch and objective",
    "GPU/CPU": "best GPU capacity ÷ best CPU capacity, same request batch and objective",
    "request batch": "images in one request the client sends; the server may merge requests into larger batches",
    "device floor": "the model alone on the device (no gRPC, no queue) at a batch size: the most the device could "
                    "give; a server far below it is bounded by its serving path. On a CPU its images/s are those of "
                    "one caller per core the server was given, calling at once",
    "handoff": "with --workers and a device owner: a request's trip from the gRPC frontend that took it to the one "
               "process that runs the model and back (shared memory and a socket message each way)",
    "client + wire": "a request's time the server did not see: the load generator, gRPC on both sides and the "
                     "network stack",
    "host floor": "the lowest objective this machine lets any server confirm: a sleeping probe beside the server was "
                  "held past lower ones more than 0.5% of the time",
    "host oversleep": "how late a 1 ms sleep loop run beside each cell woke (jHiccup's method), on the server's cores "
                      "and on the load generator's: stalls the machine itself imposed, whatever the server did",
    "host stalls > objective per s": "the sleep loop's stalls longer than the objective, per second, on the worse "
                                     "side",
    "host allows p99 ≥": "the host floor of these cells: the lowest p99 objective they could confirm were the server "
                         "perfect",
    "client over, server over, host over": "shares over the objective: of the client's requests, of the server's own "
                                           "(its latency histogram), and of the time the host alone held the sleep "
                                           "loop",
    "whose": "whose slow requests: the host's when its share explains at least half the client's, else the server's "
             "when its own does, else the client's and the wire's",
    "peak": "the highest throughput any valid cell of a configuration and request batch measured, open or closed "
            "loop, with no latency objective (cells whose server fell behind are never a peak)",
    "at (the answer's cell)": "where a configuration's figures were measured: the cell of its highest confirmed "
                              "capacity, else of its highest pass (the cell its verdict reads), else its peak; its "
                              "server mean, client + wire and device floor are printed once, from that cell (also in "
                              "figures.csv and figures.json)",
    "server ran batch": "the batch the server actually ran (its processed batch mean, rounded up): with server-side "
                        "batching it merges requests, so it can exceed the request batch",
    "boxes": "instances for the target rate with the headroom (for bursts only), over the capacity's range: fewest at "
             "its top, most at its bottom (one search: its upper end and its capacity; repeated searches: the highest "
             "repeat's upper end and the lowest repeat's capacity); + k spare: k instances more, so the target is "
             "still served with k instances lost (N + 1 unless --spare-instances says); not for buying: \"≤\", the "
             "most only; an unconfirmed answer: no boxes; the arithmetic: the sizing table",
    "≤ boxes": "a row not for buying with a confirmed answer: its boxes and prices are the most a server at least "
               "this fast needs (an upper bound: the capacity is a floor on what the device serves), not a quote",
    "USD/h": "what the boxes at the capacity (the most) cost an hour at the price list's prices (of repeated "
             "searches, at the typical one: their lower median)",
    "USD per million requests": "USD/h ÷ the requests served in that hour, × 1,000,000 (per image, for a request of "
                                "several, below the card)",
    "replicas, cost": "replicas = ceil(target ÷ (capacity × (1 − headroom for bursts))); instances = ceil(replicas ÷ "
                      "replicas per instance) + the spare (N + 1 by default); cost per million images from the "
                      "instances' hourly prices at the target load",
    "replica shape, scaling efficiency": "a replica shape: one server given k cores and k gRPC frontends (a shape "
                                         "sweep, capacity --shapes); scaling efficiency: its capacity ÷ (k × the "
                                         "1-core shape's), ×1 where k cores serve k times one. Sizing prices each "
                                         "shape measured and takes the cheapest, none between or beyond them",
    "k-core replicas": "the replica shape sized on: each shape measured (k cores, k frontends a replica) is priced "
                       "and the cheapest taken (a tie: the smaller); no shape between or beyond them is priced. \"8 "
                       "per general-16\": one general-16 holds 8 replicas, each on its own cores",
    "shared cores": "a lower bound: some of the replica's cores were also the load generator's, so its cores alone "
                    "serve at least this",
}

# the card's words (its column headers and the marks it prints) -> their entry in `GLOSSARY`
CARD_LABELS = {
    "target": "target", "best setup": "best setup", "capacity req/s": "capacity", "p99 upper estimate ms": "est. p99",
    "busy": "device busy", "served ÷ device alone": "served ÷ device alone", "boxes": "boxes", "USD/h": "USD/h",
    "USD per million requests": "USD per million requests", "embedded stand-in": "embedded stand-in",
    "upper end": "upper end", "≥": "at least, ≥", "for buying": "for buying", "ranges": "ranges",
    "bounded by": "bounded by", "tool ceiling": "tool ceiling", "≤ boxes": "≤ boxes",
    "k-core replicas": "k-core replicas", "shared cores": "shared cores",
}


def meaning(term: str) -> str:
    """`term`'s one meaning, a card label or a glossary entry."""
    return GLOSSARY[CARD_LABELS.get(term, term)]


def defined(term: str) -> str:
    """`term: meaning`, as a caption or the card's Terms line states it."""
    return f"{term}: {meaning(term)}"


__all__ = ["CARD_LABELS", "GLOSSARY", "defined", "meaning"]
