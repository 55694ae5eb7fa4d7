"""Where the repository is, for tests that run its commands as a user would."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ANALYSIS_FIXTURES = REPO / "tests" / "loadtest" / "analysis" / "fixtures"  # hand-made results of three runs
