"""Text tables for a terminal or a log: a `rich.table.Table` drawn as plain text, no colour or markup.

Used by everything in the load test that prints a table (the sweep's console table, the capacity
search's trail, the sizing answer, the benchmarks). Not for: the report's tables (Markdown and HTML).
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table


def plain_table(table: Table, width: int) -> str:
    """`table` as plain text at most `width` columns wide, trailing spaces trimmed."""
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, force_terminal=False,
            force_jupyter=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n")
