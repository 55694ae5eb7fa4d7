"""The card's sizing table, right under its Terms: the arithmetic behind each row's boxes, one line per row with boxes
on instances (issue #60, item 4), and under it the rule (the caption the device table used to carry).

Per line: the instance, its vCPUs and memory, replicas one instance holds by its cores, by its memory and by its
GPUs (the binding one, the fewest, marked; by cores, "12 cores given, 1.1 busy" where the replica kept under half the
cores it was given busy at its answer), the replicas needed at the capacity priced, the instances with the
spare, and USD/h. Each figure is the row's own (`loadtest.report.sizing.fleet.SizingLine`), computed once.

Not for: the card (`loadtest.report.card.card`) or the arithmetic (`loadtest.report.sizing`).
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.report.answers.answers import DeviceAnswer
from loadtest.report.blocks import DEVICES, Table
from loadtest.report.card.card import Card
from loadtest.report.card.records import CardRow
from loadtest.report.formatting import MISSING
from loadtest.report.shape_sizing import instance_hour_words, measured_by_device
from loadtest.report.sizing.instances import CORES, GPUS, MEMORY, Pricing
from loadtest.report.sizing.instances import MEMORY_MARGIN as MARGIN

TITLE = "Sizing: the card's boxes, worked"
HEADER = ("target", "device", "instance", "vCPUs", "memory GiB", "replicas per instance by cores", "by memory",
          "by GPUs", "replicas needed", "instances + spare", "USD/h")
BINDING = " (binding)"
NOT_COUNTED = "not counted"  # memory: the replica's or the instance's is not known


def _count(value: int | None, name: str, binding: str, unknown: str = MISSING) -> str:
    """Replicas one instance holds by one resource, `(binding)` where it is the fewest; `unknown` where it does not
    limit (a CPU replica's GPUs) or is not known (memory)."""
    if value is None:
        return unknown
    return f"{value}{BINDING if name == binding else ''}"


def sizing_row(row: CardRow) -> tuple[str, ...] | None:
    """One card row's arithmetic; None where it has no boxes on instances."""
    s = row.sizing
    if s is None or row.boxes is None:
        return None
    return (row.target.words(), DEVICES.get(row.device, row.device), s.instance, f"{s.vcpus:g}",
            MISSING if s.memory_gib is None else f"{s.memory_gib:g}",
            "; ".join(filter(None, [_count(s.by_cores, CORES, s.binding), s.idle_words()])),
            _count(s.by_memory, MEMORY, s.binding, NOT_COUNTED), _count(s.by_gpus, GPUS, s.binding),
            str(s.replicas), f"{s.instances} + {s.spare}", f"{s.usd_per_hour:,.2f}")


def rule(pricing: Pricing, devices: Sequence[DeviceAnswer]) -> str:
    """How the boxes are counted and priced: the formula, then the price list. Where a device's replica shapes were
    measured, that they were and each was priced (`loadtest.report.shape_sizing`), never that its replica is
    assumed to scale linearly."""
    p = pricing.prices
    unit = ("replica-hour; this file prices replicas, not instances" if p.per_replica else
            instance_hour_words(measured_by_device(devices), (d.device for d in devices)))
    return (f"Replicas needed = ceil(target ÷ (capacity × {1 - pricing.headroom:g})) (the headroom for bursts), at "
            "the capacity priced (of repeated searches, the typical one); replicas per instance: the fewest of "
            "floor((vCPUs − reserve_vcpus) ÷ the replica's cores, a GPU replica's pinned host cores too), "
            f"floor((memory_gib − reserve_gib) ÷ (the replica's memory + {MARGIN:.0%})) where both are known "
            f"({NOT_COUNTED}: one is not), and GPUs ÷ the replica's GPUs; instances = ceil(replicas ÷ replicas per "
            f"instance) + {pricing.spare} spare (the target still served with {pricing.spare} lost); each replica "
            f"(one measured server) assumed to perform as the measured one. Prices from {p.source} ({p.currency} "
            f"per {unit}" + ("; EXAMPLE prices, not quotes" if p.example else "") + ").")


def sizing_table(card: Card | None, pricing: Pricing | None, devices: Sequence[DeviceAnswer]) -> Table | None:
    """The table under the card's Terms; None without a row with boxes on instances."""
    if card is None or pricing is None:
        return None
    rows = tuple(line for r in card.rows if (line := sizing_row(r)) is not None)
    if not rows:
        return None
    return Table(TITLE, rule(pricing, devices), HEADER, rows, anchor="card-sizing")


__all__ = ["HEADER", "TITLE", "rule", "sizing_row", "sizing_table"]
