"""What each target costs (or what each device serves) at every p99 objective answered: the card's curve.

Per target rate and request batch and per device, at each objective the run's cells answer (5 to 100 ms by
default): the best setup's capacity there, and on a card for buying, USD/h for the target's rate (the card's
sizing arithmetic at that capacity; where replica shapes were measured, the shape the card sizes on,
`loadtest.report.shape_sizing.sized_on`). A buyer sees what loosening or tightening the objective is worth.

Not for: the card itself (`loadtest.report.card.card`) or drawing (`loadtest.report.charts.answers.objective_figure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, DeviceAnswer
from loadtest.report.blocks import DEVICES
from loadtest.report.shape_sizing import per_hour, sized_on
from loadtest.report.sizing.instances import Pricing


@dataclass(frozen=True)
class ObjectiveCurve:
    label: str  # "5,000 req/s · 1 image, CPU"
    points: tuple[tuple[float, float], ...]  # (p99 objective ms, USD/h or req/s)


def answers_by_objective(answers: Answers) -> dict[tuple[str, int, float], DeviceAnswer]:
    """Each device's answer per request batch and objective: the searches' own, else from their cells."""
    found = {(d.device, d.request_batch_size, d.p99_objective_ms): d for d in answers.objective_devices}
    found.update({(d.device, d.request_batch_size, d.p99_objective_ms): d for d in answers.devices})
    return found


def objective_curves(answers: Answers, targets: Sequence[Target], pricing: Pricing | None,
                     priced: bool) -> list[ObjectiveCurve]:
    """One curve per target rate and request batch and device: USD/h (`priced`) or capacity req/s per objective."""
    by_key = answers_by_objective(answers)
    curves: dict[str, ObjectiveCurve] = {}
    for target in targets:
        for device in sorted({k[0] for k in by_key if k[1] == target.batch}):
            label = (f"{f'{target.rate_rps:,g} req/s · ' if priced and target.rate_rps else ''}"
                     f"{target.batch} image{'s' if target.batch > 1 else ''}, {DEVICES.get(device, device)}")
            points = []
            for (dev, batch, p99), d in sorted(by_key.items(), key=lambda kv: kv[0][2]):
                if (dev, batch) != (device, target.batch):
                    continue
                chosen = sized_on(d, target, pricing)
                if chosen is None or not chosen.capacity_rps:
                    continue
                value = per_hour(chosen, target, pricing) if priced else chosen.capacity_rps
                if value is not None:
                    points.append((p99, value))
            if points:
                curves[label] = ObjectiveCurve(label, tuple(points))
    return list(curves.values())


__all__ = ["ObjectiveCurve", "answers_by_objective", "objective_curves"]
