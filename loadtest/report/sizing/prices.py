"""The price book: what the instances people rent cost per hour, read from a TOML file the user edits.

The format prices instance types with their size, so sizing can say how many measured replicas fit
one (`loadtest.report.sizing.instances`):

    [instances."general-16"]
    vcpus = 16
    gpus = 0
    cpu = "AMD EPYC"      # optional: the CPU model it has (absent: any CPU)
    memory_gib = 64       # optional: absent, memory does not limit how many replicas it holds
    reserve_vcpus = 1     # optional: vCPUs kept for the system (default: the file's, else 0)
    reserve_gib = 2       # optional: GiB kept for the system (default: the file's, else 0)
    price_per_hour = 0.68

`reserve_vcpus` and `reserve_gib` at the top of the file set them for every instance that does not set its own.

The older format priced one replica's machine by exact device name (`[device_name]`), else device
kind (`[device]`); it is still read, and sizing then says it prices replicas, not instances. A file
holds one format or the other. Unknown fields are errors, so a typo cannot silently leave an option
unpriced.

Not for: the sizing arithmetic that uses the prices (`loadtest.report.sizing.size`, whose rule `PriceBook.line`
states).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from loadtest.report.series import AnalysisError
from serving.layering import SettingsError, read_toml

DEFAULT_PRICES = Path(__file__).resolve().parents[2] / "prices.example.toml"
RESERVES = ("reserve_vcpus", "reserve_gib")
PRICE_FIELDS = {"currency", "example", "note", "device", "device_name", "instances", *RESERVES}
INSTANCE_FIELDS = {"vcpus", "gpus", "gpu", "cpu", "memory_gib", "price_per_hour", *RESERVES}


@dataclass(frozen=True)
class Instance:
    """One instance type: its size and its price per hour."""

    name: str
    vcpus: float
    gpus: int
    gpu: str  # the GPU's name ("" for none); matched exactly against the replica's
    cpu: str  # the CPU model ("" = any CPU); matched as a part of the replica's recorded model
    price_per_hour: float
    memory_gib: float | None = None  # None: not given (memory then does not limit)
    reserve_vcpus: float = 0.0  # kept for the system: not for replicas
    reserve_gib: float = 0.0

    def describe(self) -> str:
        size = f"{self.vcpus:g} vCPUs" + (f" of {self.cpu}" if self.cpu else "")
        size += f", {self.memory_gib:g} GiB" if self.memory_gib is not None else ""
        return size + (f", {self.gpus} × {self.gpu}" if self.gpus else "")


@dataclass(frozen=True)
class PriceBook:
    """Instances with their sizes and prices; or (the older format) one replica's price by device."""

    source: str
    currency: str
    example: bool
    note: str
    by_device_name: dict
    by_device: dict
    instances: tuple[Instance, ...] = ()

    @property
    def per_replica(self) -> bool:
        """True for the older format: prices of one replica's machine, not of instances."""
        return not self.instances

    def line(self) -> str:
        """What this file prices and how sizing fits replicas onto its instances, in one line."""
        example = "; EXAMPLE prices, not quotes" if self.example else ""
        if self.per_replica:
            return (f"Prices: {self.source} ({self.currency} per hour per replica{example}). This price file "
                    "prices replicas, not instances: each replica is priced as a whole machine, whatever its size "
                    "(the spare: replicas more); price [instances] with their vCPUs and GPUs to size in instances.")
        return (f"Prices: {self.source} ({self.currency} per hour per instance{example}). An instance holds the "
                "fewest of: floor((its vCPUs - reserve_vcpus) / a replica's cores, a GPU replica's pinned host cores "
                "too), floor((memory_gib - reserve_gib) / (a replica's memory + 10%)) where both are known, its GPUs "
                "/ a replica's GPUs; instances = ceil(replicas / replicas per instance) + the spare; the cheapest "
                "instance type that holds a replica.")

    def lookup(self, device: str, device_name: str) -> float | None:
        """The older format's price of one replica: by exact device name, else by device kind."""
        if device_name in self.by_device_name:
            return self.by_device_name[device_name]
        return self.by_device.get(device)


def _number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value >= 0


def _price_table(raw: dict, name: str, path: Path) -> dict:
    table = raw.get(name, {})
    if not isinstance(table, dict):
        raise AnalysisError(f"{path}: [{name}] must be a table of name = price per hour")
    for key, value in table.items():
        if not _number(value):
            raise AnalysisError(f"{path}: [{name}] {key!r} must be a non-negative number, got {value!r}")
    return {key: float(value) for key, value in table.items()}


def _reserves(raw: dict, where: str, default: tuple[float, float] = (0.0, 0.0)) -> tuple[float, float]:
    """`reserve_vcpus` and `reserve_gib` (each `default` where absent); AnalysisError names a bad one."""
    found = []
    for key, fallback in zip(RESERVES, default):
        value = raw.get(key, fallback)
        if not _number(value):
            raise AnalysisError(f"{where}: {key} must be a non-negative number, got {value!r}")
        found.append(float(value))
    return found[0], found[1]


def _memory(raw: dict, where: str, reserve_gib: float) -> float | None:
    value = raw.get("memory_gib")
    if value is None:
        return None
    if not _number(value) or value <= 0:
        raise AnalysisError(f"{where}: memory_gib must be a positive number, got {value!r}")
    if reserve_gib >= value:
        raise AnalysisError(f"{where}: reserve_gib ({reserve_gib:g}) leaves none of memory_gib ({value:g})")
    return float(value)


def _instance(name: str, raw: object, path: Path, reserves: tuple[float, float]) -> Instance:
    where = f"{path}: [instances.{name!r}]"
    if not isinstance(raw, dict):
        raise AnalysisError(f"{where} must be a table")
    unknown = sorted(set(raw) - INSTANCE_FIELDS)
    if unknown:
        raise AnalysisError(f"{where}: unknown field(s) {', '.join(unknown)}; "
                            f"known: {', '.join(sorted(INSTANCE_FIELDS))}")
    missing = [key for key in ("vcpus", "price_per_hour") if key not in raw]
    if missing:
        raise AnalysisError(f"{where}: missing {', '.join(missing)}")
    vcpus, gpus, price = raw["vcpus"], raw.get("gpus", 0), raw["price_per_hour"]
    if not _number(vcpus) or vcpus <= 0:
        raise AnalysisError(f"{where}: vcpus must be a positive number, got {vcpus!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise AnalysisError(f"{where}: gpus must be a whole number >= 0, got {gpus!r}")
    if not _number(price):
        raise AnalysisError(f"{where}: price_per_hour must be a non-negative number, got {price!r}")
    reserve_vcpus, reserve_gib = _reserves(raw, where, reserves)
    if reserve_vcpus >= vcpus:
        raise AnalysisError(f"{where}: reserve_vcpus ({reserve_vcpus:g}) leaves none of vcpus ({vcpus:g})")
    memory = _memory(raw, where, reserve_gib)
    gpu, cpu = raw.get("gpu", ""), raw.get("cpu", "")
    if not isinstance(gpu, str) or not isinstance(cpu, str):
        raise AnalysisError(f"{where}: gpu and cpu must be strings")
    if gpus and not gpu:
        raise AnalysisError(f"{where}: gpus = {gpus} needs gpu = \"its name\" (as the results record it)")
    return Instance(name, float(vcpus), gpus, gpu if gpus else "", cpu, float(price), memory, reserve_vcpus,
                    reserve_gib)


def _instances(raw: dict, path: Path) -> tuple[Instance, ...]:
    table = raw.get("instances", {})
    if not isinstance(table, dict):
        raise AnalysisError(f"{path}: [instances] must hold tables like [instances.\"general-16\"]")
    if table and ("device" in raw or "device_name" in raw):
        raise AnalysisError(f"{path}: price either [instances] or replicas ([device], [device_name]), not both")
    reserves = _reserves(raw, str(path))
    return tuple(_instance(name, value, path, reserves) for name, value in table.items())


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
                     by_device=_price_table(raw, "device", path), instances=_instances(raw, path))
