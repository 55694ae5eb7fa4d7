"""No module of `loadtest/report/` imports more than `MOST` of the project's modules (issue #68 item 8): a module
that needs more does more than one thing. A name imported from a package's module counts that module once; a module
imported from a package (`from loadtest.report.sections import details`) counts as itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = ROOT / "loadtest" / "report"
PROJECT = ("loadtest", "serving", "model_export")
MOST = 15


def project_imports(source: str) -> set[str]:
    """The project's modules a module's source imports, anywhere in it (lazy and type-checking imports too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                found.add(inner if (ROOT / Path(*inner.split("."))).with_suffix(".py").exists() else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] in PROJECT}
    return found


def test_the_count_reads_modules_not_names():
    source = ("from loadtest.report.sections import details, noise_table\n"
              "from loadtest.report.answers.answers import Answers, answer\n"
              "import loadtest.report.page\n"
              "def f():\n    from serving.endpoint import ServerKind\n")
    assert project_imports(source) == {"loadtest.report.sections.details", "loadtest.report.sections.noise_table",
                                       "loadtest.report.answers.answers", "loadtest.report.page", "serving.endpoint"}


def test_no_report_module_imports_more_than_fifteen_of_the_projects():
    counts = {str(p.relative_to(ROOT)): len(project_imports(p.read_text())) for p in REPORT.rglob("*.py")}
    over = {path: n for path, n in counts.items() if n > MOST}
    assert not over, f"modules importing more than {MOST} of the project's: {over}"
