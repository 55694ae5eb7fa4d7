"""What every cell of a run records about where it was measured (`CellResult.provenance`): the code, the load
generator's machine, the library versions, the plan, the command and the requests' inputs.

Its key set grew with the tool: the oldest records hold the commit, host, CPU model, versions and the plan's path;
later ones add the machine's cores, the command and the inputs; a hand-made or failed record may hold fewer. So the
record is open (`loadtest.evidence.open_record`): a key it lacks reads None, and `from_dict(raw).to_dict() == raw`.

Not for: collecting it (`loadtest.measure.cell_results.collect_provenance`, from `model_export.provenance`) or the
server's own versions (`ServerLabel.versions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.evidence.open_record import keep_present, split, written


@dataclass(frozen=True)
class Provenance:
    """The run's provenance, shared by its cells; every key None where the record lacks it."""

    git_commit: str | None = None  # the source commit ("unknown" outside a checkout or bundle)
    git_dirty: bool | None = None  # uncommitted changes; None where git could not tell
    host: str | None = None  # the load generator's host name
    cpu_model: str | None = None  # the load generator's CPU
    cpu_count: int | None = None  # its logical CPUs
    cpu_physical_cores: int | None = None
    cpu_virtualization: str | None = None  # "none", a hypervisor's name, or "unknown"
    loadgen_cores: int | None = None  # the cores the load generator could use
    platform: str | None = None
    python: str | None = None
    versions: dict[str, str] | None = None  # package -> version, on the load generator's side
    utc_time: str | None = None  # when the run began
    plan_path: str | None = None
    plan: dict[str, Any] | str | None = None  # the plan as recorded (`Plan.to_dict`); the oldest records: its path
    command: tuple[str, ...] | None = None  # the command line that ran it
    inputs: dict[str, Any] | None = None  # where the requests' inputs came from (`loadtest.load.inputs`)
    present: frozenset[str] = frozenset()  # the typed keys written, None ones included
    extra: dict = field(default_factory=dict)  # every other key, as written

    def __post_init__(self) -> None:
        keep_present(self)

    def launch(self) -> dict[str, Any]:
        """The plan's `[launch]` table; {} where the record holds no plan of tables (the oldest: its path only)."""
        launch = self.plan.get("launch") if isinstance(self.plan, dict) else None
        return launch if isinstance(launch, dict) else {}

    def to_dict(self) -> dict:
        return written(self, command=None if self.command is None else list(self.command))

    @classmethod
    def from_dict(cls, raw: dict) -> Provenance:
        typed, extra = split(cls, raw)
        if typed.get("command") is not None:
            typed["command"] = tuple(typed["command"])
        return cls(**typed, present=frozenset(typed), extra=extra)
