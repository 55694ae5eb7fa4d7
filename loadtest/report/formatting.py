"""How the report and the sizing write numbers and parameter lists as text.

Not for: units or rounding of recorded values (the records keep full precision).
"""

from __future__ import annotations

import math

MISSING = "—"


def number(value: float | None, digits: int = 1) -> str:
    """Thousands separated, fixed digits; "—" for a value that was not measured."""
    return MISSING if value is None else f"{value:,.{digits}f}"


def money(value: float | None) -> str:
    """A price to 3 significant figures (23.9, 4.00, 0.222, 0.00227; 1,235 from 1,000 up); "—" when unpriced."""
    if value is None:
        return MISSING
    if value == 0:
        return "0.00"
    digits = max(0, 2 - math.floor(math.log10(abs(value))))
    return f"{value:,.{digits}f}"


def change(new: float | None, old: float | None) -> str:
    """Relative change from `old` to `new`, signed percent; "—" when either is missing or old is 0."""
    if new is None or old is None or old == 0:
        return MISSING
    return f"{(new - old) / old:+.1%}"


def params(d: dict, empty: str = MISSING) -> str:
    """`k=v, ...` sorted by key, or `empty`."""
    return ", ".join(f"{k}={v}" for k, v in sorted(d.items())) or empty


NO_RANGE = "no range: neither bracket has an upper end"


def ratio_range(low: float | None, high: float | None, none: str = NO_RANGE) -> str:
    """A ratio's range from its two ends: `×1.12–×5.59`, only the end that holds (`at least ×0.90`), or `none`."""
    if low is not None and high is not None:
        return f"×{low:.2f}–×{high:.2f}"
    if low is not None:
        return f"at least ×{low:.2f}"
    if high is not None:
        return f"at most ×{high:.2f}"
    return none


def ratio_value(ratio: float | None, low: float | None, high: float | None) -> str:
    """A ratio as every place prints it: `×1.62 (×1.55–×1.70)`, only the end that holds where one is open (`at
    least ×0.50`: never a point estimate beside an open range), `—` without a ratio."""
    if ratio is None:
        return "—"
    if low is not None and high is not None:
        return f"×{ratio:.2f} ({ratio_range(low, high)})"
    return ratio_range(low, high)
