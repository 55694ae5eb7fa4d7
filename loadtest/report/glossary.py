"""The report's glossary: every configuration name spelled out, and every term its tables use, in one place.

The terms are this tool's: what a search's roles do, what N, k and the estimate are, the device's floor,
"client + wire", stalls, the host's floor, paired comparisons. A reader of any table finds each one
here without another page (docs/methodology.md says how each is measured).

Not for: the tables that use them (`loadtest.report.headline`, `loadtest.report.sections.details`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from markupsafe import Markup, escape

from loadtest.report.blocks import OFFERED_VS_SERVED, Table
from loadtest.report.card.decision import spelled
from loadtest.report.configs import Config
from serving.protocol.runtime_names import RUNTIME_NAMES

TERMS: tuple[tuple[str, str], ...] = (
    ("capacity", "the highest offered rate (requests/s, open loop: sends on a schedule, latency timed from the "
                 "intended send) whose p99 met the objective at the stated confidence"),
    ("confirmed", "a separate, longer measurement at that rate passed too; the answer rests on it"),
    ("passed, not confirmed", "the rate's own windows passed, but no confirmation was measured (a search cut short)"),
    ("at least, ≥", "a lower bound: no higher rate failed, or the load generator could not send faster"),
    ("upper end", "the lowest rate above the capacity shown to fail the objective (never one that stayed "
                  "inconclusive): the capacity lies between the two"),
    ("effective N", "where the slow requests came in clusters (a backlog holds every request behind it over the "
                    "objective), N ÷ their clustering: what the confidence rule stands on"),
    ("recheck", "in a paired comparison, an answer's upper end measured again in the round after its "
                "confirmation, so both ends of its range come from the same minutes"),
    ("unmet: stalls", "requests paused for about the same time at every load tried: a pause, not a lack of "
                      "capacity; the noise table says whose (the host's, the server's, the client's)"),
    ("inconclusive", "too few requests at that rate to say pass or fail at the stated confidence, or latency that "
                     "grew within one cell: measured again, a queue building shows again, a burst does not"),
    ("N, k", "N: requests judged at a rate; k: how many of them were over the objective"),
    ("est. p99", "the upper confidence bound on the true p99 from N and k (MLPerf's early-stopping rule): a "
                 "pass needs it within the objective; the first table's \"p99 upper estimate\""),
    ("offered req/s, images/s served", OFFERED_VS_SERVED),
    ("device busy", "the server's CPU (% of the cores it may use) and the GPU's utilisation at the answer's cell"),
    ("serving path", "everything between the client and the model on its device: gRPC, decoding, queues, batching, "
                     "the server's processes; where it, not the device, bounded an answer, a faster device would not "
                     "raise it, so no purchase follows from that answer"),
    ("tool ceiling", "what the load generator and the path to the model sustained in the same run with a model that "
                     "costs nothing (a twin: the embedded server with the null backend, shaped as the configuration, "
                     "answering tensors of the real sizes), checked at 2× the answer (the 2× is ours): \"≥ X (2× the "
                     "answer)\" where it carried that, so the tool did not bound the answer; \"X\", its own "
                     "search's answer (confirmed, else its highest unconfirmed pass), where it searched, with what "
                     "stood at 2× (the load generator, or the twin's own server, which a TF Serving container's "
                     "requests do not cross); \"not measured: why\" where no twin ran or it could not start"),
    ("bounded by", "what bounded an answer, the first that applies: unconfirmed; the tool; the host; device alone "
                   "not measured; the stand-in's serving path; the runtime's dispatch; an idle device; the device; "
                   "the production server (a TF Serving container). Only the last two are for buying"),
    ("probe, bracket, bisect, extend, confirm", "a search's steps: a closed-loop probe sets the start rate; "
     "bracket doubles the rate until one fails; bisect halves the gap; extend measures a rate longer when it "
     "was inconclusive; confirm measures the answer again, longer"),
    ("reference", "in a paired comparison, one server with 4 users back to back (never idle), measured between "
                  "rounds: how far the machine's own speed moved (the drift); never an answer"),
    ("paired", "the servers compared were up at once and measured in alternating turns, so the machine's drift "
               "lands on both sides of the ratio"),
    ("moves with the machine's speed", "over four or more repeats or runs, the ratio followed the reference "
                                       "cell's speed (|r| >= 0.8): its servers answer a slower machine "
                                       "differently, so the ratio is not one number on this machine"),
    ("batching gain", "best batching-enabled capacity ÷ batching-off capacity, same device, request batch and "
                      "objective"),
    ("GPU/CPU", "best GPU capacity ÷ best CPU capacity, same request batch and objective"),
    ("request batch", "images in one request the client sends; the server may merge requests into larger batches"),
    ("device floor", "the model alone on the device (no gRPC, no queue) at a batch size: the most the device could "
                     "give; a server far below it is bounded by its serving path. On a CPU its images/s are those of "
                     "one caller per core the server was given, calling at once"),
    ("handoff", "with --workers and a device owner: a request's trip from the gRPC frontend that took it to the one "
                "process that runs the model and back (shared memory and a socket message each way)"),
    ("client + wire", "a request's time the server did not see: the load generator, gRPC on both sides and the "
                      "network stack"),
    ("host floor", "the lowest objective this machine lets any server confirm: a sleeping probe beside the server "
                   "was held past lower ones more than 0.5% of the time"),
    ("host oversleep", "how late a 1 ms sleep loop run beside each cell woke (jHiccup's method), on the server's "
                       "cores and on the load generator's: stalls the machine itself imposed, whatever the server did"),
    ("host stalls > objective per s", "the sleep loop's stalls longer than the objective, per second, on the worse "
                                      "side"),
    ("host allows p99 ≥", "the host floor of these cells: the lowest p99 objective they could confirm were the "
                          "server perfect"),
    ("client over, server over, host over", "shares over the objective: of the client's requests, of the server's "
                                            "own (its latency histogram), and of the time the host alone held the "
                                            "sleep loop"),
    ("whose", "whose slow requests: the host's when its share explains at least half the client's, else the "
              "server's when its own does, else the client's and the wire's"),
    ("peak", "the highest throughput any valid cell of a configuration and request batch measured, open or "
             "closed loop, with no latency objective (cells whose server fell behind are never a peak)"),
    ("at (the answer's cell)", "where a configuration's figures were measured: the cell of its highest confirmed "
                               "capacity, else its peak; its server mean, client + wire and device floor are "
                               "printed once, from that cell (also in figures.csv and figures.json)"),
    ("server ran batch", "the batch the server actually ran (its processed batch mean, rounded up): with "
                         "server-side batching it merges requests, so it can exceed the request batch"),
    ("served ÷ device alone", "what the server delivered against the device floor at the batch it ran; below 50%, "
                              "or within the run's drift of 50%, the serving path, not the device, bounded the "
                              "answer"),
    ("replicas, cost", "replicas = ceil(target ÷ (capacity × (1 − headroom for bursts))); instances = ceil(replicas "
                       "÷ replicas per instance) + the spare (N + 1 by default); cost per million images from "
                       "the instances' hourly prices at the target load"),
    ("replica shape, scaling efficiency", "a replica shape: one server given k cores and k gRPC frontends (a shape "
                                          "sweep, capacity --shapes); scaling efficiency: its capacity ÷ (k × the "
                                          "1-core shape's), ×1 where k cores serve k times one. Sizing prices each "
                                          "shape measured and takes the cheapest, none between or beyond them"),
)


# The first table's headers that name a term, and the terms linked where the decision and the headline use them
# (in report.html, the lead sentence above the chart left plain; the Markdown links to the Terms table once).
HEADER_TERMS = {"request batch": "request batch", "capacity req/s": "capacity", "images/s served":
                "offered req/s, images/s served", "device busy": "device busy", "p99 upper estimate ms": "est. p99",
                "upper end req/s": "upper end", "batching gain over off": "batching gain", "GPU/CPU": "GPU/CPU",
                "tool ceiling": "tool ceiling", "bounded by": "bounded by"}
PROSE_TERMS = {"serving path": "serving path", "tool ceiling": "tool ceiling", "bounded by": "bounded by",
               "passed, not confirmed": "passed, not confirmed",
               "confirmed": "confirmed", "paired": "paired", "GPU/CPU": "GPU/CPU", "reference speed": "reference",
               "upper end": "upper end", "images/s served": "offered req/s, images/s served"}
_PROSE = re.compile(r"(?<![\w-])(" + "|".join(re.escape(p) for p in sorted(PROSE_TERMS, key=len, reverse=True))
                    + r")(?![\w-])")


def anchor(term: str) -> str:
    """The HTML id of a term's row in the Terms table: `term-est-p99`."""
    return "term-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


def _link(text: str, term: str) -> str:
    return f'<a href="#{anchor(term)}">{text}</a>'


def header_link(header: str) -> Markup:
    """A table header linked to its term where it names one (`replicas for …`: replicas), else as it is."""
    term = HEADER_TERMS.get(header) or ("replicas, cost" if header.startswith("replicas for ") else None)
    return Markup(_link(str(escape(header)), term)) if term else Markup(escape(header))


def glossed(text: str) -> Markup:
    """`text` escaped, each term's first use linked to its row in the Terms table."""
    seen: set[str] = set()

    def link(found: re.Match) -> str:
        term = PROSE_TERMS[found.group(0)]
        if term in seen:
            return found.group(0)
        seen.add(term)
        return _link(found.group(0), term)

    return Markup(_PROSE.sub(link, str(escape(text))))


def glossary_table(labels: Mapping[Config, str]) -> Table:
    """The configurations of these results, spelled out, then the terms (each row with its `anchor`)."""
    configs = tuple((label, spelled(config, labels).removeprefix(f"{label} (").removesuffix(")"))
                    for config, label in sorted(labels.items(), key=lambda kv: kv[1]))
    return Table("Terms", "What each configuration name and each term in this report means (docs/methodology.md: "
                 "how each is measured).", ("term", "meaning"), (*configs, *TERMS), anchor="terms",
                 ids=(*("" for _ in configs), *(anchor(term) for term, _ in TERMS)))


def glossary_markdown() -> str:
    """docs/glossary.md: the terms as every report's Terms table gives them (a test keeps the two the same)."""
    rows = "\n".join(f"| {term} | {meaning} |" for term, meaning in TERMS)
    return ("# Terms used in the report\n\nEvery report ends with this table, with its own configurations spelled "
            "out first (`cpu-off`: the CPU, batching off; `gpu-gpu`: the GPU, batching profile `gpu`; a name is the "
            "device, then the batching profile). How each is measured: [methodology](methodology.md).\n\n"
            f"| term | meaning |\n|---|---|\n{rows}\n\n{runtimes_markdown()}")


def runtimes_markdown() -> str:
    """The embedded server's runtimes: the name a user types and the one a report prints (one table:
    `serving.protocol.runtime_names`)."""
    rows = "\n".join(f"| `{names.backend}` | {names.display} |" for names in RUNTIME_NAMES)
    return ("## Runtimes\n\nWhat ran the model in the embedded server: the name `--backend` takes, and the one a "
            "report prints (a TF Serving container is \"TF Serving\").\n\n"
            f"| --backend | in the report |\n|---|---|\n{rows}\n")
