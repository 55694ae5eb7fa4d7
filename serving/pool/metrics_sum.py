"""One Prometheus page for the whole pool: every process's page summed sample by sample, under the same names.

Each process exports the same families (TF Serving's counters and histograms, the phases, GC pauses); the
supervisor reads every page and adds up each sample (same name, same label text), so the request count
and every histogram's count on the one page are those of all processes together. Gauges are not summed: the
server-info gauge is 1 in each process, and the device floor is exported by the one process that measured
it, so a gauge's value is its largest. Families keep the order and HELP/TYPE lines they came with.

Not for: reading a page for the load test (`loadtest` scrapes the page this writes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SAMPLE = re.compile(r'^(?P<key>[^{\s]+(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?)\s+(?P<value>\S+)')


@dataclass
class _Family:
    header: list[str]
    kind: str
    samples: dict[str, float] = field(default_factory=dict)


def _value_text(value: float, kind: str) -> str:
    """As the pages write it: TF Serving's counters as integers, the rest as prometheus_client's floats."""
    if kind == "counter" and value.is_integer():
        return str(int(value))
    return repr(value)


def _families(pages: list[str]) -> dict[str, _Family]:
    families: dict[str, _Family] = {}
    for page in pages:
        current: _Family | None = None
        for line in page.splitlines():
            if line.startswith("# HELP "):
                name = line.split(" ", 3)[2]
                current = families.get(name)
                if current is None:
                    current = families[name] = _Family([line], "untyped")
            elif line.startswith("# TYPE ") and current is not None:
                if len(current.header) == 1:
                    current.header.append(line)
                    current.kind = line.split(" ", 3)[3].strip()
            elif line and not line.startswith("#") and current is not None:
                _add(current, line)
    return families


def _add(family: _Family, line: str) -> None:
    match = _SAMPLE.match(line)
    if match is None:
        return
    key, value = match["key"], float(match["value"])
    if key not in family.samples:
        family.samples[key] = value
    elif family.kind == "gauge":
        family.samples[key] = max(family.samples[key], value)
    else:
        family.samples[key] += value


def sum_pages(pages: list[str]) -> str:
    """The pages' families, each sample summed over the pages (gauges: their largest value)."""
    lines = []
    for family in _families(pages).values():
        lines += family.header
        lines += [f"{key} {_value_text(value, family.kind)}" for key, value in family.samples.items()]
    return "\n".join(lines) + "\n"


def pool_gauges(frontends_up: int, restarts: dict[str, int], frontends_name: str, restarts_name: str) -> str:
    """The supervisor's own families: frontends up now, restarts so far by role."""
    lines = [f"# HELP {frontends_name} gRPC frontend processes of this pooled embedded server that are up.",
             f"# TYPE {frontends_name} gauge", f"{frontends_name} {frontends_up}",
             f"# HELP {restarts_name} Processes of this pooled embedded server restarted after they died.",
             f"# TYPE {restarts_name} counter"]
    lines += [f'{restarts_name}{{role="{role}"}} {count}' for role, count in sorted(restarts.items())]
    return "\n".join(lines) + "\n"


__all__ = ["pool_gauges", "sum_pages"]
