"""docs/layout.md names every module of `serving/` and `loadtest/` in its room (issue #57).

Each table row is one folder (its path relative to the section's package, e.g. `server/handling/`); its modules
cell lists that folder's modules as backticked names, each optionally followed by a parenthesised note. The test
fails on a module the doc leaves out, on a name the doc lists that is no module there, and on a folder holding
modules that has no row.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "docs" / "layout.md"
PACKAGES = ("serving", "loadtest")
SECTION = re.compile(r"^## `(serving|loadtest)/`")
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|[^|]*\|([^|]*)\|\s*$")


def top_level_items(cell: str) -> list[str]:
    """The cell split on commas outside parentheses."""
    items, depth, current = [], 0, ""
    for char in cell:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += char
    return [*items, current]


def listed_modules(cell: str) -> set[str]:
    """The backticked name that opens each item of a modules cell ("`core` (`ServerConfig`, ...)" -> core)."""
    names = set()
    for item in top_level_items(cell):
        match = re.match(r"\s*`([A-Za-z_][A-Za-z0-9_]*)`", item)
        if match:
            names.add(match.group(1))
    return names


def doc_rows(text: str) -> dict[str, set[str]]:
    """Folder path (from the repository root, no trailing slash) -> the modules its row lists."""
    rows: dict[str, set[str]] = {}
    package = None
    for line in text.splitlines():
        heading = SECTION.match(line)
        if heading:
            package = heading.group(1)
        elif line.startswith("## "):
            package = None
        row = ROW.match(line)
        if package and row and row.group(1).endswith("/"):
            folder = f"{package}/{row.group(1).rstrip('/')}" if row.group(1) != f"{package}/" else package
            rows[folder] = listed_modules(row.group(2))
    return rows


def tree_modules() -> dict[str, set[str]]:
    """Folder -> its modules (stems), `__init__` left out, for every folder of the packages holding one."""
    folders: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if path.stem == "__init__":
                continue
            folders.setdefault(str(path.parent.relative_to(ROOT)), set()).add(path.stem)
    return folders


def test_the_parser_reads_names_and_skips_notes() -> None:
    cell = " `core` (`ServerConfig`, `ServingCore`: resolve, validate), `runner` (alone, batched or remote), `floor` "
    assert listed_modules(cell) == {"core", "runner", "floor"}


@pytest.mark.parametrize("folder", sorted(tree_modules()))
def test_every_folder_has_a_row_naming_each_of_its_modules(folder: str) -> None:
    rows = doc_rows(LAYOUT.read_text())
    assert folder in rows, f"docs/layout.md has no row for {folder}/"
    modules = tree_modules()[folder]
    listed = rows[folder] - {"__init__"}
    assert not modules - listed, f"docs/layout.md leaves out of {folder}/: {sorted(modules - listed)}"
    extra = sorted(listed - modules)
    assert not extra, f"docs/layout.md lists in {folder}/ what is no module there: {extra}"


def test_no_row_names_a_folder_that_is_gone() -> None:
    gone = set(doc_rows(LAYOUT.read_text())) - set(tree_modules())
    assert not gone, f"docs/layout.md has rows for folders without modules: {sorted(gone)}"
