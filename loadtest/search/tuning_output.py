"""The batching tuner's answer as the user gets it: files, the trail table and the last lines printed.

- `tuned_batching_parameters.txt`: the winner as a TF Serving BatchingParameters text proto, ready
  for `--batching_parameters_file` (the same text `serving.deploy.tfs_files` writes);
- a `[profiles.<name>]` block to paste into serving/serving.toml, every field set;
- `tune.json`: the objective, how the search ended and every configuration tried with its capacity.

Files are written under new names, never over an earlier run's. Not for: the search itself
(`loadtest.search.tuning`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from loadtest.evidence.tables import plain_table
from loadtest.search.ladders import TUNED_FIELDS
from loadtest.search.tuning import UNRESOLVED, Evaluated, Gain, TuneAnswer, Visit
from serving.deploy.config import BATCHING_FIELDS, BatchingProfile
from serving.deploy.tfs_files import batching_parameters_text
from serving.endpoint import Device

PARAMETERS_FILE = "tuned_batching_parameters.txt"
TRAIL_FILE = "tune.json"
CONFIG_FILE = "serving/serving.toml"
# Trail-table headings of the tuned fields, in TUNED_FIELDS order.
FIELD_HEADINGS = ("timeout us", "max batch", "threads", "max enqueued")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


@dataclass(frozen=True)
class TuneFiles:
    """What `write_winner` wrote."""

    parameters_file: Path | None  # None when no batching configuration met the objective
    trail_file: Path


def profile_block(profile: BatchingProfile, name: str, comment: str = "") -> str:
    """A `[profiles.<name>]` table for serving.toml with every field the profile sets."""
    if not _BARE_KEY.fullmatch(name):
        raise ValueError(f"profile name {name!r}: use letters, digits, '_' and '-' (a TOML bare key)")
    lines = [f"# {line}" for line in comment.splitlines()]
    lines += [f"[profiles.{name}]", f"enable_batching = {_toml_value(profile.enable_batching)}"]
    for field_name in BATCHING_FIELDS if profile.enable_batching else ():
        value = getattr(profile, field_name)
        if value is not None:
            lines.append(f"{field_name} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(item) for item in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    return str(value)


# ---------------------------------------------------------------- files

def write_winner(run_dir: str | Path, answer: TuneAnswer) -> TuneFiles:
    """Write the winner's batching parameters file (when there is a winner) and `tune.json`, never overwriting."""
    directory = Path(run_dir)
    directory.mkdir(parents=True, exist_ok=True)
    parameters_file = None
    if answer.winner is not None:
        parameters_file = _write_new(directory, PARAMETERS_FILE, batching_parameters_text(answer.winner.profile))
    trail_file = _write_new(directory, TRAIL_FILE, json.dumps(tune_record(answer), indent=2) + "\n")
    return TuneFiles(parameters_file, trail_file)


def _write_new(directory: Path, name: str, text: str) -> Path:
    """Write `text` to `name`, or to `<stem>-2<suffix>`, `-3`, ... when that exists."""
    stem, suffix = Path(name).stem, Path(name).suffix
    for number in range(1, 10_000):
        path = directory / (name if number == 1 else f"{stem}-{number}{suffix}")
        try:
            with path.open("x") as out:
                out.write(text)
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory}: no free name for {name}")


def tune_record(answer: TuneAnswer) -> dict[str, Any]:
    """The answer as `tune.json` holds it: objective, how it ended, gains, and the whole trail."""
    return {
        "p99_objective_ms": answer.objective.p99_ms,
        "batch_size": answer.batch_size,
        "ended_because": answer.ended_because,
        "min_gain": answer.min_gain,
        "configurations_visited": answer.configurations_visited,
        "grid_size": answer.grid_size,
        "winner": answer.winner.number if answer.winner else None,
        "gain_vs_off": _gain_record(answer.gain_vs_off),
        "gain_vs_advice": _gain_record(answer.gain_vs_advice),
        "trail": [_visit_record(visit) for visit in answer.trail],
    }


def _gain_record(gain: Gain) -> dict[str, Any]:
    return {"ratio": gain.ratio, "reason": gain.reason, "at_least": gain.at_least}


def _visit_record(visit: Visit) -> dict[str, Any]:
    r = visit.result
    return {"number": visit.number, "stage": visit.stage.value, "profile": visit.profile.name,
            "parameters": visit.profile.parameters(), "moved_field": visit.moved_field,
            "capacity_rps": r.capacity_rps, "capacity_ips": r.capacity_ips, "p99_ms": r.p99_ms, "note": r.note,
            "decision": visit.decision, "duration_s": round(visit.duration_s, 3),
            "incumbent_beside_rps": visit.against.capacity_rps if visit.against else None}


# ---------------------------------------------------------------- console

def trail_table(answer: TuneAnswer) -> Table:
    """Every configuration tried, in order, with its tuned fields, capacity and what decided it; `*` the winner."""
    table = Table(box=None, pad_edge=False)
    for name in ("#", "stage", *FIELD_HEADINGS, "req/s", "img/s", "p99 ms", "decision"):
        table.add_column(name, justify="left" if name in ("stage", "decision") else "right")
    for visit in answer.trail:
        r = visit.result
        mark = "*" if visit is answer.winner else ""
        table.add_row(f"{mark}{visit.number}", visit.stage.value, *_field_cells(visit.profile),
                      ("≥" if r.at_least else "") + _number(r.capacity_rps, ".1f"), _number(r.capacity_ips, ".1f"),
                      _number(r.p99_ms, ".3f"), visit.decision)
    return table


def _field_cells(profile: BatchingProfile) -> list[str]:
    if not profile.enable_batching:
        return ["—"] * len(TUNED_FIELDS)
    return [_number(getattr(profile, name), "d") for name in TUNED_FIELDS]


def _number(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def answer_lines(answer: TuneAnswer, file: Path | None) -> list[str]:
    """The last lines printed: how the search went, the winner, its gains and the file."""
    lines = [f"search: visited {answer.configurations_visited} of {answer.grid_size} configurations "
             f"(plus batching off), {answer.ended_because}", _winner_line(answer)]
    if answer.winner is None:
        return lines
    lines.append(_gain_line(answer))
    if answer.winner.result.at_least:
        lines.append("the load generator was the limit (≥: a lower bound): give it cores of its own ([run] "
                     "loadgen_cpus, processes) to tell these configurations apart")
    unresolved = [v for v in answer.trail if v.decision.startswith(UNRESOLVED)]
    for visit in unresolved:
        lines.append(f"not settled: {visit.profile.name} {_unsettled(visit.result)}: search it longer "
                     "(--max-minutes) to settle it")
    off = answer.gain_vs_off.ratio
    if off is not None and off < 1 / (1 + answer.min_gain):
        lines.append("batching off serves more than any batching configuration confirmed: keep BATCHING=off"
                     + (", unless the configurations not settled confirm higher" if unresolved else ""))
    if file is not None:
        lines.append(f"file: {file} (use with --batching_parameters_file, or paste the profile block above "
                     f"into {CONFIG_FILE})")
    return lines


def _unsettled(result: Evaluated) -> str:
    """Why an unresolved challenger may yet beat what it was compared with."""
    if result.passed_rps is not None:
        return f"passed {result.passed_rps:g} req/s, not confirmed, above what it was compared with"
    return f"confirmed {result.score:g} req/s and no rate above it was shown to fail"


def _winner_line(answer: TuneAnswer) -> str:
    objective = f"{answer.objective}, request batch {answer.batch_size}"
    if answer.winner is None:
        return f"tuned: no batching configuration met {objective} ({len(answer.trail)} evaluated)"
    r = answer.winner.result
    bound = "at least " if r.at_least else ""
    return (f"tuned: winner {answer.winner.profile.name} {bound}{_number(r.capacity_rps, '.1f')} req/s "
            f"({_number(r.capacity_ips, '.1f')} img/s) at p99 {_number(r.p99_ms, '.1f')} ms "
            f"<= {answer.objective.p99_ms:g} ms, "
            f"request batch {answer.batch_size}")


def _gain_line(answer: TuneAnswer) -> str:
    over_off = _gain_text(answer.gain_vs_off, answer.off, "off")
    over_advice = _gain_text(answer.gain_vs_advice, answer.advice, _start_label(answer.advice))
    return f"batching gain {over_off}; {over_advice}"


def _start_label(advice: Visit | None) -> str:
    """serving.toml's cpu and gpu profiles are TF Serving's advice; any other start is named as such."""
    name = advice.profile.name if advice is not None else "?"
    return f"TF Serving's advice, profile {name}" if name in tuple(Device) else f"the start, profile {name}"


def _gain_text(gain: Gain, baseline: Visit | None, label: str) -> str:
    if gain.ratio is None:
        return f"unknown over {label} ({gain.reason})"
    assert baseline is not None
    bound = "at least " if gain.at_least else ""
    return f"{bound}×{gain.ratio:.2f} over {label} ({_number(baseline.result.capacity_rps, '.1f')} req/s)"


def answer_text(answer: TuneAnswer, files: TuneFiles, block_name: str = "tuned") -> str:
    """All that `make tune` prints: the trail, the winner's profile block, then the answer lines (last)."""
    parts = [plain_table(trail_table(answer), 10_000)]
    if answer.winner is not None:
        parts.append(profile_block(answer.winner.profile, block_name,
                                   comment=f"{answer.winner.profile.name}, tuned for {answer.objective}"))
    parts.append("\n".join(answer_lines(answer, files.parameters_file)))
    return "\n\n".join(part.rstrip("\n") for part in parts)
