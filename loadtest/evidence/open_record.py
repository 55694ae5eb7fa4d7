"""Open records: typed keys for what the code reads, every other key kept as written.

A record whose key set varies with who wrote it (the server's version, the tool's) is open: its typed keys are
fields (None where the record lacks the key), `present` names the typed keys it has (a key written as null
included), and `extra` keeps every other key as it came, so that `from_dict(raw).to_dict() == raw`. Used by
`loadtest.evidence.floor_record` and `loadtest.evidence.provenance_record`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

OPEN = ("present", "extra")  # an open record's bookkeeping, not keys of its own


def typed_names(record: Any) -> tuple[str, ...]:
    """The names of an open record's typed keys."""
    return tuple(f.name for f in fields(record) if f.name not in OPEN)


def keep_present(record: Any) -> None:
    """`present` with every typed key that has a value added (a None one stays absent unless named there); for
    `__post_init__`."""
    given = frozenset(name for name in typed_names(record) if getattr(record, name) is not None)
    object.__setattr__(record, "present", frozenset(record.present) | given)


def split(cls: Any, raw: dict) -> tuple[dict, dict]:
    """`raw` as (the typed keys it has, every other key)."""
    typed = {f.name for f in fields(cls) if f.name not in OPEN}
    return {k: v for k, v in raw.items() if k in typed}, {k: v for k, v in raw.items() if k not in typed}


def written(record: Any, **converted: Any) -> dict:
    """An open record's keys: its present typed keys (`converted` replacing their values) and its extra ones."""
    values = {name: converted.get(name, getattr(record, name)) for name in typed_names(record)
              if name in record.present}
    return {**values, **record.extra}
