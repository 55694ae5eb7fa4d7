"""How the report and the sizing write numbers and parameter lists as text.

Not for: units or rounding of recorded values (the records keep full precision).
"""

from __future__ import annotations

MISSING = "—"


def number(value: float | None, digits: int = 1) -> str:
    """Thousands separated, fixed digits; "—" for a value that was not measured."""
    return MISSING if value is None else f"{value:,.{digits}f}"


def change(new: float | None, old: float | None) -> str:
    """Relative change from `old` to `new`, signed percent; "—" when either is missing or old is 0."""
    if new is None or old is None or old == 0:
        return MISSING
    return f"{(new - old) / old:+.1%}"


def params(d: dict, empty: str = MISSING) -> str:
    """`k=v, ...` sorted by key, or `empty`."""
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items())) or empty
