"""The lowest p99 objective the host itself allows: where the machine's own stalls put an objective out of reach.

Over the measured open-loop cells (neither overloaded nor limited by the load generator), per configuration and
request batch: the lowest objective the host probe let them confirm (`loadtest.judge.noise.lowest_confirmable_ms`),
per device for the card's and the headline's "why none" (`host_floor_ms`), and the headline's sentence for a host
that makes an objective unconfirmable by itself (`host_floor_lines`).

Pure functions over `CellResult`s. Not for: whose slow requests they were (`loadtest.report.sections.noise_table`)
or the probe's rules (`loadtest.judge.noise`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, LoadMode
from loadtest.judge import noise
from loadtest.judge.overload import overloaded_reason
from loadtest.judge.verdicts import client_limited
from loadtest.report.configs import Config, config_of


def open_cells(results: Iterable[CellResult]) -> dict[tuple[Config, int], list[CellResult]]:
    """Measured open-loop cells by configuration and request batch size, neither overloaded nor limited by the
    load generator (its late sends' latencies, timed from the intended send, are its own)."""
    groups: dict[tuple[Config, int], list[CellResult]] = {}
    for c in results:
        if (c.load.mode == LoadMode.OPEN and c.status == CellStatus.OK and c.requests
                and overloaded_reason(c) is None and not client_limited(c)):
            groups.setdefault((config_of(c), c.load.request_batch_size), []).append(c)
    return groups


def host_floor_ms(results: Sequence[CellResult], device: str, batch: int) -> float | None:
    """The lowest objective the host allowed the open-loop cells on `device` at request batch `batch`."""
    cells = [c for (config, b), group in open_cells(results).items() if config.device == device and b == batch
             for c in group]
    return noise.lowest_confirmable_ms(cells)


def host_floor_lines(results: Sequence[CellResult], objectives: Sequence[float]) -> tuple[str, ...]:
    """`objectives below X ms cannot be confirmed on this host ...`, where the host's own stalls put an
    objective out of reach; () where no probe ran or every objective asked for is within reach."""
    lines = []
    for (config, batch), cells in sorted(open_cells(results).items()):
        floor = noise.lowest_confirmable_ms(cells)
        if floor is None or not any(o < floor for o in objectives):
            continue
        side = noise.host_share(cells, floor)
        where = noise.SIDE_NAMES.get(side[1], "") if side else ""
        name = config.name or config.device
        lines.append(f"objectives below {floor:g} ms cannot be confirmed on this host for {name}"
                     f" (request batch {batch}): the machine's own stalls{' on ' + where if where else ''} held a "
                     f"1 ms sleep loop past them more than 0.5% of the time, whatever the server does.")
    return tuple(dict.fromkeys(lines))


__all__ = ["host_floor_lines", "host_floor_ms", "open_cells"]
