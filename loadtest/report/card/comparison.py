"""The card's comparisons: one line per target (across devices, the cheaper and by how much where both are priced,
else GPU/CPU with its range; then batching on ÷ off per device), each ratio the one value every table gives it
(`loadtest.report.answers.ratios`), "tie" where its range holds ×1.0; and a best setup never read off a tie.

Not for: the rows they compare (`loadtest.report.card.rows`) or the card (`loadtest.report.card.card`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, DeviceAnswer
from loadtest.report.answers.paired import GPU_CPU, PairedRatio
from loadtest.report.answers.ratios import (
    DECIDE_WIDTH,
    TIE,
    gain_key,
    gain_no_difference,
    gain_value,
    gpu_cpu_no_difference,
    gpu_cpu_value,
    has_figure,
    is_paired,
    paired_at,
)
from loadtest.report.blocks import DEVICES
from loadtest.report.card.records import CardRow
from loadtest.report.card.words import UNPAIRED


def comparison_line(target: Target, here: Sequence[DeviceAnswer], rows: Sequence[CardRow],
                paired: Mapping[tuple, PairedRatio], ratios: dict, answers: Answers) -> str:
    """One line: across devices (the cheaper and by how much where both are priced, else GPU/CPU with its range),
    then batching on ÷ off per device, each figure once and the one value every table gives it
    (`loadtest.report.answers.ratios`)."""
    where = f"{target.p99_objective_ms:g} ms, {target.batch} image{'s' if target.batch > 1 else ''}"
    batch, objective = target.batch, target.p99_objective_ms
    parts = []
    priced = {r.device: r for r in rows if r.usd_per_m_requests and r.for_buying}  # never a "≤" row's price
    across = gpu_cpu_value(answers, paired, batch, objective)
    if len(priced) == 2:
        cheap, dear = sorted(priced.values(), key=lambda r: r.usd_per_m_requests or 0.0)
        times = (dear.usd_per_m_requests or 0.0) / (cheap.usd_per_m_requests or 1.0)
        parts.append(f"{DEVICES[cheap.device]} ×{times:.2f} cheaper a request" if times >= 1.005 else
                     "CPU and GPU cost the same a request")
        ratios[f"cheaper at {where}"] = {"device": cheap.device, "ratio": round(times, 4)}
    elif has_figure(across):
        key = (GPU_CPU, batch, objective)
        same = gpu_cpu_no_difference(answers, paired, batch, objective)
        parts.append(f"GPU/CPU {_verdict(same)}{across}{'' if is_paired(paired, key) else UNPAIRED}")
        ratios[f"GPU/CPU at {where}"] = _record(across, paired.get(key), same)
    gains = []
    for d in here:
        value = gain_value(answers, paired, d.device, batch, objective)
        if has_figure(value):
            key = gain_key(d.device, batch, objective)
            same = gain_no_difference(answers, paired, d.device, batch, objective)
            gains.append(f"{DEVICES.get(d.device, d.device)} {_verdict(same)}{value}"
                         f"{'' if is_paired(paired, key) else UNPAIRED}")
            ratios[f"batching gain on {d.device} at {where}"] = _record(value, paired.get(key), same)
    if gains:
        parts.append("batching: " + ", ".join(gains))
    if not parts:
        return ""
    line = f"{where}: " + "; ".join(parts)
    if line.count(UNPAIRED) == len(gains) + ("GPU/CPU" in line) and UNPAIRED in line:  # all of it: said once
        return line.replace(UNPAIRED, "") + " (not paired)."
    return line + "."


def width_notes(target: Target, here: Sequence[DeviceAnswer], paired: Mapping[tuple, PairedRatio]) -> tuple[str, ...]:
    """Under the card: each paired comparison of the target wider than `DECIDE_WIDTH`, with what made it that wide
    (`PairedRatio.width_parts`) and what would narrow it."""
    batch, objective = target.batch, target.p99_objective_ms
    gains = ((gain_key(d.device, batch, objective), f"{DEVICES.get(d.device, d.device)} batching on ÷ off")
             for d in here)
    keys = [((GPU_CPU, batch, objective), "GPU/CPU"), *gains]
    notes = []
    for key, label in keys:
        compared = paired_at(paired, key)
        parts = compared.width_parts() if compared is not None else None
        if compared is None or parts is None or parts.width <= DECIDE_WIDTH:
            continue
        narrower = ("the brackets set most of it: a longer --budget-min narrows them"
                    if parts.brackets >= parts.drift * parts.spread else
                    "the machine's drift set most of it: a quieter machine, or more repeats (--repeat), narrows it")
        notes.append(f"{target.words()}, {label}: its range is {parts.words()}; over the ×{DECIDE_WIDTH:g} a "
                     f"decision needs, {narrower}.")  # the ratio itself is the card's line, said once
    return tuple(notes)


def _verdict(same: bool) -> str:
    return f"{TIE} " if same else ""


def _record(value: str, compared: PairedRatio | None, same: bool) -> dict:
    """figures.json's (and device-run.json's) record of a ratio: the value as printed, whether its range holds ×1.0,
    and its paired figures."""
    if compared is None or compared.ratio is None:
        return {"value": value, "paired": False, "no_difference": same}
    return {"value": value, **_ratio_record(compared)}


def setup_settled(row: CardRow, answers: Answers, paired: Mapping[tuple, PairedRatio]) -> CardRow:
    """The row's best setup, and where the device's batching gain holds ×1.0, that the other setup is no measurably
    different: `batching off (tie with batching on)`, so a best setup is never read off a tie."""
    target = row.target
    if not row.setup or not gain_no_difference(answers, paired, row.device, target.batch, target.p99_objective_ms):
        return row
    other = "batching off" if row.setup.startswith("batching on") else "batching on"
    return replace(row, setup=f"{row.setup} ({TIE} with {other})")


def _ratio_record(compared: PairedRatio) -> dict:
    return {"ratio": compared.ratio, "low": compared.low, "high": compared.high, "paired": compared.paired,
            "repeats": len(compared.repeats), "no_difference": compared.no_difference}


__all__ = ["comparison_line", "setup_settled", "width_notes"]
