"""Every ratio's one value: the batching gain on a device and GPU/CPU, per request batch and objective.

One value per (what, request batch, objective), from the capacities of `loadtest.report.answers.answers` (the
one rule): a paired comparison's (`loadtest.report.answers.paired`: its repeats' median and their range,
widened by the machine's drift) where one was measured there, else the unpaired ratio of the best
capacities with its range from the two brackets. Printed one way (`formatting.ratio_value`: `×1.76
(×0.87–×2.42)`, only the end that holds where a capacity is a lower bound, `at least ×0.49`) by the card,
the findings, the answer and objective tables, the console and, through the card, device-run.json.

Pure functions over `Answers` and `PairedRatio`s. Not for: computing the capacities or the paired ranges.
"""

from __future__ import annotations

from collections.abc import Mapping

from loadtest.report.answers.answers import Answers, DeviceAnswer, DeviceRatio
from loadtest.report.answers.paired import GPU_CPU, PairedRatio, holds_one
from loadtest.report.formatting import ratio_value

Paired = Mapping[tuple[str, int, float], PairedRatio]


def gain_key(device: str, batch: int, objective: float) -> tuple[str, int, float]:
    return f"batching gain on {device}", batch, objective


def device_answer(answers: Answers, device: str, batch: int, objective: float) -> DeviceAnswer | None:
    """A device's answer at a request batch and objective (at the searches' own, `answers.devices`: the same)."""
    return next((d for d in (*answers.devices, *answers.objective_devices)
                 if (d.device, d.request_batch_size, d.p99_objective_ms) == (device, batch, objective)), None)


def device_ratio(answers: Answers, batch: int, objective: float) -> DeviceRatio | None:
    return next((r for r in (*answers.ratios, *answers.objective_ratios)
                 if (r.request_batch_size, r.p99_objective_ms) == (batch, objective)), None)


def paired_at(paired: Paired, key: tuple[str, int, float]) -> PairedRatio | None:
    """The paired comparison's ratio there, where it has one."""
    found = paired.get(key)
    return found if found is not None and found.ratio is not None else None


def gain_value(answers: Answers, paired: Paired, device: str, batch: int, objective: float) -> str:
    """The batching gain on `device`: `×2.30 (×1.21–×3.26)`, `at least ×0.49`, or `—` (none)."""
    if (found := paired_at(paired, gain_key(device, batch, objective))) is not None:
        return found.value()
    d = device_answer(answers, device, batch, objective)
    return "—" if d is None else ratio_value(d.gain.ratio, d.gain.low, d.gain.high)


def gpu_cpu_value(answers: Answers, paired: Paired, batch: int, objective: float) -> str:
    """GPU/CPU there, as `gain_value` gives a gain."""
    if (found := paired_at(paired, (GPU_CPU, batch, objective))) is not None:
        return found.value()
    r = device_ratio(answers, batch, objective)
    return "—" if r is None else ratio_value(r.ratio, r.low, r.high)


TIE = "tie"  # the card's word for a comparison whose range holds ×1.0: no measurable difference
DECIDE_WIDTH = 1.3  # high ÷ low of a range a decision can rest on: it tells a 30% difference from none (#67)


def gain_no_difference(answers: Answers, paired: Paired, device: str, batch: int, objective: float) -> bool:
    """Whether the batching gain on `device` there (the one `gain_value` prints) holds ×1.0."""
    if (found := paired_at(paired, gain_key(device, batch, objective))) is not None:
        return found.no_difference
    d = device_answer(answers, device, batch, objective)
    return d is not None and holds_one(d.gain.ratio, d.gain.low, d.gain.high)


def gpu_cpu_no_difference(answers: Answers, paired: Paired, batch: int, objective: float) -> bool:
    """Whether GPU/CPU there (the one `gpu_cpu_value` prints) holds ×1.0."""
    if (found := paired_at(paired, (GPU_CPU, batch, objective))) is not None:
        return found.no_difference
    r = device_ratio(answers, batch, objective)
    return r is not None and holds_one(r.ratio, r.low, r.high)


def is_paired(paired: Paired, key: tuple[str, int, float]) -> bool:
    found = paired_at(paired, key)
    return found is not None and found.paired


def has_figure(value: str) -> bool:
    """A value a buyer can use: a ratio with at least one end of its range."""
    return value.startswith(("×", "at least", "at most"))
