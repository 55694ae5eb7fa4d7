"""The report's building blocks: a table and a figure, computed once and only formatted afterwards.

Not for: what goes in them (`loadtest.report.headline`, `loadtest.report.sections.details`) or how they are
written out (`loadtest.report.page`).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus
from loadtest.report.series import usable

# Why "capacity req/s" and "images/s served" differ at request batch 1: the captions and the glossary say it once.
OFFERED_VS_SERVED = ("req/s offered: the rate the open loop sent at, requests at random (Poisson) gaps averaging "
                     "it; images/s served: the images the server answered per second over the measured window. "
                     "At request batch 1 the two differ by a few percent: random gaps send a little more or less "
                     "than the mean in any one window, and a request sent before the window and answered in it "
                     "(or sent in it and answered after) counts on one side only")
OFFERED_VS_SERVED_REF = "req/s offered and images/s served: why they differ is in Terms"  # the definition, once
DEVICES = {"cpu": "CPU", "gpu": "GPU"}  # a device as the card, the shape notes and the cost chart name it


@dataclass(frozen=True)
class Table:
    title: str
    caption: str  # how to read it; what was measured is in the configurations table, once
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    marks: tuple[str, ...] = ()  # per row: "" or "invalid" / "failed" (styled in HTML)
    in_summary: bool = True  # also in the Markdown summary
    anchor: str = ""  # the HTML id of its heading ("" none), for links to it
    ids: tuple[str, ...] = ()  # per row: its HTML id, for links to one row (the glossary's terms)


@dataclass(frozen=True)
class Figure:
    title: str
    caption: str
    png: bytes | None  # None: nothing to draw, the caption says why


def cell_mark(cell: CellResult) -> str:
    return "failed" if cell.status != CellStatus.OK else ("" if usable(cell) else "invalid")


def device_name(name: str, machine: str = "") -> str:
    """The device as recorded, with its machine where known (`Intel(R) Xeon(R) Processor, 16 vCPUs (VM)`)."""
    return (name or "(not recorded)") + (f", {machine}" if machine else "")


def machine_words(cell: CellResult) -> str:
    """A CPU server's machine as it reports itself: `16 vCPUs (VM)`, `16 cores, 32 threads`; "" for a GPU server,
    a server on another machine than the load generator's (whose provenance this is), or a record made before
    these facts were recorded."""
    prov, s = cell.provenance, cell.server
    local = cell.server_resources is not None and cell.server_resources.source != "unknown"
    if s.device != "cpu" or prov.cpu_virtualization is None or not local or s.device_name != prov.cpu_model:
        return ""
    return cpu_count_words(prov.cpu_count, prov.cpu_physical_cores, prov.cpu_virtualization)


def cpu_count_words(logical: int | None, cores: int | None, virtualization: str) -> str:
    """`16 vCPUs (VM)` on a VM, `8 cores, 16 threads` on bare metal, `16 CPUs` where it is not known which."""
    if virtualization not in ("none", "unknown"):
        return f"{logical} vCPUs (VM)" if logical else "a VM"
    if virtualization == "none" and cores:
        return f"{cores} cores" + (f", {logical} threads" if logical and logical != cores else "")
    return f"{logical} CPUs" if logical else ""
