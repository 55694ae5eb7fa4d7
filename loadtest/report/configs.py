"""One server configuration as the records name it, and its short label: what makes two searches the same server.

A configuration is what was measured, whatever the load: server kind, device, device name, batching profile and
parameters, server versions, the load generator's host, the server's name (and, unkeyed, a CPU's machine).

Not for: what its searches answer (`loadtest.report.answers.answers`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from loadtest.evidence.records import CellResult
from loadtest.report.blocks import machine_words
from loadtest.report.formatting import params
from serving.endpoint import runtime_display_name

OFF = "off"  # the batching profile with server-side batching disabled


@dataclass(frozen=True, order=True)
class Config:
    """One server as configured. Its name is part of it: two servers of one configuration in a run are compared
    with each other, never merged as repeats (repeats, `--repeat`, keep their server's name)."""

    device: str
    device_name: str
    kind: str
    batching_profile: str
    batching: str  # "k=v, ..." of the batching parameters; "" when none were recorded
    versions: str  # "k=v, ..." of the server-side versions
    host: str  # the load generator's host, from the run's provenance
    name: str = ""  # the server's recorded name: two servers of one configuration in a run are two, not repeats
    runtime: str = ""  # what ran the model, as `serving.endpoint.runtime_display_name` names it
    machine: str = field(default="", compare=False)  # a CPU server's machine: `16 vCPUs (VM)` (`machine_words`)

    @property
    def batching_on(self) -> bool:
        return self.batching_profile != OFF and self.batching != ""


def config_of(cell: CellResult) -> Config:
    s = cell.server
    return Config(s.device, s.device_name, s.kind, s.batching_profile, params(s.batching, ""),
                  params(s.versions, ""), cell.provenance.host or "", s.name,
                  runtime_display_name(s.kind, s.versions.get("runtime")), machine_words(cell))


def config_labels(configs: Iterable[Config]) -> dict[Config, str]:
    """A short unique label per configuration: its server name, then `-profile`, then `#n` as needed."""
    unique = sorted(set(configs))
    names = Counter(c.name for c in unique)
    labels = {}
    for c in unique:
        label = c.name or c.device
        if names[c.name] > 1 and not label.endswith(f"-{c.batching_profile}"):
            label = f"{label}-{c.batching_profile}"
        labels[c] = label
    repeated = Counter(labels.values())
    seen: Counter[str] = Counter()
    for c in unique:
        base = labels[c]
        if repeated[base] > 1:
            seen[base] += 1
            labels[c] = f"{base}#{seen[base]}"
    return labels


DEFAULT_MODEL = "mnist"  # the demo's model: its answers are not named


def models_named(results: Iterable[CellResult]) -> str:
    """The models measured, "" when only the demo's (the card's title and the headline name them)."""
    models = sorted({r.server.model_name for r in results})
    return "" if models in ([], [DEFAULT_MODEL]) else ", ".join(models)
