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

from loadtest.report.answers.terms import GLOSSARY
from loadtest.report.blocks import Table
from loadtest.report.card.decision import spelled
from loadtest.report.configs import Config
from serving.protocol.runtime_names import RUNTIME_NAMES

TERMS: tuple[tuple[str, str], ...] = tuple(GLOSSARY.items())  # the one glossary (`answers.terms`)


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
