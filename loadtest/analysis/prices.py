"""The price book: cost per hour of one replica's machine, read from a TOML file the user edits.

Prices are looked up by the exact device name the results record, else by device kind. Unknown
fields are errors, so a typo cannot silently leave an option unpriced.

Not for: the sizing arithmetic that uses the prices (`loadtest.analysis.size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtest.analysis.series import AnalysisError
from serving.layering import SettingsError, read_toml

DEFAULT_PRICES = Path(__file__).resolve().parents[1] / "prices.example.toml"
PRICE_FIELDS = {"currency", "example", "note", "device", "device_name"}


@dataclass(frozen=True)
class PriceBook:
    """Cost per hour of one replica's machine, by exact device name, else by device kind."""

    source: str
    currency: str
    example: bool
    note: str
    by_device_name: dict
    by_device: dict

    def lookup(self, device: str, device_name: str) -> float | None:
        if device_name in self.by_device_name:
            return self.by_device_name[device_name]
        return self.by_device.get(device)


def _price_table(raw: dict, name: str, path: Path) -> dict:
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise AnalysisError(f"{path}: [{name}] must be a table of name = price per hour")
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise AnalysisError(f"{path}: [{name}] {key!r} must be a non-negative number, got {value!r}")
    return {key: float(value) for key, value in table.items()}


def load_prices(path: Path) -> PriceBook:
    """Read a price file; unknown fields are errors so a typo cannot silently price nothing."""
    path = Path(path)
    if not path.is_file():
        raise AnalysisError(f"price file not found: {path}")
    try:
        raw = read_toml(path, "price file")
    except SettingsError as exc:
        raise AnalysisError(str(exc)) from None
    unknown = sorted(set(raw) - PRICE_FIELDS)
    if unknown:
        raise AnalysisError(f"{path}: unknown field(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(PRICE_FIELDS))}")
    return PriceBook(source=str(path), currency=str(raw.get("currency", "USD")),
                     example=bool(raw.get("example", False)), note=str(raw.get("note", "")),
                     by_device_name=_price_table(raw, "device_name", path),
                     by_device=_price_table(raw, "device", path))
